"""An SSL listener: accept, TLS handshake, then a Connection.

`create_server(ssl=...)` is not used because a failed handshake there is invisible
to the application (asyncio and uvloop log it only in debug mode). Neither is
`start_tls` on a plain accepted transport: uvloop may hand the ClientHello to the
plain protocol before the TLS layer is in place. Instead the listener accepts with
`loop.sock_accept` and hands each socket to `loop.connect_accepted_socket(ssl=...)`,
which returns once the handshake is done and raises when it fails: the failure
closes that one connection, is logged once without a stack trace (WARNING for a
TLS error such as an untrusted or expired certificate or a plaintext client, INFO
for a client that went away) and counted in
`logflume_broker_tls_handshake_failures`.

The Connection's principal comes from the verified client certificate
(`principal.principal` with the listener's `ssl.principal.mapping.rules`); a
certificate no rule maps is refused like a failed handshake, as Kafka refuses it.

Owned by the server; event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from broker.listeners import Listener
from broker.server.principal import principal

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0
ACCEPT_ERROR_BACKOFF_S = 0.1  # e.g. out of file descriptors


class TlsListener:
    """One bound SSL listener and the handshakes it runs."""

    def __init__(self, server, listener: Listener, context: ssl.SSLContext, rules):
        self.server = server
        self.listener = listener
        self.context = context
        self.rules = rules
        self.sock: socket.socket | None = None
        self.handshakes: set[asyncio.Task] = set()
        self._accepting: asyncio.Task | None = None

    async def start(self) -> int:
        """Bind and start accepting; returns the port bound."""
        loop = asyncio.get_running_loop()
        lst = self.listener
        infos = await loop.getaddrinfo(
            lst.host or None, lst.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(1024)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        self._accepting = asyncio.create_task(self._accept(sock))
        return sock.getsockname()[1]

    def close(self) -> None:
        """Stop accepting and abandon the handshakes under way."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self.handshakes):
            task.cancel()
        if self.sock is not None:
            self.sock.close()

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listening)
            except OSError as e:
                log.warning("listener %s: accept failed: %s", self.listener.name, e)
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_S)
                continue
            task = asyncio.create_task(self._handshake(sock, peer))
            self.handshakes.add(task)
            task.add_done_callback(self.handshakes.discard)

    async def _handshake(self, sock: socket.socket, peer) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: self.server.make_connection(self.listener.name, self.identify),
                sock,
                ssl=self.context,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            )
        except ssl.SSLError as e:
            self.failed(peer, _describe(e))
            sock.close()
        except (OSError, TimeoutError) as e:  # the client went away or never spoke
            self.failed(peer, _describe(e), logging.INFO)
            sock.close()

    def identify(self, transport: asyncio.Transport) -> str:
        """The principal of a connection whose handshake is done (NoMatchingRule when
        ssl.principal.mapping.rules maps no rule to its certificate)."""
        der = transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return principal(der, self.rules)

    def failed(self, peer, reason: str, level: int = logging.WARNING) -> None:
        self.server.core.metrics.tls_handshake_failures += 1
        log.log(
            level,
            "TLS handshake with %s:%d on listener %s failed: %s",
            peer[0],
            peer[1],
            self.listener.name,
            reason,
        )


def _describe(e: Exception) -> str:
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
        return f"{e.reason}: {e.verify_message}"  # e.g. certificate has expired
    if isinstance(e, ssl.SSLError):
        return e.reason or e.__class__.__name__
    if isinstance(e, TimeoutError):
        return f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"
    return str(e) or e.__class__.__name__
