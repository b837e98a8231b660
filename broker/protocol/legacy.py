"""Kafka's legacy message format (a MessageSet of magic 0 or 1 messages) converted to
and from record batches v2, as a Kafka 3.x broker does for old clients.

A legacy message is `offset int64, size int32, crc uint32 (CRC-32 of the rest),
magic int8, attributes int8 (codec in bits 0-2; magic 1: bit 3 = LogAppendTime),
[timestamp int64 if magic 1], key bytes, value bytes`. A compressed message (a
"wrapper") carries a compressed MessageSet of inner messages in its value; magic 1
inner offsets are relative to the wrapper's first.

- `up_convert` (Produce v0-2): every message is checked (CRC, sizes, magic) and
  the whole set becomes one v2 batch in the codec of its wrappers, as Kafka's
  LogValidator does; magic 0 messages have no timestamp (-1). The log then assigns
  offsets as for any batch.
- `down_convert` (Fetch v0-3): the records of v2 batches from a fetch offset on
  become uncompressed messages of the magic the fetch version allows (v0-1: 0,
  v2-3: 1), with their offsets and timestamps; headers, which the old format
  cannot carry, and control batches are left out. Only these old fetch versions
  pay for it: every other fetch is still served by sendfile.

Magic 0 lz4 used a framing with a wrong header checksum (Kafka 0.8); such messages
are refused as corrupt.
"""

from __future__ import annotations

import struct
import zlib

from broker.protocol.records import BatchBuilder, iter_batches
from common.compression import Codec, CorruptRecordError, decompress

MAGIC_AT = 16  # offset int64, size int32, crc uint32, then the magic byte
_HEAD = struct.Struct(">qiIbb")
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_TIMESTAMP_TYPE_BIT = 0x08
NO_TIMESTAMP = -1


def magic_of(records) -> int:
    """The magic byte of the first entry of a record set (-1 if too short)."""
    return records[MAGIC_AT] if len(records) > MAGIC_AT else -1


def up_convert(data) -> bytes:
    """A produced MessageSet -> one v2 batch; CorruptRecordError if anything is off."""
    records = list(_messages(memoryview(data), top=True))
    if not records:
        raise CorruptRecordError("no messages in the message set")
    codecs = {codec for codec, *_ in records if codec}
    builder = BatchBuilder(codec=max(codecs) if codecs else Codec.NONE)
    for _codec, timestamp, key, value in records:
        builder.append(value, key=key, timestamp_ms=timestamp)
    return builder.build()


def _messages(buf: memoryview, top: bool, codec: int = 0):
    """(codec of the wrapper, timestamp, key, value) of every message, wrappers opened."""
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < _HEAD.size + 4:
            raise CorruptRecordError(f"message set truncated at byte {pos}")
        _offset, size, crc, magic, attributes = _HEAD.unpack_from(buf, pos)
        body_end = pos + 12 + size
        if size < 6 or body_end > end:
            raise CorruptRecordError(f"message at byte {pos} has a bad size {size}")
        if zlib.crc32(buf[pos + 16 : body_end]) != crc:
            raise CorruptRecordError(f"message at byte {pos} fails its CRC")
        if magic not in (0, 1):
            raise CorruptRecordError(f"message at byte {pos} has magic {magic}")
        at = pos + 18
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _TIMESTAMP.unpack_from(buf, at)
            at += 8
        key, at = _bytes(buf, at, body_end)
        value, at = _bytes(buf, at, body_end)
        if at != body_end:
            raise CorruptRecordError(f"message at byte {pos} has {body_end - at} extra bytes")
        inner_codec = attributes & 0x07
        if inner_codec:
            if not top:
                raise CorruptRecordError("a compressed message inside a compressed message")
            if magic == 0 and inner_codec == Codec.LZ4:
                raise CorruptRecordError("magic 0 lz4 messages (Kafka 0.8 framing) are refused")
            if value is None:
                raise CorruptRecordError(f"compressed message at byte {pos} has no value")
            inner = decompress(inner_codec, value)
            yield from _messages(memoryview(inner), top=False, codec=inner_codec)
        else:
            yield codec, timestamp, key, value
        pos = body_end


def _bytes(buf: memoryview, at: int, end: int) -> tuple[bytes | None, int]:
    if at + 4 > end:
        raise CorruptRecordError("message truncated in a key or value length")
    (n,) = _LENGTH.unpack_from(buf, at)
    at += 4
    if n < 0:
        return None, at
    if at + n > end:
        raise CorruptRecordError("message truncated in a key or value")
    return bytes(buf[at : at + n]), at + n


def down_convert(data, magic: int, from_offset: int, max_bytes: int) -> bytes:
    """The records of v2 batches `data` at or after `from_offset` as magic `magic`
    messages, at most `max_bytes` of them (but always the first)."""
    out = bytearray()
    for batch in iter_batches(data, validate=False, allow_partial_tail=True):
        if batch.is_control:
            continue
        log_append = batch.timestamp_type == 1
        for r in batch.records():
            if r.offset < from_offset:
                continue
            message = _message(magic, r.offset, r.timestamp, log_append, r.key, r.value)
            if out and len(out) + len(message) > max_bytes:
                return bytes(out)
            out += message
    return bytes(out)


def _message(magic: int, offset: int, timestamp: int, log_append: bool, key, value) -> bytes:
    body = bytearray((magic, _TIMESTAMP_TYPE_BIT if magic == 1 and log_append else 0))
    if magic == 1:
        body += _TIMESTAMP.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += _LENGTH.pack(-1)
        else:
            body += _LENGTH.pack(len(part))
            body += part
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body
