"""An SSL listener: accept, TLS handshake, then a Connection.

The listener accepts with `loop.sock_accept` and runs each socket's handshake in
a `tls_transport.TlsTransport` (TLS in the event loop's socket callbacks, not
asyncio's SSL layer, which costs several copies of every fetched byte), then hands
the transport to a Connection. A failed handshake closes that one connection, is
logged once without a stack trace (WARNING for a TLS error such as an untrusted or
expired certificate or a plaintext client, INFO for a client that went away or never
finished) and counted in `logflume_broker_tls_handshake_failures`. (asyncio's own
TLS servers are not used: `create_server(ssl=...)` hides failed handshakes, and on
uvloop `start_tls` may hand the ClientHello to the plain protocol first.)

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
from broker.server.tls_transport import TlsBuffers, TlsTransport
from common.aio import within

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
        self.buffers = TlsBuffers()  # shared by this listener's connections
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
        try:
            transport = TlsTransport(sock, self.context, self.buffers)
            await within(transport.handshake(), HANDSHAKE_TIMEOUT_S)
        except ssl.SSLError as e:
            self.failed(peer, _describe(e))
            sock.close()
            return
        except (OSError, TimeoutError) as e:  # the client went away or never spoke
            self.failed(peer, _describe(e), logging.INFO)
            sock.close()
            return
        except asyncio.CancelledError:  # the listener is closing
            sock.close()
            raise
        transport.start(self.server.make_connection(self.listener.name, self.identify))

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
