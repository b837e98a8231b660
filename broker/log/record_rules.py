"""A topic's rules for the records produced to it, checked record by record as
Kafka's LogValidator does, after the batch itself has passed its format checks.

- A compacted topic takes only records with a key (INVALID_RECORD).
- With CreateTime, a record's timestamp must lie within
  [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]
  (INVALID_TIMESTAMP); records without a timestamp (-1) pass.

Every broken record is reported with its index in its batch, so that a producer
on Produce v8+ can fail exactly those records (KIP-467). The checks decode the
records, so they run only when a rule applies: a compacted topic, or a finite
timestamp bound; the default topic costs nothing.
"""

from broker.log.common import RecordValidationError
from broker.log.config import LONG_MAX, LogConfig
from broker.protocol.errors import ErrorCode
from broker.protocol.records import RecordBatch


def rules_apply(config: LogConfig) -> bool:
    """Whether `check_records` has anything to check on this topic."""
    return config.compact or (
        config.message_timestamp_type == "CreateTime"
        and (
            config.message_timestamp_before_max_ms < LONG_MAX
            or config.message_timestamp_after_max_ms < LONG_MAX
        )
    )


def check_records(batch: RecordBatch, config: LogConfig, topic_partition: str, now_ms: int):
    """Raise RecordValidationError listing every record of `batch` that breaks a rule."""
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    check_time = config.message_timestamp_type == "CreateTime"
    earliest = now_ms - config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    for index, record in enumerate(batch.records()):
        if config.compact and record.key is None:
            errors.append(
                (index, f"Compacted topic cannot accept message without key in {topic_partition}.")
            )
        elif check_time and record.timestamp >= 0 and not earliest <= record.timestamp <= latest:
            bad_timestamp = True
            errors.append(
                (
                    index,
                    f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                    f"out of range. The timestamp should be within [{earliest}, {latest}]",
                )
            )
    if errors:
        code = ErrorCode.INVALID_TIMESTAMP if bad_timestamp else ErrorCode.INVALID_RECORD
        raise RecordValidationError(code, errors)
