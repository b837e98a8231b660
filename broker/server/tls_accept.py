"""The TLS handshake of an accepted connection, before it becomes a Connection.

An SSL listener accepts plain TCP with `TlsAccept` as protocol, which at once pauses
reading and runs `loop.start_tls` (server side). Only a completed handshake makes a
`Connection`: the principal is taken from the client certificate, the Connection is
attached to the TLS transport and gets whatever application data arrived with the
handshake. `create_server(ssl=...)` is not used because a failed handshake there
is invisible to the application (asyncio logs it only in debug mode): here it
closes that one connection, is logged once without a stack trace and counted in
`logflume_broker_tls_handshake_failures`.

Owned by the server; event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from broker.server.principal import NoMatchingRule, principal

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0


class TlsAccept(asyncio.Protocol):
    """Protocol of a TLS connection until its handshake is done; then it hands over
    to `make_connection(listener, principal)` and only forwards what arrived in
    between."""

    def __init__(self, server, listener, context: ssl.SSLContext, rules):
        self.server = server
        self.listener = listener
        self.context = context
        self.rules = rules
        self.conn = None
        self._early: list[bytes] = []
        self._eof = False
        self._task: asyncio.Task | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        # Paused now, before asyncio starts reading: the ClientHello must reach
        # the TLS layer, not this protocol.
        transport.pause_reading()
        peer = transport.get_extra_info("peername") or ("?", 0)
        self._task = asyncio.ensure_future(self._handshake(transport, peer))
        self.server.handshakes.add(self._task)
        self._task.add_done_callback(self.server.handshakes.discard)

    async def _handshake(self, transport: asyncio.Transport, peer) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(
                transport,
                self,
                self.context,
                server_side=True,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            )
        except ssl.SSLError as e:
            self._failed(transport, peer, _describe(e))
            return
        except (OSError, TimeoutError) as e:  # the client went away or never spoke
            self._failed(transport, peer, _describe(e), logging.INFO)
            return
        der = tls.get_extra_info("ssl_object").getpeercert(binary_form=True)
        try:
            who = principal(der, self.rules)
        except (NoMatchingRule, ValueError) as e:
            self._failed(tls, peer, str(e))
            return
        conn = self.server.make_connection(self.listener, who)
        self.conn = conn
        tls.set_protocol(conn)
        conn.connection_made(tls)
        log.debug("TLS connection from %s:%d on %s as %s", peer[0], peer[1], self.listener, who)
        for data in self._early:
            conn.data_received(data)
        self._early.clear()
        if self._eof and not conn.eof_received():
            tls.close()

    def _failed(self, transport: asyncio.BaseTransport, peer, reason: str, level=logging.WARNING):
        self.server.core.metrics.tls_handshake_failures += 1
        log.log(
            level,
            "TLS handshake with %s:%d on listener %s failed: %s",
            peer[0],
            peer[1],
            self.listener,
            reason,
        )
        transport.abort()

    # Between the end of the handshake and the hand-over (same loop iteration),
    # asyncio may already deliver application data: keep it for the Connection.
    def data_received(self, data: bytes) -> None:
        self._early.append(data)

    def eof_received(self) -> bool:
        self._eof = True
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()


def _describe(e: Exception) -> str:
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
        return f"{e.reason}: {e.verify_message}"  # e.g. certificate has expired
    if isinstance(e, ssl.SSLError):
        return e.reason or e.__class__.__name__
    if isinstance(e, TimeoutError):
        return f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"
    return str(e) or e.__class__.__name__
