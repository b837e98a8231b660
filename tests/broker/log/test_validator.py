"""broker/log/validator.py alone: no files, no log. What a leader append checks and
rewrites, and what a follower append checks."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.common import (
    CorruptBatchError,
    InvalidOffsetError,
    RecordTooLargeError,
    RecordValidationError,
)
from broker.log.config import LogConfig
from broker.log.producer_state import ProducerStateError
from broker.log.validator import LogValidator, assign_offsets, validate_follower
from broker.protocol.control import end_txn_marker_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.records import (
    LOG_APPEND_TIME,
    BatchBuilder,
    Codec,
    CorruptRecordError,
    RecordBatch,
    iter_batches,
)

CODECS = [Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY]


def batch(values, codec=Codec.NONE, ts=1000, base_offset=0, epoch=-1, pid=-1, seq=-1):
    b = BatchBuilder(
        codec=codec,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        partition_leader_epoch=epoch,
    )
    for i, v in enumerate(values):
        b.append(v, key=b"k%d" % i, timestamp_ms=ts + i)
    return b.build()


def written(placed) -> bytes:
    """The bytes the segment would get."""
    return b"".join(bytes(p) for p in placed.parts)


def validator(**config) -> LogValidator:
    return LogValidator(LogConfig(**config), "t-0")


values = st.lists(st.binary(max_size=40), min_size=1, max_size=6)
batches_strategy = st.lists(st.tuples(values, st.sampled_from(CODECS)), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(
    batches=batches_strategy,
    first=st.integers(0, 2**40),
    epoch=st.integers(0, 2**31 - 1),
    as_bytearray=st.booleans(),
)
def test_offsets_are_consecutive_and_batches_stay_valid(batches, first, epoch, as_bytearray):
    raw = b"".join(batch(v, codec) for v, codec in batches)
    records = bytearray(raw) if as_bytearray else raw
    placed = validator().validate_and_assign_offsets(records, first, epoch, 0)
    total = sum(len(v) for v, _ in batches)
    assert (placed.first_offset, placed.last_offset) == (first, first + total - 1)
    assert placed.size == len(raw)
    stored = list(iter_batches(written(placed)))  # CRCs checked: still intact
    expected_bases = [first + sum(len(v) for v, _ in batches[:i]) for i in range(len(batches))]
    assert [b.base_offset for b in stored] == expected_bases
    assert [b.base_offset for b in placed.batches] == expected_bases
    assert {b.partition_leader_epoch for b in stored} == {epoch}
    assert [[r.value for r in b.records()] for b in stored] == [v for v, _ in batches]
    assert placed.max_timestamp == max(1000 + len(v) - 1 for v, _ in batches)
    assert placed.producer_batch is None


def test_a_single_batch_is_not_copied():
    records = batch([b"a", b"b"])
    placed = validator().validate_and_assign_offsets(records, 10, 3, 0)
    prefix, rest = placed.parts
    assert len(prefix) == 16 and rest.obj is records
    assert [b.base_offset for b in iter_batches(written(placed))] == [10]


def test_a_bytearray_of_several_batches_is_rewritten_in_place():
    records = bytearray(batch([b"a"]) + batch([b"b", b"c"]))
    placed = validator().validate_and_assign_offsets(records, 5, 1, 0)
    assert placed.parts == (records,)
    assert [b.base_offset for b in iter_batches(records)] == [5, 6]


@settings(max_examples=30, deadline=None)
@given(batches=batches_strategy, now=st.integers(0, 2**50))
def test_log_append_time_stamps_every_batch(batches, now):
    raw = b"".join(batch(v, codec) for v, codec in batches)
    v = validator(message_timestamp_type="LogAppendTime")
    assert v.needs_clock
    placed = v.validate_and_assign_offsets(raw, 0, 0, now)
    assert placed.max_timestamp == now
    for b in iter_batches(written(placed)):
        assert b.max_timestamp == now and b.timestamp_type == LOG_APPEND_TIME


@settings(max_examples=30, deadline=None)
@given(batches=batches_strategy, target=st.sampled_from(["uncompressed", "lz4", "zstd"]))
def test_recompression_keeps_records_offsets_and_count(batches, target):
    raw = b"".join(batch(v, codec) for v, codec in batches)
    v = validator(compression_type=target)
    placed = v.validate_and_assign_offsets(raw, 7, 0, 0)
    stored = list(iter_batches(written(placed)))
    assert {b.codec for b in stored} == {v.codec}
    assert [[r.value for r in b.records()] for b in stored] == [v for v, _ in batches]
    assert placed.last_offset == 7 + sum(len(v) for v, _ in batches) - 1


def test_the_idempotent_batch_is_handed_back_for_producer_state():
    placed = validator().validate_and_assign_offsets(batch([b"a"], pid=4, seq=0), 0, 0, 0)
    assert placed.producer_batch is placed.batches[0]
    assert placed.producer_batch.producer_id == 4
    recompressed = validator(compression_type="lz4").validate_and_assign_offsets(
        batch([b"a"], pid=4, seq=0), 0, 0, 0
    )
    assert recompressed.producer_batch.codec == Codec.LZ4


@pytest.mark.parametrize(
    "records, config, error",
    [
        (b"", {}, CorruptBatchError),
        (batch([b"a"])[:-1], {}, CorruptBatchError),
        (batch([b"x" * 200]), {"max_message_bytes": 100}, RecordTooLargeError),
        (batch([b"a"], pid=1, seq=0) + batch([b"b"], pid=1, seq=1), {}, CorruptBatchError),
        (batch([b"a"]) + b"\x00" * 5, {}, CorruptBatchError),
    ],
)
def test_refusals(records, config, error):
    with pytest.raises(error):
        validator(**config).validate_and_assign_offsets(records, 0, 0, 0)


def test_a_flipped_byte_fails_the_crc():
    records = bytearray(batch([b"hello"]))
    records[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="crc"):
        validator().validate_and_assign_offsets(bytes(records), 0, 0, 0)


def test_clients_may_not_write_control_batches():
    marker = end_txn_marker_batch(5, 0, True, 0)
    with pytest.raises(ProducerStateError) as e:
        validator().validate_and_assign_offsets(marker, 0, 0, 0)
    assert e.value.code == ErrorCode.INVALID_RECORD


def test_record_rules_apply_only_when_the_topic_has_them():
    assert not validator().needs_clock
    keyless = BatchBuilder()
    keyless.append(b"v", timestamp_ms=1000)
    compacted = validator(cleanup_policy="compact")
    assert compacted.needs_clock
    with pytest.raises(RecordValidationError) as e:
        compacted.validate_and_assign_offsets(keyless.build(), 0, 0, 0)
    assert e.value.code == ErrorCode.INVALID_RECORD and e.value.record_errors[0][0] == 0


def test_assign_offsets_places_a_coordinator_marker():
    data = bytearray(end_txn_marker_batch(5, 0, False, 2))
    placed = assign_offsets([RecordBatch(data)], data, 42, 3)
    (stored,) = iter_batches(written(placed))
    assert (stored.base_offset, stored.partition_leader_epoch, stored.is_control) == (42, 3, True)
    assert (placed.first_offset, placed.last_offset) == (42, 42)


def test_follower_batches_keep_their_offsets():
    records = batch([b"a", b"b"], base_offset=10, epoch=2) + batch([b"c"], base_offset=14, ts=5)
    placed = validate_follower(records, 10)
    assert (placed.first_offset, placed.last_offset, placed.max_timestamp) == (10, 14, 1001)
    assert written(placed) == records
    with pytest.raises(InvalidOffsetError):
        validate_follower(records, 11)
    overlapping = batch([b"a", b"b"], base_offset=10) + batch([b"c"], base_offset=11)
    with pytest.raises(InvalidOffsetError):
        validate_follower(overlapping, 0)
    with pytest.raises(CorruptRecordError):
        validate_follower(b"", 0)
