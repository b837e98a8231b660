"""Kafka record sets (a Fetch response's `records` of one partition) -> pyarrow.

`record_set_to_arrow` turns the record batches of one fetched partition into Arrow
record batches in the Kafka source's schema (the columns, types and nulls Spark's Kafka
source gives; tests check them against what confluent-kafka's consumer reads), without a Python object per
record: Python walks the batch headers (CRC32C, codec, transactions: a few us a
batch; `RecordSet`, which gives the next offset to fetch before anything is decoded,
`RecordSet.to_arrow` the rest), the C extension of logflume-recordscheck (`decode_batches`) walks the
records of all batches into Arrow's buffers (offsets, timestamps, the keys' and
values' offsets, bytes and validity bitmaps, the headers' lists, each value's XXH64),
and `pyarrow.Array.from_buffers` wraps them without copying.

What the consumer sees is what Kafka's consumers report:
- v2 batches only: the broker converts what old producers send (magic 0/1) when it
  is produced and stores nothing else, so another magic is a corrupt record set.
- A LogAppendTime batch gives every record the batch's max timestamp.
- Control batches are never returned. In read_committed (`aborted` given: the Fetch
  response's AbortedTransactions), a producer's transactional batches are dropped
  from the first offset of one of its aborted transactions until its ABORT marker,
  as Java's consumer (CompletedFetch) does.
- A trailing batch cut short by the Fetch's size limit is left for the next fetch.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import crc32c

from common.audit import HASH_SEED
from common.compression import Codec, CorruptRecordError, decompress

if TYPE_CHECKING:
    import pyarrow as pa

# An optional column of the Arrow schema a reader asks for: each value's XXH64 with
# the audit's seed (common.audit.checksum's terms; a null value hashes as empty), as
# int64 (the unsigned hash's bits).
VALUE_HASH = "value_hash"

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">qi")
LOG_OVERHEAD = 12  # baseOffset and batchLength: batchLength counts the rest
CRC_FROM = 21  # the CRC covers the batch from its attributes on
MAGIC_AT = 16  # in a v2 batch and in the message sets of magic 0 and 1 alike
MAGIC = 2
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_ABORT = 0  # a control record's type (key: version int16, type int16)
_CONTROL_KEY = struct.Struct(">hh")
# Records decoded by one decode_batches call, into one Arrow batch (a batch larger
# than this alone). Small enough that glibc's malloc serves the output buffers from
# its heap, where the previous batch's freed buffers are, rather than from fresh
# mmapped pages (above its dynamic mmap threshold, at most 32 MiB): each 4 KiB of
# fresh pages costs a page fault, which doubled the cost per record at 16 MiB.
_MAX_CALL_BYTES = 2 << 20


def record_set_to_arrow(
    data,
    topic: str,
    partition: int,
    start: int,
    end: int,
    arrow_schema,
    aborted: list[tuple[int, int]] | None,
) -> tuple[list[pa.RecordBatch], int]:
    """(Arrow batches of the records with start <= offset < end, next offset to fetch).

    `data` is bytes or a memoryview of record batches; `arrow_schema` the Kafka
    source's columns, optionally followed by VALUE_HASH; `aborted` None in
    read_uncommitted, else the (producer_id, first_offset) pairs of the Fetch
    response. The next offset follows the last complete batch (never below
    `start`); CorruptRecordError naming the partition and batch for a bad one.
    """
    record_set = RecordSet(data, topic, partition, start, end, aborted)
    return record_set.to_arrow(arrow_schema), record_set.next_offset


class RecordSet:
    """A fetched record set, walked batch by batch (lengths, magic, CRC32C and, in
    read_committed, the transactions) but not yet decoded: `next_offset` is known
    before `to_arrow` does the work, so that the next fetch can be on its way
    meanwhile. Arguments as for `record_set_to_arrow`."""

    def __init__(
        self,
        data,
        topic: str,
        partition: int,
        start: int,
        end: int,
        aborted: list[tuple[int, int]] | None,
    ):
        self._where = (topic, partition)
        self._range = (start, end)
        # (attributes, records section as stored, count, base offset, first and max
        # timestamps) of each batch with records to return
        self._kept: list[tuple[int, memoryview, int, int, int, int]] = []
        self.next_offset = start
        view = memoryview(data if data is not None else b"").cast("B")
        txns = _AbortedTransactions(aborted) if aborted is not None else None
        pos = 0
        while len(view) - pos >= LOG_OVERHEAD:
            base_offset, batch_length = _LENGTH.unpack_from(view, pos)
            if len(view) - pos > MAGIC_AT and view[pos + MAGIC_AT] != MAGIC:
                raise _corrupt(
                    topic,
                    partition,
                    base_offset,
                    f"magic {view[pos + MAGIC_AT]}: only record batches v2 (magic 2) are read",
                )
            batch_end = pos + LOG_OVERHEAD + batch_length
            if batch_end > len(view) or batch_end - pos < _HEADER.size:
                if batch_length < _HEADER.size - LOG_OVERHEAD:
                    raise _corrupt(topic, partition, base_offset, f"batch length {batch_length}")
                break  # the trailing batch the fetch's size limit cut
            (_, _, _, _, crc, attrs, last_delta, first_ts, max_ts, pid, _, _, count) = (
                _HEADER.unpack_from(view, pos)
            )
            actual = crc32c.crc32c(view[pos + CRC_FROM : batch_end])
            if actual != crc:
                raise _corrupt(
                    topic, partition, base_offset, f"CRC32C {actual:#010x}, stored {crc:#010x}"
                )
            records = view[pos + _HEADER.size : batch_end]
            pos = batch_end
            last_offset = base_offset + last_delta
            self.next_offset = max(self.next_offset, last_offset + 1)
            if txns is not None and pid >= 0:
                txns.reach(last_offset)
                if attrs & _CONTROL:
                    if _is_abort(_records(attrs, records, topic, partition, base_offset)):
                        txns.ended(pid)
                    continue
                if attrs & _TRANSACTIONAL and txns.is_aborted(pid):
                    continue
            if attrs & _CONTROL or last_offset < start or base_offset >= end or not count:
                continue
            self._kept.append((attrs, records, count, base_offset, first_ts, max_ts))

    def to_arrow(self, arrow_schema) -> list[pa.RecordBatch]:
        """The kept records in `arrow_schema`: decompressed, then decoded in C, a
        call per _MAX_CALL_BYTES of records."""
        if not self._kept:
            return []
        decode_batches = _decoder()
        topic, partition = self._where
        start, end = self._range
        out: list[pa.RecordBatch] = []
        parts: list[tuple] = []
        size = 0
        for attrs, records, count, base_offset, first_ts, max_ts in self._kept:
            section = _records(attrs, records, topic, partition, base_offset)
            if parts and size + len(section) > _MAX_CALL_BYTES:
                out += _decode(decode_batches, parts, topic, partition, start, end, arrow_schema)
                parts, size = [], 0
            parts.append(
                (section, count, base_offset, first_ts, max_ts, bool(attrs & _LOG_APPEND_TIME))
            )
            size += len(section)
        out += _decode(decode_batches, parts, topic, partition, start, end, arrow_schema)
        return out


def _decoder():
    """logflume-recordscheck's decode_batches, or an ImportError that says what to install."""
    try:
        from logflume_recordscheck import decode_batches
    except ImportError as e:
        raise ImportError(
            "logflume: the Spark source decodes records with logflume-recordscheck >= 0.2 "
            "(required by the etl extra: pip install native/recordscheck from logflume's "
            f"tree, or the wheel `make dist` builds): {e}"
        ) from None
    return decode_batches


class _AbortedTransactions:
    """The read_committed bookkeeping of Java's CompletedFetch: a producer is aborted
    once a batch reaches the first offset of one of its aborted transactions, until
    its ABORT marker."""

    def __init__(self, aborted: list[tuple[int, int]]):
        self._pending = sorted(aborted, key=lambda a: a[1], reverse=True)
        self._producers: set[int] = set()

    def reach(self, last_offset: int) -> None:
        while self._pending and self._pending[-1][1] <= last_offset:
            self._producers.add(self._pending.pop()[0])

    def ended(self, producer_id: int) -> None:
        self._producers.discard(producer_id)

    def is_aborted(self, producer_id: int) -> bool:
        return producer_id in self._producers


def _records(attrs: int, records: memoryview, topic: str, partition: int, base_offset: int):
    """A batch's records section, decompressed."""
    codec = attrs & _CODEC_MASK
    if codec == Codec.NONE:
        return records
    try:
        return decompress(codec, records)
    except CorruptRecordError as e:
        raise _corrupt(topic, partition, base_offset, str(e)) from None


def _is_abort(records) -> bool:
    """Whether a control batch's first record is an ABORT marker (its key's type)."""
    _, pos = _varint(records, 0)  # length
    _, pos = _varint(records, pos + 1)  # after the attributes byte: timestamp delta
    _, pos = _varint(records, pos)  # offset delta
    key_length, pos = _varint(records, pos)
    if key_length < _CONTROL_KEY.size or pos + _CONTROL_KEY.size > len(records):
        return False
    return _CONTROL_KEY.unpack_from(records, pos)[1] == _ABORT


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it); -1 if it runs past the end."""
    z = shift = 0
    while pos < len(buf):
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
    return -1, pos


def _decode(decode_batches, parts, topic, partition, start, end, arrow_schema):
    """One Arrow batch of the records of `parts` in [start, end) (none if empty)."""
    import pyarrow as pa

    try:
        (n, offsets, stamps, kinds, key_offsets, keys, key_valid, key_nulls, value_offsets,
         values, value_valid, value_nulls, hashes, headers) = decode_batches(
            parts, start, end, VALUE_HASH in arrow_schema.names, HASH_SEED,
            "headers" in arrow_schema.names,
        )  # fmt: skip
    except ValueError as e:
        raise CorruptRecordError(f"topic {topic!r} partition {partition}: {e}") from None
    if not n:
        return []
    buf = pa.py_buffer
    key_validity = buf(key_valid) if key_valid is not None else None
    value_validity = buf(value_valid) if value_valid is not None else None
    columns = {
        "key": pa.Array.from_buffers(
            pa.binary(), n, [key_validity, buf(key_offsets), buf(keys)], key_nulls
        ),
        "value": pa.Array.from_buffers(
            pa.binary(), n, [value_validity, buf(value_offsets), buf(values)], value_nulls
        ),
        "offset": pa.Array.from_buffers(pa.int64(), n, [None, buf(offsets)], 0),
        "timestampType": pa.Array.from_buffers(pa.int32(), n, [None, buf(kinds)], 0),
    }
    ts_type = arrow_schema.field("timestamp").type
    columns["timestamp"] = pa.Array.from_buffers(
        pa.timestamp("ms", tz=ts_type.tz), n, [None, buf(stamps)], 0
    )
    columns["topic"] = pa.repeat(pa.scalar(topic, pa.string()), n)
    columns["partition"] = pa.repeat(pa.scalar(partition, pa.int32()), n)
    if hashes is not None:
        columns[VALUE_HASH] = pa.Array.from_buffers(pa.int64(), n, [None, buf(hashes)], 0)
    if "headers" in arrow_schema.names:
        columns["headers"] = _headers(
            arrow_schema.field("headers").type, n, headers, topic, partition
        )
    arrays = []
    for field in arrow_schema:
        if field.name not in columns:
            raise ValueError(f"logflume: no column {field.name!r} in the Kafka source's records")
        column = columns[field.name]
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except pa.ArrowInvalid as e:  # a timestamp out of the schema unit's range
                raise CorruptRecordError(
                    f"topic {topic!r} partition {partition}: {field.name}: {e}"
                ) from None
        arrays.append(column)
    return [pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)]


def _headers(headers_type, n: int, headers, topic: str, partition: int):
    """The headers column: null for a record without headers, as Spark's Kafka source gives it."""
    import pyarrow as pa

    if headers is None:
        return pa.nulls(n, headers_type)
    (list_offsets, list_valid, list_nulls, m, key_offsets, keys, value_offsets, values,
     value_valid, value_nulls) = headers  # fmt: skip
    buf = pa.py_buffer
    entry = headers_type.value_type
    key_type, value_type = entry.field("key").type, entry.field("value").type
    hkeys = pa.Array.from_buffers(pa.string(), m, [None, buf(key_offsets), buf(keys)], 0)
    try:
        hkeys.validate(full=True)
    except pa.ArrowInvalid:
        raise CorruptRecordError(
            f"topic {topic!r} partition {partition}: a record header key is not UTF-8"
        ) from None
    value_validity = buf(value_valid) if value_nulls else None
    hvalues = pa.Array.from_buffers(
        pa.binary(), m, [value_validity, buf(value_offsets), buf(values)], value_nulls
    )
    struct = pa.StructArray.from_arrays(
        [hkeys.cast(key_type), hvalues.cast(value_type)], fields=list(entry)
    )
    list_validity = buf(list_valid) if list_nulls else None
    return pa.Array.from_buffers(
        headers_type, n, [list_validity, buf(list_offsets)], list_nulls, children=[struct]
    )


def _corrupt(topic: str, partition: int, offset: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"topic {topic!r} partition {partition}: corrupt record batch at offset {offset}: {what}"
    )
