"""record_rules: which records of a produced batch break their topic's rules."""

import pytest

from broker.log.common import RecordValidationError
from broker.log.config import LogConfig
from broker.log.record_rules import check_records, rules_apply
from broker.protocol.errors import ErrorCode
from broker.protocol.records import BatchBuilder, Codec, RecordBatch

NOW = 1_700_000_000_000
HOUR = 3_600_000


def batch(records, codec=Codec.NONE) -> RecordBatch:
    b = BatchBuilder(codec=codec)
    for key, ts in records:
        b.append(b"value", key=key, timestamp_ms=ts)
    return RecordBatch(b.build())


def rejected(b: RecordBatch, config: LogConfig) -> tuple[ErrorCode, list[int]]:
    with pytest.raises(RecordValidationError) as e:
        check_records(b, config, "t-0", NOW)
    return e.value.code, [index for index, _ in e.value.record_errors]


def test_default_topics_have_no_rules_to_check():
    assert not rules_apply(LogConfig())
    assert rules_apply(LogConfig(cleanup_policy="compact"))
    assert rules_apply(LogConfig(message_timestamp_after_max_ms=HOUR))
    assert not rules_apply(
        LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=HOUR)
    )


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4, Codec.GZIP])
def test_compacted_topics_name_every_keyless_record(codec):
    b = batch([(b"a", NOW), (None, NOW), (b"c", NOW), (None, NOW)], codec)
    assert rejected(b, LogConfig(cleanup_policy="compact")) == (ErrorCode.INVALID_RECORD, [1, 3])
    check_records(
        batch([(b"a", NOW), (b"b", NOW)], codec), LogConfig(cleanup_policy="compact"), "t-0", NOW
    )


def test_timestamps_outside_either_bound_are_invalid_timestamp():
    config = LogConfig(message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=HOUR)
    b = batch([(b"a", NOW), (b"b", NOW - 2 * HOUR), (b"c", NOW + 2 * HOUR), (b"d", -1)])
    assert rejected(b, config) == (ErrorCode.INVALID_TIMESTAMP, [1, 2])
    edge = batch([(b"a", NOW - HOUR), (b"b", NOW + HOUR)])
    check_records(edge, config, "t-0", NOW)


def test_a_batch_with_both_kinds_answers_invalid_timestamp():
    config = LogConfig(cleanup_policy="compact", message_timestamp_before_max_ms=HOUR)
    b = batch([(None, NOW), (b"b", NOW - 2 * HOUR)])
    assert rejected(b, config) == (ErrorCode.INVALID_TIMESTAMP, [0, 1])
