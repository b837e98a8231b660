"""Writing framed responses to a connection's transport, FetchSlice parts zero-copy.

A response is a list of bytes-like parts and FetchSlice parts (segment file ranges),
cut by `segments` (broker.server.framing) into runs of bytes and slices. A run goes
to `transport.writelines`. A slice goes out with os.sendfile on the socket directly
(zero copy), but only once the transport's buffer is empty, so the bytes before it
are on the wire first; whatever the socket does not take at once is finished in the
background by `loop.sendfile` (stdlib loop) or a buffered copy (uvloop), and
`sending` stays True until then: nothing else may be written meanwhile, or it would
land between a header and its records. A TLS connection cannot sendfile (the bytes
must be encrypted in this process): its transport (broker.server.tls_transport)
takes the response's parts as they are and reads the slices as it encrypts them.

Nothing is written to a transport that is closing: asyncio would drop the bytes but
not the sendfile slices, leaving records without their frame on the wire.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from broker.log.common import FetchSlice
from broker.server.framing import segments
from broker.server.tls_transport import TlsTransport


class ResponseWriter:
    """Writes one connection's responses. Owned by its Connection; event-loop only."""

    def __init__(
        self,
        *,
        direct_sendfile: bool,
        loop_sendfile: bool,
        close: Callable[[str], None],
        sent: Callable[[], None],
    ):
        """`direct_sendfile` / `loop_sendfile` are the server's choices for its event
        loop. `close(reason)` drops the connection; `sent()` is called when a slice
        finished in the background is out."""
        self.direct_sendfile = direct_sendfile
        self.loop_sendfile = loop_sendfile
        self._close = close
        self._sent = sent
        self.transport: asyncio.Transport  # set by connect(), before any write
        self._tls: TlsTransport | None = None  # the transport, when it is TLS
        self._fd = -1
        self.sending = False  # a slice is being finished in the background

    def connect(self, transport: asyncio.Transport) -> None:
        """Write to `transport` from now on; os.sendfile goes to its socket, if it
        has one and is not TLS."""
        self.transport = transport
        self._tls = transport if isinstance(transport, TlsTransport) else None
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None and self._tls is None else -1

    def write(self, parts: list) -> None:
        """Write one framed response; it may leave `sending` set."""
        if self._closing():
            return
        if self._tls is not None:
            self._tls.write_parts(parts)
            return
        self._write_segments(segments(parts))

    def _closing(self) -> bool:
        """The transport is closing: close the connection rather than write to it."""
        if self.transport.is_closing():
            self._close("transport closed")
            return True
        return False

    def _write_segments(self, plan: list) -> None:
        transport = self.transport
        for i, segment in enumerate(plan):
            if type(segment) is list:
                transport.writelines(segment)
                continue
            sent = self._sendfile_now(segment)
            if sent < segment.length:
                self.sending = True
                task = asyncio.ensure_future(self._send_rest(segment, sent, plan[i + 1 :]))
                task.add_done_callback(self._on_send_done)
                return

    def _sendfile_now(self, part: FetchSlice) -> int:
        """os.sendfile as much of the slice as the socket takes without blocking."""
        if self._fd < 0 or self.transport.get_write_buffer_size() or not self.direct_sendfile:
            return 0
        sent = 0
        src = part.file.fileno()
        try:
            while sent < part.length:
                n = os.sendfile(self._fd, src, part.position + sent, part.length - sent)
                if n == 0:
                    break
                sent += n
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self._close(f"sendfile failed: {e}")
            return part.length
        return sent

    async def _send_rest(self, part: FetchSlice, sent: int, rest: list) -> None:
        remaining = part.length - sent
        if self.loop_sendfile:
            loop = asyncio.get_running_loop()
            await loop.sendfile(self.transport, part.file, part.position + sent, remaining)
        else:
            self.transport.write(os.pread(part.file.fileno(), remaining, part.position + sent))
        self.sending = False
        if rest and not self._closing():
            self._write_segments(rest)

    def _on_send_done(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            self._close(f"sendfile failed: {task.exception()}")
            return
        self._sent()
