"""Wire primitives: fixed-width integers, strings, bytes, uuid and unsigned varints.

Readers take (buf, pos) and return (value, new_pos); writers return bytes. `buf` is
any bytes-like object (bytes or memoryview); readers never copy more than the value
they return. Big-endian throughout, as Kafka.

Two varint flavours exist on the wire: the unsigned varint used by flexible versions
(compact lengths, tagged fields), here, and the zigzag-encoded signed varint/varlong
used inside record batches (like protobuf sint32/sint64), which only records.py
reads and writes and which lives there (`_zigzag_encode`, `_zigzag_decode`, called
directly from its per-record loops). Readers raise `ProtocolError` on truncated or
over-long input; struct.error can also escape from the fixed-width readers and is
turned into InvalidRequest/InvalidResponse by the codec.
"""

from __future__ import annotations

import struct
import uuid

from broker.protocol.exceptions import ProtocolError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

NULL_LENGTH16 = INT16.pack(-1)
NULL_LENGTH32 = INT32.pack(-1)


def _take(buf, pos: int, n: int, what: str):
    end = pos + n
    if n < 0 or end > len(buf):
        raise ProtocolError(f"{what} of length {n} at offset {pos} runs past the end ({len(buf)})")
    return buf[pos:end], end


def read_string(buf, pos: int) -> tuple[str, int]:
    (n,) = INT16.unpack_from(buf, pos)
    if n < 0:
        raise ProtocolError(f"null (length {n}) for a non-nullable string at offset {pos}")
    raw, end = _take(buf, pos + 2, n, "string")
    return str(raw, "utf-8"), end


def read_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    if n == -1:
        return None, pos + 2
    raw, end = _take(buf, pos + 2, n, "string")
    return str(raw, "utf-8"), end


def write_string(value: str | None) -> bytes:
    """Encode a (nullable) string: int16 length, -1 for None, then UTF-8 bytes."""
    if value is None:
        return NULL_LENGTH16
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes exceeds the int16 length limit")
    return INT16.pack(len(raw)) + raw


def read_bytes(buf, pos: int) -> tuple[bytes, int]:
    (n,) = INT32.unpack_from(buf, pos)
    if n < 0:
        raise ProtocolError(f"null (length {n}) for non-nullable bytes at offset {pos}")
    raw, end = _take(buf, pos + 4, n, "bytes")
    return bytes(raw), end


def read_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    if n == -1:
        return None, pos + 4
    raw, end = _take(buf, pos + 4, n, "bytes")
    return bytes(raw), end


def read_records(buf, pos: int) -> tuple[memoryview | None, int]:
    """Nullable int32-length bytes returned as a zero-copy slice of `buf`."""
    (n,) = INT32.unpack_from(buf, pos)
    if n == -1:
        return None, pos + 4
    start = pos + 4
    end = start + n
    if n < 0 or end > len(buf):
        raise ProtocolError(
            f"records of length {n} at offset {start} run past the end ({len(buf)})"
        )
    view = buf[start:end]
    return (view if type(view) is memoryview else memoryview(view)), end


def write_bytes(value) -> bytes:
    """Encode (nullable) bytes: int32 length, -1 for None, then the bytes."""
    if value is None:
        return NULL_LENGTH32
    return INT32.pack(len(value)) + bytes(value)


def read_uuid(buf, pos: int) -> tuple[uuid.UUID, int]:
    raw, end = _take(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(raw)), end


def write_uuid(value: uuid.UUID) -> bytes:
    return value.bytes


def read_bool(buf, pos: int) -> tuple[bool, int]:
    (v,) = INT8.unpack_from(buf, pos)
    return v != 0, pos + 1


def read_unsigned_varint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128 varint (flexible versions); at most `max_bytes` bytes."""
    value = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise ProtocolError(f"varint at offset {pos} runs past the end ({len(buf)})")
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos + i + 1
        shift += 7
    raise ProtocolError(f"varint at offset {pos} is longer than {max_bytes} bytes")


def write_unsigned_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tagged_fields(buf, pos: int) -> int:
    """Skip a flexible-version tagged-field buffer (count, then tag/size/data triples)."""
    count, pos = read_unsigned_varint(buf, pos)
    for _ in range(count):
        _, pos = read_unsigned_varint(buf, pos)
        size, pos = read_unsigned_varint(buf, pos)
        _, pos = _take(buf, pos, size, "tagged field")
    return pos


# Compact forms of flexible versions (KIP-482): the length is an unsigned varint of
# length + 1, so 0 means null. A one-byte varint (lengths up to 126) is read inline.


def _compact_length(buf, pos: int) -> tuple[int, int]:
    """Length (-1: null) of a compact field; up to three varint bytes (2 MiB) inline."""
    b = buf[pos]
    if b < 0x80:
        return b - 1, pos + 1
    b2 = buf[pos + 1]
    if b2 < 0x80:
        return ((b & 0x7F) | (b2 << 7)) - 1, pos + 2
    b3 = buf[pos + 2]
    if b3 < 0x80:
        return ((b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)) - 1, pos + 3
    n, pos = read_unsigned_varint(buf, pos)
    return n - 1, pos


def read_compact_string(buf, pos: int) -> tuple[str, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        raise ProtocolError(f"null for a non-nullable compact string at offset {pos - 1}")
    raw, end = _take(buf, pos, n, "string")
    return str(raw, "utf-8"), end


def read_compact_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        return None, pos
    raw, end = _take(buf, pos, n, "string")
    return str(raw, "utf-8"), end


def write_compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    n = len(raw) + 1
    return (bytes((n,)) if n < 0x80 else write_unsigned_varint(n)) + raw


def read_compact_bytes(buf, pos: int) -> tuple[bytes, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        raise ProtocolError(f"null for non-nullable compact bytes at offset {pos - 1}")
    raw, end = _take(buf, pos, n, "bytes")
    return bytes(raw), end


def read_compact_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        return None, pos
    raw, end = _take(buf, pos, n, "bytes")
    return bytes(raw), end


def write_compact_bytes(value) -> bytes:
    if value is None:
        return b"\x00"
    return write_unsigned_varint(len(value) + 1) + bytes(value)


def read_compact_records(buf, pos: int) -> tuple[memoryview | None, int]:
    """Nullable compact bytes returned as a zero-copy slice of `buf` (the length's
    usual one to three varint bytes read inline: this is the Produce hot path)."""
    b = buf[pos]
    if b < 0x80:
        n, pos = b - 1, pos + 1
    elif (b2 := buf[pos + 1]) < 0x80:
        n, pos = ((b & 0x7F) | (b2 << 7)) - 1, pos + 2
    else:
        n, pos = _compact_length(buf, pos)
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"records of length {n} at offset {pos} run past the end ({len(buf)})")
    view = buf[pos:end]
    return (view if type(view) is memoryview else memoryview(view)), end


def read_compact_array_length(buf, pos: int) -> tuple[int, int]:
    """Item count of a compact array (-1: null)."""
    return _compact_length(buf, pos)
