"""LogValidator: what is checked and rewritten in batches before the log writes them.

Kafka's LogValidator, without I/O: it takes bytes and a config and returns batches
whose offsets are final, or raises. The partition log calls it on every append;
the local log writes what it returns.

Leader appends (`LogValidator.validate`, then producer state, then `recompress`,
then `assign_offsets`), in Kafka's order for each batch: framing and CRC, size
against max.message.bytes, record count against the last offset delta, the records
section (`RecordBatch.validate_records`), the topic's record rules (record_rules.py:
keys on compacted topics, timestamp bounds). Control batches come only from a
coordinator (the partition log's `append_txn_marker`): a client's is INVALID_RECORD,
as is a transactional batch without a producer id; idempotent batches come one per
append. A refusal raises the log's `ApiError` family (CorruptBatchError,
RecordTooLargeError, RecordValidationError, ProducerStateError).

A topic whose compression.type names a codec gets every other batch rebuilt in that
codec (`recompress`), as Kafka recompresses.

`assign_offsets` rewrites baseOffset and partitionLeaderEpoch (the CRC does not
cover them) and, for LogAppendTime, the max timestamp (recomputing the CRC). The
fast path: a single batch with CreateTime (the usual produce) is not copied; it is
written as its new 16-byte prefix followed by the rest of the caller's buffer.
Otherwise a bytearray argument is rewritten in place, anything else copied into
one first.

Follower appends (`validate_follower`) keep the leader's offsets: they must start at
or after the log end and increase.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

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

PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch


class ValidatedRecords:
    """Batches that passed validation, offsets not yet assigned. `zero_copy`: the one
    batch is the caller's whole buffer, to be written without a copy; otherwise
    `buffer` is the bytearray the batches view. `producer_batch` is the idempotent
    batch producer state must check, if any."""

    __slots__ = ("batches", "buffer", "zero_copy", "producer_batch")

    def __init__(
        self,
        batches: list[RecordBatch],
        buffer,
        zero_copy: bool,
        producer_batch: RecordBatch | None,
    ):
        self.batches = batches
        self.buffer = buffer
        self.zero_copy = zero_copy
        self.producer_batch = producer_batch


class PlacedBatches(NamedTuple):
    """Batches with their final offsets, ready for the active segment: `size` bytes
    given as the buffers `parts` (one pwritev)."""

    batches: list[RecordBatch]
    parts: tuple
    size: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class LogValidator:
    """The checks of one topic's config, built once per config; immutable, so safe
    to share."""

    __slots__ = ("config", "topic_partition", "log_append_time", "rules", "needs_clock", "codec")

    def __init__(self, config: LogConfig, topic_partition: str):
        self.config = config
        self.topic_partition = topic_partition
        self.log_append_time = config.message_timestamp_type != "CreateTime"
        self.rules = rules_apply(config)
        #: whether `validate` and `assign_offsets` need the time (else pass 0)
        self.needs_clock = self.log_append_time or self.rules
        #: the codec `recompress` stores every batch in; None: as produced
        self.codec = config.codec

    def validate(self, records, now_ms: int) -> ValidatedRecords:
        """Check produced `records` (one or more batches) for this topic; raise on the
        first refusal. `now_ms` matters only when `needs_clock`."""
        config = self.config
        try:
            one = None
            if not self.log_append_time and len(records) >= HEADER_SIZE:
                one = RecordBatch(records)
                if one.size != len(records):
                    one = None
            if one is not None:
                one.validate()
                batches = [one]
                buffer = records
            else:
                buffer = records if isinstance(records, bytearray) else bytearray(records)
                batches = list(iter_batches(buffer))
                if not batches:
                    raise CorruptRecordError("no record batches in the request")
            max_bytes = config.max_message_bytes
            producer = None
            for b in batches:
                if b.size > max_bytes:
                    raise RecordTooLargeError(
                        f"batch of {b.size} bytes exceeds max.message.bytes {max_bytes}"
                    )
                if b.records_count <= 0 or b.last_offset_delta != b.records_count - 1:
                    raise CorruptRecordError(
                        "batch record count does not match its last offset delta"
                    )
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
        except CorruptRecordError as e:
            raise CorruptBatchError(str(e)) from e
        return ValidatedRecords(batches, buffer, one is not None, producer)

    def recompress(self, validated: ValidatedRecords) -> ValidatedRecords:
        """The batches rebuilt in the topic's codec, when compression.type names one
        and a batch is in another; else `validated` itself."""
        codec = self.codec
        if codec is None or all(b.codec == codec for b in validated.batches):
            return validated
        try:
            buffer = bytearray(
                b"".join(rebuild_batch(b, b.records(), codec) for b in validated.batches)
            )
            batches = list(iter_batches(buffer))
        except CorruptRecordError as e:
            raise CorruptBatchError(str(e)) from e
        producer = batches[0] if validated.producer_batch is not None else None
        return ValidatedRecords(batches, buffer, False, producer)


def assign_offsets(
    validated: ValidatedRecords, first_offset: int, leader_epoch: int, log_append_time: int = -1
) -> PlacedBatches:
    """Give the batches consecutive offsets from `first_offset` and `leader_epoch`
    (and, when `log_append_time` >= 0, that LogAppendTime), in their bytes and in the
    `RecordBatch` objects (the segment indexes from those)."""
    batches = validated.batches
    if validated.zero_copy:
        one = batches[0]
        one.base_offset = first_offset
        one.partition_leader_epoch = leader_epoch
        records = validated.buffer
        parts = (
            PREFIX.pack(first_offset, one.batch_length, leader_epoch),
            memoryview(records)[16:],
        )
        return PlacedBatches(
            batches,
            parts,
            len(records),
            first_offset,
            first_offset + one.last_offset_delta,
            one.max_timestamp,
        )
    buffer = validated.buffer
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


def validate_follower(records, log_end_offset: int) -> PlacedBatches:
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
