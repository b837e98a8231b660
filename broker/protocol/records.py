"""RecordBatch v2 (magic 2): reader, builder and in-place offset assignment.

(Longer than the ~450 lines modules keep to: the reader and the builder are the two
sides of one binary format, whose field offsets and varint helpers they share.)

A batch is a fixed 61-byte header followed by the records section (compressed as one
unit when the codec is not NONE). The CRC-32C covers bytes 21..end, i.e. everything
after the crc field, so baseOffset and partitionLeaderEpoch can be rewritten in place
by the broker without touching the CRC: `assign_offsets` does exactly that, and the
bytes then go to disk and back out on the wire unchanged.

Reader and builder are separate: `RecordBatch` is a zero-copy view over one batch in
a buffer (header parsed once, records decoded only on demand), `BatchBuilder`
accumulates records and produces the bytes of one batch.
"""

import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import crc32c

from common.compression import (
    Codec,
    CorruptRecordError,
    compress,
    decompress,
    decompress_bounded,
)

_fast_check: Callable[[bytes | memoryview, int, int], None] | None
try:
    from logflume_recordscheck import check_records as _fast_check
except ImportError:  # logflume-recordscheck not installed: the Python walk serves
    _fast_check = None

__all__ = [
    "BatchBuilder",
    "Codec",
    "CorruptRecordError",
    "Record",
    "RecordBatch",
    "assign_offsets",
    "iter_batches",
    "rebuild_batch",
]

# The batch header. Offsets in the comments are byte positions in the batch.
HEADER = struct.Struct(
    ">q"  # 0  baseOffset
    "i"  # 8  batchLength: bytes after this field (total size - 12)
    "i"  # 12 partitionLeaderEpoch
    "b"  # 16 magic (2)
    "I"  # 17 crc: CRC-32C of bytes 21..end
    "h"  # 21 attributes
    "i"  # 23 lastOffsetDelta
    "q"  # 27 baseTimestamp
    "q"  # 35 maxTimestamp
    "q"  # 43 producerId
    "h"  # 51 producerEpoch
    "i"  # 53 baseSequence
    "i"  # 57 recordsCount
)
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

BASE_OFFSET_AT = 0
LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
MAX_TIMESTAMP_AT = 35
CRC_FROM = ATTRIBUTES_AT

# attributes bits
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_INT32_MAX = 2**31 - 1
# Largest records section `validate_records` decompresses (max.message.bytes is far
# below this; a batch that inflates past it is treated as corrupt, not buffered).
MAX_DECOMPRESSED_RECORDS = 64 << 20


@dataclass
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


_U64 = 2**64 - 1
_I64_MIN_ABS = 2**63


# The zigzag varint of record fields (lengths, deltas, counts), the project's only one
# (primitives.py has the unsigned varint of flexible versions); tests test these two.
# Signed 64-bit range: a varint and a varlong are the same bytes.
def _zigzag_encode(out: bytearray, n: int) -> None:
    z = (n << 1) ^ (n >> 63)
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _zigzag_decode(buf, pos: int) -> tuple[int, int]:
    shift = 0
    z = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("record varint runs past the end of the records")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("record varint is too long")
    if shift == 63:  # a 10th byte: bits past 64 drop out, as in Kafka's readVarlong
        z &= _U64
    return (z >> 1) ^ -(z & 1), pos


def _wrap64(n: int) -> int:
    """`n` modulo 2**64 as a signed 64-bit value: Java's long arithmetic, which Kafka
    uses for timestamp = base timestamp + delta (and delta = timestamp - base)."""
    return ((n + _I64_MIN_ABS) & _U64) - _I64_MIN_ABS


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _zigzag_encode(out, -1)
    else:
        _zigzag_encode(out, len(data))
        out += data


def _get_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _zigzag_decode(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError("record field runs past the end of the records")
    return bytes(buf[pos : pos + n]), pos + n


class RecordBatch:
    """A read-only view over one v2 batch at `position` in `buf` (no copy).

    The header is parsed once at construction; `records()` decodes on demand. The view
    is only as stable as the buffer under it. Safe to share across threads if the
    buffer is not modified.
    """

    __slots__ = (
        "buf",
        "position",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )

    def __init__(self, buf, position: int = 0):
        if len(buf) - position < HEADER_SIZE:
            raise CorruptRecordError("buffer too short for a record batch header")
        self.buf = buf
        self.position = position
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = HEADER.unpack_from(buf, position)

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        seq = self.base_sequence + self.last_offset_delta
        return seq - _INT32_MAX - 1 if seq > _INT32_MAX else seq

    def raw(self) -> memoryview:
        """The batch's bytes, as a view into the underlying buffer."""
        return memoryview(self.buf)[self.position : self.position + self.size]

    def validate(self) -> None:
        """Check magic, length and CRC-32C; raise CorruptRecordError on any mismatch."""
        length = self.batch_length
        start = self.position
        end = start + length + LOG_OVERHEAD
        if self.magic != MAGIC or length < MIN_BATCH_LENGTH or end > len(self.buf):
            self._explain_bad_header()
        if self.last_offset_delta < 0 or self.records_count < 0:
            raise CorruptRecordError("record batch has a negative count or offset delta")
        with memoryview(self.buf) as view:
            actual = crc32c.crc32c(view[start + CRC_FROM : end])
        if actual != self.crc:
            raise CorruptRecordError(
                f"record batch at offset {self.base_offset} has crc {actual:#010x}, "
                f"header says {self.crc:#010x}"
            )

    def validate_records(self, max_decompressed: int = MAX_DECOMPRESSED_RECORDS) -> None:
        """Check the records section as Kafka's LogValidator does for a produced
        batch, without building Record objects: a known codec, a stream that
        decompresses (to at most `max_decompressed` bytes), exactly `records_count`
        records whose lengths match their fields, offset deltas increasing up to
        `last_offset_delta`, no trailing bytes. Raises CorruptRecordError. Call
        `validate()` first."""
        codec = self.codec
        if codec > Codec.ZSTD:
            raise CorruptRecordError(f"unknown compression codec {codec}")
        body = memoryview(self.buf)[self.position + HEADER_SIZE : self.position + self.size]
        data = decompress_bounded(codec, body, max_decompressed) if codec else body
        if _fast_check is None:
            _check_records(data, self.records_count, self.last_offset_delta)
            return
        try:
            _fast_check(data, self.records_count, self.last_offset_delta)
        except ValueError as e:
            raise CorruptRecordError(str(e)) from None

    def _explain_bad_header(self):
        if self.magic != MAGIC:
            raise CorruptRecordError(f"unsupported record batch magic {self.magic}")
        if self.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {self.batch_length} is too small")
        raise CorruptRecordError("record batch is truncated")

    def records(self) -> list[Record]:
        """Decode every record (decompressing if needed); CorruptRecordError when the
        records section does not parse."""
        body = memoryview(self.buf)[self.position + HEADER_SIZE : self.position + self.size]
        data = decompress(self.codec, body) if self.codec else body
        log_append = self.attributes & TIMESTAMP_TYPE_MASK
        out = []
        pos = 0
        for _ in range(self.records_count):
            length, pos = _zigzag_decode(data, pos)
            end = pos + length
            if length < 0 or end > len(data):
                raise CorruptRecordError("record length runs past the end of the batch")
            pos += 1  # record attributes, unused
            ts_delta, pos = _zigzag_decode(data, pos)
            offset_delta, pos = _zigzag_decode(data, pos)
            key, pos = _get_bytes(data, pos)
            value, pos = _get_bytes(data, pos)
            n_headers, pos = _zigzag_decode(data, pos)
            headers = []
            for _ in range(n_headers):
                hkey, pos = _get_bytes(data, pos)
                hvalue, pos = _get_bytes(data, pos)
                headers.append(((hkey or b"").decode("utf-8", "replace"), hvalue))
            if pos != end:
                raise CorruptRecordError("record length does not match its fields")
            if log_append:
                ts = self.max_timestamp
            else:
                ts = self.base_timestamp + ts_delta
                if not -_I64_MIN_ABS <= ts < _I64_MIN_ABS:
                    ts = _wrap64(ts)
            out.append(Record(self.base_offset + offset_delta, ts, key, value, headers))
        if pos != len(data):
            raise CorruptRecordError("records section has trailing bytes")
        return out

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, codec={self.codec}, size={self.size})"
        )


def _check_records(data, count: int, last_delta: int) -> None:
    """Walk `count` records of an uncompressed records section (see validate_records).
    The reference for `logflume_recordscheck.check_records`, its C twin, which the produce
    path uses when it was built (the C file says why)."""
    n = len(data)
    pos = 0
    previous = -1
    read = _zigzag_decode
    for _ in range(count):
        length, pos = read(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise CorruptRecordError("record length runs past the end of the batch")
        pos += 1  # attributes
        _, pos = read(data, pos)  # timestamp delta
        delta, pos = read(data, pos)
        if delta <= previous or delta > last_delta:
            raise CorruptRecordError(f"record offset delta {delta} out of order in the batch")
        previous = delta
        for smallest in (-1, -1):  # key, value: -1 is null
            size, pos = read(data, pos)
            if size < smallest:
                raise CorruptRecordError(f"record field length {size}")
            pos += max(size, 0)
        headers, pos = read(data, pos)
        if headers < 0:
            raise CorruptRecordError(f"record header count {headers}")
        for _ in range(headers):
            for smallest in (0, -1):  # header key (not null), header value
                if pos >= end:
                    raise CorruptRecordError("record headers run past the record")
                size, pos = read(data, pos)
                if size < smallest:
                    raise CorruptRecordError(f"record header field length {size}")
                pos += max(size, 0)
        if pos != end:
            raise CorruptRecordError("record length does not match its fields")
    if pos != n:
        raise CorruptRecordError("records section does not hold records_count records")


def iter_batches(
    buf, validate: bool = True, allow_partial_tail: bool = False
) -> Iterator[RecordBatch]:
    """Yield each batch in `buf`. A batch cut short at the end of the buffer raises
    CorruptRecordError unless `allow_partial_tail`, in which case iteration stops
    there (a fetch response may end in a partial batch)."""
    pos = 0
    n = len(buf)
    while pos < n:
        if n - pos < HEADER_SIZE:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{n - pos} trailing bytes do not hold a batch header")
        batch = RecordBatch(buf, pos)
        if batch.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {batch.batch_length} is too small")
        if pos + batch.size > n:
            if allow_partial_tail:
                return
            raise CorruptRecordError("record batch is truncated")
        if validate:
            batch.validate()
        yield batch
        pos += batch.size


def assign_offsets(buf: bytearray, base_offset: int, leader_epoch: int) -> int:
    """Rewrite baseOffset and partitionLeaderEpoch of every batch in `buf` in place,
    numbering records from `base_offset`; the CRC stays valid. Returns the next offset."""
    pos = 0
    n = len(buf)
    while pos < n:
        if n - pos < HEADER_SIZE:
            raise CorruptRecordError("trailing bytes do not hold a batch header")
        _, length = _PREFIX.unpack_from(buf, pos)
        last_delta = _I32.unpack_from(buf, pos + 23)[0]
        _PREFIX.pack_into(buf, pos, base_offset, length)
        _I32.pack_into(buf, pos + LEADER_EPOCH_AT, leader_epoch)
        base_offset += last_delta + 1
        pos += length + LOG_OVERHEAD
    return base_offset


def set_log_append_time(buf: bytearray, position: int, timestamp_ms: int) -> None:
    """Mark the batch at `position` as LogAppendTime with `timestamp_ms` as its max
    timestamp, recomputing the CRC (these fields are covered by it)."""
    attrs = struct.unpack_from(">h", buf, position + ATTRIBUTES_AT)[0]
    struct.pack_into(">h", buf, position + ATTRIBUTES_AT, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, position + MAX_TIMESTAMP_AT, timestamp_ms)
    length = _I32.unpack_from(buf, position + LENGTH_AT)[0]
    end = position + LOG_OVERHEAD + length
    crc = crc32c.crc32c(memoryview(buf)[position + CRC_FROM : end])
    _U32.pack_into(buf, position + CRC_AT, crc)


class BatchBuilder:
    """Accumulates records and builds the bytes of one v2 batch. Owned by one caller;
    not thread-safe. Offsets are relative to `base_offset`; `append(..., offset=)`
    places a record at an explicit offset (the cleaner keeps original offsets)."""

    def __init__(
        self,
        codec: Codec = Codec.NONE,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
    ):
        self.codec = Codec(codec)
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.last_offset_delta: int | None = None  # None: the last appended record's delta
        self._records: list[tuple[int, int, bytes | None, bytes | None, tuple]] = []

    def __len__(self) -> int:
        return len(self._records)

    def append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        offset: int | None = None,
    ) -> None:
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        if offset is None:
            delta = self._records[-1][0] + 1 if self._records else 0
        else:
            delta = offset - self.base_offset
            if delta < 0 or (self._records and delta <= self._records[-1][0]):
                raise ValueError("record offsets must increase from base_offset")
        self._records.append((delta, timestamp_ms, key, value, tuple(headers)))

    def build(self) -> bytes:
        recs = self._records
        base_ts = recs[0][1] if recs else -1
        max_ts = max(r[1] for r in recs) if recs else -1
        body = bytearray()
        rec = bytearray()
        for delta, ts, key, value, headers in recs:
            rec.clear()
            rec.append(0)
            _zigzag_encode(rec, _wrap64(ts - base_ts))
            _zigzag_encode(rec, delta)
            _put_bytes(rec, key)
            _put_bytes(rec, value)
            _zigzag_encode(rec, len(headers))
            for hkey, hvalue in headers:
                _put_bytes(rec, hkey.encode())
                _put_bytes(rec, hvalue)
            _zigzag_encode(body, len(rec))
            body += rec
        payload = compress(self.codec, bytes(body))
        attrs = int(self.codec)
        if self.is_transactional:
            attrs |= TRANSACTIONAL_MASK
        if self.is_control:
            attrs |= CONTROL_MASK
        last_delta = self.last_offset_delta
        if last_delta is None:
            last_delta = recs[-1][0] if recs else 0
        out = bytearray(HEADER_SIZE)
        HEADER.pack_into(
            out,
            0,
            self.base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            self.partition_leader_epoch,
            MAGIC,
            0,
            attrs,
            last_delta,
            base_ts,
            max_ts,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            len(recs),
        )
        out += payload
        _U32.pack_into(out, CRC_AT, crc32c.crc32c(memoryview(out)[CRC_FROM:]))
        return bytes(out)


def rebuild_batch(batch: RecordBatch, records: list[Record], codec: Codec | None = None) -> bytes:
    """A batch like `batch` (base offset, producer fields, leader epoch, last offset
    delta, timestamp type) holding `records` at their offsets, compressed with `codec`
    (default: the batch's own). The cleaner drops records this way; the log
    recompresses for a topic whose compression.type names a codec."""
    b = BatchBuilder(
        codec=Codec(batch.codec) if codec is None else codec,
        base_offset=batch.base_offset,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch,
    )
    for r in records:
        b.append(r.value, key=r.key, timestamp_ms=r.timestamp, headers=r.headers, offset=r.offset)
    b.last_offset_delta = batch.last_offset_delta
    data = b.build()
    if batch.timestamp_type == LOG_APPEND_TIME:
        buf = bytearray(data)
        set_log_append_time(buf, 0, batch.max_timestamp)
        data = bytes(buf)
    return data
