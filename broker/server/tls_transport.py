"""A TLS connection's transport: TLS records read and written in the event loop's own
socket callbacks (`add_reader` / `add_writer`), without asyncio's SSL layer.

Why not asyncio's SSL transport: in CPython 3.11 it encrypts a whole write into a
memory BIO, copies it out into a new bytes object, and copies what the socket does
not take at once into the socket transport's buffer. A fetch response of several
megabytes, read from its segment files into one buffer to be written, thus went
through three more buffers of its size, each freshly allocated: their page faults
and unmapping cost more than the cipher (bench/bench_tls.py measures the broker's
CPU per fetched MB).

This transport streams instead. It queues a response's parts as they are, bytes and
FetchSlice file ranges (broker.log.common) alike, and whenever the socket can take
more it encrypts the next `CHUNK` of plaintext: bytes parts are copied into a scratch
buffer, file slices read into it with os.preadv (a large bytes part is encrypted in
place). So the records are read from the page cache once, encrypted while still in
the CPU cache, and a connection never holds more than one chunk of ciphertext. The
scratch buffers (`TlsBuffers`) are shared by the connections of one listener: the
event loop runs one callback at a time and none keeps them across a callback.

The TLS state is an ssl.SSLObject over two memory BIOs, as in asyncio: what the
socket delivers is fed to it in large reads; what it has to send (records, alerts,
TLS 1.3 session tickets and key updates) goes out before more data is encrypted.
The listener's context refuses renegotiation (broker.server.tls), as Kafka does, so
encrypting never waits for the peer.

Closing: `close()` sends what is queued, then a close_notify alert, then closes the
socket without waiting for the peer's close_notify; `abort()` closes at once. Either
way `connection_lost` is called once, soon after. An error reading a fetched slice
(a segment file shorter than its slice, or closed) aborts the connection: its records cannot
be sent, and nothing else may be sent in their place.

Event-loop only; the stdlib loop and uvloop alike.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import cast

from broker.log.common import FetchSlice

log = logging.getLogger(__name__)

CHUNK = 128 * 1024  # plaintext encrypted at a time: 8 full TLS records
RECEIVE = 256 * 1024  # the most read from the socket, and decrypted, at a time
HIGH_WATER = 64 * 1024  # queued bytes above which the protocol is asked to pause writing
LOW_WATER = 16 * 1024  # ... and at or below which it may write again


class TlsBuffers:
    """Scratch buffers shared by the TLS connections of one event loop; each is used
    within one callback only."""

    def __init__(self) -> None:
        self.plain = memoryview(bytearray(CHUNK))  # plaintext about to be encrypted
        self.received = memoryview(bytearray(RECEIVE))  # socket reads, then decrypted data


class TlsTransport(asyncio.Transport):
    """The server side of one TLS connection: `handshake()`, then `start(protocol)`."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, buffers: TlsBuffers):
        super().__init__()
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self._buffers = buffers
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._extra = {
            "socket": sock,
            "peername": sock.getpeername(),
            "sockname": sock.getsockname(),
            "sslcontext": context,
            "ssl_object": self._ssl,
        }
        self._protocol: asyncio.Protocol | None = None
        self._queue: collections.deque = collections.deque()  # bytes-like and FetchSlice parts
        self._head_done = 0  # bytes of the queue's first part already encrypted
        self._queued = 0  # plaintext bytes queued, not encrypted yet
        self._pending: memoryview | None = None  # ciphertext the socket did not take yet
        self._reading = False
        self._writing = False  # a writer callback is registered
        self._protocol_paused = False
        self._closing = False
        self._closed = False

    # -- the handshake ------------------------------------------------------------

    async def handshake(self) -> None:
        """Run the TLS handshake; ssl.SSLError if it fails (the alert is sent, when
        there is one), ConnectionResetError if the client goes away meanwhile. The
        caller bounds it in time and closes the socket on failure."""
        loop = self._loop
        self._sock.setblocking(False)
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                self._send_now(self._outgoing.read())
                raise
            if self._outgoing.pending:
                await loop.sock_sendall(self._sock, self._outgoing.read())
            data = await loop.sock_recv(self._sock, RECEIVE)
            if not data:
                raise ConnectionResetError("the client closed the connection in the handshake")
            self._incoming.write(data)
        if self._outgoing.pending:
            await loop.sock_sendall(self._sock, self._outgoing.read())

    def start(self, protocol: asyncio.Protocol) -> None:
        """Hand the connection to `protocol`, and what the client sent with the end of
        its handshake with it."""
        self._protocol = protocol
        protocol.connection_made(self)
        if self._closing:
            return
        self.resume_reading()

    # -- asyncio.Transport ----------------------------------------------------------

    def get_extra_info(self, name, default=None):
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def is_reading(self) -> bool:
        return self._reading

    def pause_reading(self) -> None:
        if self._reading and not self._closing:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._closing:
            self._reading = True
            self._loop.add_reader(self._fd, self._on_readable)
            # Records decrypted into the BIO before the pause wait for no socket event.
            self._loop.call_soon(self._deliver)

    def get_write_buffer_size(self) -> int:
        return self._queued + (len(self._pending) if self._pending is not None else 0)

    def write(self, data) -> None:
        self.write_parts([data])

    def writelines(self, list_of_data) -> None:
        self.write_parts(list(list_of_data))

    def write_parts(self, parts: list) -> None:
        """Queue a response's parts, bytes-like and FetchSlice, in order; the slices
        are read from their files as the socket drains."""
        if self._closing:
            return
        for part in parts:
            size = len(part)
            if size:
                self._queue.append(part)
                self._queued += size
        self._send()
        if not self._protocol_paused and self.get_write_buffer_size() > HIGH_WATER:
            self._protocol_paused = True
            assert self._protocol is not None  # writes come from the protocol
            self._protocol.pause_writing()

    def close(self) -> None:
        """Send what is queued, then close_notify, then close."""
        if self._closing:
            return
        self.pause_reading()
        self._closing = True
        self._send()

    def abort(self) -> None:
        self._closing = True
        self._shut(None)

    # -- reading --------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            n = self._sock.recv_into(self._buffers.received)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._shut(e)
            return
        if n == 0:
            self._eof()
            return
        self._incoming.write(self._buffers.received[:n])
        self._deliver()

    def _deliver(self) -> None:
        """Decrypt what the incoming BIO holds and hand it to the protocol, as long as
        reading is not paused."""
        view = self._buffers.received
        # Into a buffer, SSLObject.read returns a count (typeshed says bytes, bytearray).
        read_into = cast(Callable[[int, memoryview], int], self._ssl.read)
        while self._reading and not self._closed:
            got = 0
            eof = False
            try:
                while got < RECEIVE:
                    n = read_into(RECEIVE - got, view[got:])
                    if n == 0:  # the client's close_notify
                        eof = True
                        break
                    got += n
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as e:
                self._send_now(self._outgoing.read())  # the alert, if any
                self._shut(e)
                return
            if self._outgoing.pending:  # e.g. the answer to a TLS 1.3 key update
                self._send()
            if got:
                assert self._protocol is not None  # reading starts with the protocol
                self._protocol.data_received(view[:got].tobytes())
            if eof:
                self._eof()
                return
            if got < RECEIVE:
                return

    def _eof(self) -> None:
        self.pause_reading()
        assert self._protocol is not None  # reading starts with the protocol
        if not self._protocol.eof_received():
            self.close()

    # -- writing --------------------------------------------------------------------

    def _send(self) -> None:
        """Send until the socket is full or nothing is left; then watch for it to
        drain, or let the protocol write again, or finish closing."""
        if self._closed:
            return
        while True:
            if self._pending is None:
                try:
                    data = self._encrypt_next()
                except ssl.SSLError as e:
                    self._shut(e)
                    return
                except (OSError, ValueError) as e:  # ValueError: a closed segment file
                    log.info(
                        "closing TLS connection from %s:%d: reading a fetched slice failed: %s",
                        *self._extra["peername"][:2],
                        e,
                    )
                    self._shut(e)
                    return
                if not data:
                    break
                self._pending = memoryview(data)
            try:
                sent = self._sock.send(self._pending)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as e:
                self._shut(e)
                return
            if sent < len(self._pending):
                self._pending = self._pending[sent:]
                self._watch_writable(True)
                return
            self._pending = None
        self._watch_writable(False)
        if self._closing:
            self._finish_close()
        elif self._protocol_paused and self.get_write_buffer_size() <= LOW_WATER:
            self._protocol_paused = False
            assert self._protocol is not None  # pausing came from the protocol
            self._protocol.resume_writing()

    def _encrypt_next(self) -> bytes:
        """The next ciphertext to send: what the TLS object has to say, else the next
        chunk of the queue encrypted; b"" when there is nothing."""
        if not self._outgoing.pending and self._queue:
            plaintext, done, head_done = self._next_plaintext()
            self._ssl.write(plaintext)
            for _ in range(done):
                self._queued -= len(self._queue.popleft())
            self._queued -= head_done - self._head_done
            self._head_done = head_done
        return self._outgoing.read()

    def _next_plaintext(self) -> tuple[memoryview, int, int]:
        """Up to CHUNK bytes from the head of the queue, and where the queue stands
        after them (parts finished, bytes of the next part taken). OSError if a
        segment file ends inside its slice."""
        queue = self._queue
        offset = self._head_done
        head = queue[0]
        if not isinstance(head, FetchSlice) and len(head) - offset >= CHUNK:
            return memoryview(head)[offset : offset + CHUNK], 0, offset + CHUNK
        buf = self._buffers.plain
        filled = done = 0
        while filled < CHUNK and done < len(queue):
            part = queue[done]
            take = min(len(part) - offset, CHUNK - filled)
            if isinstance(part, FetchSlice):
                target = buf[filled : filled + take]
                take = os.preadv(part.file.fileno(), [target], part.position + offset)
                if take == 0:
                    raise OSError(f"segment file ends inside a fetched slice at {offset}")
            else:
                buf[filled : filled + take] = memoryview(part)[offset : offset + take]
            filled += take
            offset += take
            if offset == len(part):
                done += 1
                offset = 0
        return buf[:filled], done, offset

    def _watch_writable(self, on: bool) -> None:
        if on and not self._writing:
            self._loop.add_writer(self._fd, self._send)
        elif not on and self._writing:
            self._loop.remove_writer(self._fd)
        self._writing = on

    def _send_now(self, data: bytes) -> None:
        """Best effort, without waiting: an alert or close_notify on the way out."""
        try:
            self._sock.send(data)
        except OSError:
            pass

    # -- closing --------------------------------------------------------------------

    def _finish_close(self) -> None:
        try:
            self._ssl.unwrap()
        except ssl.SSLError:
            pass  # close_notify is written; the peer's is not awaited
        self._send_now(self._outgoing.read())
        self._shut(None)

    def _shut(self, exc: Exception | None) -> None:
        """Close the socket; the protocol hears of it soon after."""
        if self._closed:
            return
        self._closed = self._closing = True
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)
        self._watch_writable(False)
        self._queue.clear()
        self._queued = 0
        self._pending = None
        self._sock.close()
        if self._protocol is not None:
            self._loop.call_soon(self._protocol.connection_lost, exc)
