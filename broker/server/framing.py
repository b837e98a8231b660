"""Kafka's framing on one connection, sans-I/O: bytes in, request frames out; response
parts out as the segments the I/O shell writes.

Every request and response is an int32 size prefix and that many bytes. The framer
is fed whatever a socket read returned (`receive_data`) and hands out complete
frames, one per `next_frame` call, however the stream was split into reads. A size
prefix above `socket.request.max.bytes` (or negative) is refused as soon as its four
bytes arrive, before the body is buffered; so is one above
`sasl.server.max.receive.size` while a SASL connection is not authenticated yet, as
in Kafka. The connection closes on FrameTooLarge: what follows the prefix can no
longer be cut into frames.

Responses come from the codec (broker.protocol.encode_response) already framed: a
list of bytes-like parts and FetchSlice parts (segment file ranges, sent zero-copy).
`segments` groups them into what the shell does in turn: write a run of bytes-like
parts, or send a file slice. Nothing here touches a socket or a file.
"""

from __future__ import annotations

from broker.log.common import FetchSlice

BYTES_LIKE = (bytes, bytearray, memoryview)


class FrameTooLarge(Exception):
    """A request's size prefix is above the limit in force (or negative)."""


class RequestFramer:
    """Cuts one connection's byte stream into request frames. Owned by its connection."""

    __slots__ = ("_buf", "max_request_bytes", "max_unauthenticated_bytes")

    def __init__(self, max_request_bytes: int, max_unauthenticated_bytes: int | None = None):
        """`max_unauthenticated_bytes` (SASL listeners) holds until `authenticated()`."""
        self._buf = bytearray()
        self.max_request_bytes = max_request_bytes
        self.max_unauthenticated_bytes = max_unauthenticated_bytes

    def receive_data(self, data: bytes) -> None:
        self._buf += data

    def authenticated(self) -> None:
        """The SASL exchange completed: only socket.request.max.bytes limits frames."""
        self.max_unauthenticated_bytes = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as a frame."""
        return len(self._buf)

    def next_frame(self) -> bytes | None:
        """The next complete frame (without its size prefix), None until one is in.
        Raises FrameTooLarge as soon as a refused size prefix is buffered."""
        buf = self._buf
        if len(buf) < 4:
            return None
        size = int.from_bytes(buf[:4], "big", signed=True)
        if size < 0 or size > self.max_request_bytes:
            raise FrameTooLarge(
                f"request size {size} exceeds socket.request.max.bytes={self.max_request_bytes}"
            )
        limit = self.max_unauthenticated_bytes
        if limit is not None and size > limit:
            raise FrameTooLarge(
                f"request size {size} before authentication exceeds "
                f"sasl.server.max.receive.size={limit}"
            )
        if len(buf) < 4 + size:
            return None
        with memoryview(buf) as view:
            frame = bytes(view[4 : 4 + size])
        del buf[: 4 + size]
        return frame


def token_frame(token: bytes) -> list[bytes]:
    """A bare size-prefixed SASL token: the answer after a v0 SaslHandshake."""
    return [len(token).to_bytes(4, "big"), token]


def segments(parts: list) -> list[list | FetchSlice]:
    """A framed response's parts in write order: each run of bytes-like parts as one
    list (one transport.writelines), each FetchSlice on its own (sent from its file).
    The shell must not write anything between a run and the slice after it."""
    out: list[list | FetchSlice] = []
    run: list = []
    for part in parts:
        if isinstance(part, BYTES_LIKE):
            run.append(part)
            continue
        if run:
            out.append(run)
            run = []
        out.append(part)
    if run:
        out.append(run)
    return out
