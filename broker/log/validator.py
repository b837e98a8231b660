"""LogValidator: what is checked and rewritten in batches before the log writes them.

Kafka's LogValidator, without I/O: it takes bytes and a config and returns batches
whose offsets are final, or raises. The partition log calls it on every append;
the local log writes what it returns.

Leader appends (`LogValidator.validate_and_assign_offsets`, as Kafka's
validateMessagesAndAssignOffsets; the partition log checks producer state on the
result before writing it), in Kafka's order for each batch: framing and CRC, size
against max.message.bytes, record count against the last offset delta, the records
section (`RecordBatch.validate_records`), the topic's record rules (record_rules.py:
keys on compacted topics, timestamp bounds). Control batches come only from a
coordinator (the partition log's `append_txn_marker`): a client's is INVALID_RECORD,
as is a transactional batch without a producer id; idempotent batches come one per
append. A refusal raises the log's `ApiError` family (CorruptBatchError,
RecordTooLargeError, RecordValidationError, ProducerStateError).

A topic whose compression.type names a codec gets every other batch rebuilt in that
codec, as Kafka recompresses.

Offsets (`assign_offsets`, also used for coordinators' markers): baseOffset and
partitionLeaderEpoch are rewritten (the CRC does not cover them) and, for
LogAppendTime, the max timestamp (recomputing the CRC). The fast path: a single
batch with CreateTime (the usual produce) is not copied; it is written as its new
16-byte prefix followed by the rest of the caller's buffer. Otherwise a bytearray
argument is rewritten in place, anything else copied into one first.

Follower appends (`validate_follower`) keep the leader's offsets: they must start at
or after the log end and increase.
"""

from __future__ import annotations

import struct

from broker.log.common import (
    CorruptBatchError,
    InvalidOffsetError,
    RecordTooLargeError,
)
from broker.log.config import LogConfig
from broker.log.producer_state import ProducerStateError
from broker.log.record_rules import check_records, rules_apply
from broker.protocol.errors import ErrorCode
from broker.protocol.records import (
    HEADER_SIZE,
    CorruptRecordError,
    RecordBatch,
    iter_batches,
    rebuild_batch,
    set_log_append_time,
)
from common.compression import Codec

PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch

Buffer = bytes | bytearray | memoryview


class PlacedBatches:
    """Batches with their final offsets, ready for the active segment: `size` bytes
    given as the buffers `parts` (one pwritev). `producer_batch` is the idempotent
    batch (of a leader append) producer state must check before the write."""

    __slots__ = (
        "batches",
        "parts",
        "size",
        "first_offset",
        "last_offset",
        "max_timestamp",
        "producer_batch",
    )

    def __init__(
        self,
        batches: list[RecordBatch],
        parts: tuple[Buffer, ...],
        size: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        producer_batch: RecordBatch | None = None,
    ):
        self.batches = batches
        self.parts = parts
        self.size = size
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.producer_batch = producer_batch


class LogValidator:
    """The checks of one topic's config, built once per config; immutable, so safe
    to share."""

    __slots__ = ("config", "topic_partition", "log_append_time", "rules", "needs_clock", "codec")

    def __init__(self, config: LogConfig, topic_partition: str):
        self.config = config
        self.topic_partition = topic_partition
        #: whether batches get the append time (LogAppendTime) as their timestamp
        self.log_append_time = config.message_timestamp_type != "CreateTime"
        self.rules = rules_apply(config)
        #: whether `validate_and_assign_offsets` needs the time (else pass 0)
        self.needs_clock = self.log_append_time or self.rules
        #: the codec every batch is stored in; None: as produced
        self.codec = config.codec

    def validate_and_assign_offsets(
        self, records: Buffer, first_offset: int, leader_epoch: int, now_ms: int
    ) -> PlacedBatches:
        """Check produced `records` (one or more batches) for this topic, raising on
        the first refusal; recompress them if the topic says so; give them offsets
        from `first_offset` and `leader_epoch`. `now_ms` matters only when
        `needs_clock`.

        The single-batch CreateTime fast path is not copied. Otherwise a bytearray
        `records` is rewritten in place, anything else copied first."""
        try:
            one = None
            if not self.log_append_time and len(records) >= HEADER_SIZE:
                one = RecordBatch(records)
                if one.size != len(records):
                    one = None
            if one is not None:
                one.validate()
                batches = [one]
            else:
                buffer = records if isinstance(records, bytearray) else bytearray(records)
                batches = list(iter_batches(buffer))
                if not batches:
                    raise CorruptRecordError("no record batches in the request")
            producer = self._check(batches, now_ms)
            if self.codec is not None and any(b.codec != self.codec for b in batches):
                buffer, batches = _rebuild(batches, self.codec)
                producer = batches[0] if producer is not None else None
                one = None
        except CorruptRecordError as e:
            raise CorruptBatchError(str(e)) from e
        if one is not None:
            placed = _place_zero_copy(one, records, first_offset, leader_epoch)
        else:
            append_time = now_ms if self.log_append_time else -1
            placed = assign_offsets(batches, buffer, first_offset, leader_epoch, append_time)
        placed.producer_batch = producer
        return placed

    def _check(self, batches: list[RecordBatch], now_ms: int) -> RecordBatch | None:
        """Every batch's checks, in Kafka's order; returns the idempotent batch."""
        config = self.config
        max_bytes = config.max_message_bytes
        producer = None
        for b in batches:
            if b.size > max_bytes:
                raise RecordTooLargeError(
                    f"batch of {b.size} bytes exceeds max.message.bytes {max_bytes}"
                )
            if b.records_count <= 0 or b.last_offset_delta != b.records_count - 1:
                raise CorruptRecordError("batch record count does not match its last offset delta")
            b.validate_records()
            if self.rules:
                check_records(b, config, self.topic_partition, now_ms)
            if b.is_control or (b.is_transactional and b.producer_id < 0):
                raise ProducerStateError(
                    ErrorCode.INVALID_RECORD,
                    "clients may not write control batches, nor transactional ones "
                    "without a producer id",
                )
            if b.producer_id >= 0:
                if len(batches) > 1:
                    raise CorruptRecordError("idempotent batches must come one per partition")
                producer = b
        return producer


def _rebuild(batches: list[RecordBatch], codec: Codec) -> tuple[bytearray, list[RecordBatch]]:
    """The batches rebuilt in `codec` (each batch's records, offsets and producer
    fields kept), as Kafka recompresses for a topic's compression.type."""
    buffer = bytearray(b"".join(rebuild_batch(b, b.records(), codec) for b in batches))
    return buffer, list(iter_batches(buffer))


def _place_zero_copy(
    one: RecordBatch, records: Buffer, first_offset: int, leader_epoch: int
) -> PlacedBatches:
    """The fast path: the caller's buffer is written as it is after a new 16-byte
    prefix (baseOffset, batchLength, partitionLeaderEpoch)."""
    one.base_offset = first_offset
    one.partition_leader_epoch = leader_epoch
    parts = (PREFIX.pack(first_offset, one.batch_length, leader_epoch), memoryview(records)[16:])
    return PlacedBatches(
        [one],
        parts,
        len(records),
        first_offset,
        first_offset + one.last_offset_delta,
        one.max_timestamp,
    )


def assign_offsets(
    batches: list[RecordBatch],
    buffer: bytearray,
    first_offset: int,
    leader_epoch: int,
    log_append_time: int = -1,
) -> PlacedBatches:
    """Give `batches` (views into `buffer`) consecutive offsets from `first_offset`
    and `leader_epoch` (and, when `log_append_time` >= 0, that LogAppendTime, CRC
    recomputed), in `buffer` and in the `RecordBatch` objects (the segment indexes
    from those)."""
    offset = first_offset
    max_ts = -1
    pack = PREFIX.pack_into
    for b in batches:
        pack(buffer, b.position, offset, b.batch_length, leader_epoch)
        b.base_offset = offset
        b.partition_leader_epoch = leader_epoch
        if log_append_time >= 0:
            set_log_append_time(buffer, b.position, log_append_time)
            b.max_timestamp = log_append_time
        offset += b.records_count
        if b.max_timestamp > max_ts:
            max_ts = b.max_timestamp
    return PlacedBatches(batches, (buffer,), len(buffer), first_offset, offset - 1, max_ts)


def validate_follower(records: Buffer, log_end_offset: int) -> PlacedBatches:
    """A follower's copy of the leader's batches, offsets kept: they must start at or
    after `log_end_offset` and increase (InvalidOffsetError otherwise)."""
    buffer = bytes(records)
    batches = list(iter_batches(buffer))
    if not batches:
        raise CorruptRecordError("no record batches to append")
    expected = log_end_offset
    max_ts = -1
    for b in batches:
        if b.base_offset < expected:
            raise InvalidOffsetError(
                f"batch at offset {b.base_offset} is below the next offset {expected}"
            )
        expected = b.next_offset
        max_ts = max(max_ts, b.max_timestamp)
    return PlacedBatches(
        batches, (buffer,), len(buffer), batches[0].base_offset, expected - 1, max_ts
    )
