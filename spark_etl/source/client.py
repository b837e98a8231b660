"""The data source's broker I/O, through confluent-kafka (librdkafka).

Every function here opens its own client and closes it before returning (or when
its generator is closed), so reader and writer objects that Spark pickles never
hold a socket, a thread or a lock.

`read_range` is the hot path: it assigns one topic-partition at the range's start,
consumes in batches (`consume(num_messages=...)`), and turns each batch into one
pyarrow.RecordBatch in the Kafka-source schema, column by column.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator

from spark_etl.source.options import TP, DataLossError, SourceOptions, check_start

log = logging.getLogger("spark_etl.source")

CONSUME_BATCH = 10_000
METADATA_TIMEOUT_S = 30.0
# librdkafka timestamp types -> Kafka's timestampType (0 CreateTime, 1 LogAppendTime)
_TS_TYPE = {1: 0, 2: 1}


def _consumer(opts: SourceOptions, **extra):
    from confluent_kafka import Consumer

    conf = {
        "group.id": "logflume-spark",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
        "max.partition.fetch.bytes": 8 << 20,
        "queued.max.messages.kbytes": 256 << 10,
    }
    conf.update(opts.client)
    conf.update(extra)
    return Consumer(conf)


def topic_partitions(opts: SourceOptions) -> list[TP]:
    """The subscribed topics' partitions, sorted (topics matched by name or pattern)."""
    opts.require_subscription()
    consumer = _consumer(opts)
    try:
        meta = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        out = []
        for name, topic in meta.topics.items():
            if opts.selects(name) and topic.error is None:
                out += [(name, p) for p in topic.partitions]
        return sorted(out)
    finally:
        consumer.close()


def watermarks(opts: SourceOptions, tps: list[TP]) -> dict[TP, tuple[int, int]]:
    """(log start offset, high watermark) of each partition, asked of the leaders."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(opts)
    try:
        return {
            tp: consumer.get_watermark_offsets(
                TopicPartition(*tp), timeout=METADATA_TIMEOUT_S, cached=False
            )
            for tp in tps
        }
    finally:
        consumer.close()


def read_range(opts: SourceOptions, tp: TP, start: int, end: int, arrow_schema) -> Iterator:
    """Yield pyarrow.RecordBatches with the records of `tp` in [start, end)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    topic, partition = tp
    consumer = _consumer(opts)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        pos = start
        last_progress = time.monotonic()
        while pos < end:
            msgs = consumer.consume(num_messages=CONSUME_BATCH, timeout=1.0)
            # Records come in runs between (rare) error events: EOF, offset reset.
            errors = [i for i, m in enumerate(msgs) if m.error() is not None]
            run_start, got = 0, 0
            for i in [*errors, len(msgs)]:
                run = msgs[run_start:i]
                run_start = i + 1
                if run and pos < end:
                    batch, pos = _to_arrow(run, topic, partition, end, arrow_schema)
                    got += batch.num_rows
                    if batch.num_rows:
                        yield batch
                if i == len(msgs) or pos >= end:
                    continue
                err = msgs[i].error()
                if err.code() == KafkaError._PARTITION_EOF:
                    if msgs[i].offset() < end:
                        _truncated(opts, tp, msgs[i].offset(), end)
                        pos = end
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S
                    )
                    pos = check_start(tp, pos, low, high, opts.fail_on_data_loss, log)
                    consumer.assign([TopicPartition(topic, partition, pos)])
                    break
                else:
                    raise KafkaException(err)
            if got:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > opts.poll_timeout_s:
                raise TimeoutError(
                    f"logflume: no records from {topic}-{partition} at offset {pos} "
                    f"(want up to {end}) for {opts.poll_timeout_s:.0f}s"
                )
    finally:
        consumer.close()


def _to_arrow(run: list, topic: str, partition: int, end: int, arrow_schema):
    """(RecordBatch of the records of `run` below `end`, next position). Column-wise
    list comprehensions: the per-record cost is a few C calls."""
    import pyarrow as pa

    offsets = [m.offset() for m in run]
    nxt = offsets[-1] + 1
    if offsets[-1] >= end:
        cut = bisect.bisect_left(offsets, end)
        run, offsets, nxt = run[:cut], offsets[:cut], end
    n = len(run)
    if not n:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema), nxt
    stamps = [m.timestamp() for m in run]
    headers = [m.headers() for m in run]
    if any(headers):
        headers = [[{"key": k, "value": v} for k, v in h] if h else None for h in headers]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([m.key() for m in run], pa.binary()),
            pa.array([m.value() for m in run], pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([ts * 1000 if t else None for t, ts in stamps], pa.int64()).cast(
                arrow_schema.field("timestamp").type
            ),
            pa.array([_TS_TYPE.get(t, -1) for t, _ in stamps], pa.int32()),
            pa.array(headers, arrow_schema.field("headers").type),
        ],
        schema=arrow_schema,
    )
    return batch, nxt


def _truncated(opts: SourceOptions, tp: TP, high: int, end: int) -> None:
    msg = (
        f"logflume: topic {tp[0]!r} partition {tp[1]}: the log ends at offset {high} but "
        f"offsets up to {end - 1} were planned (log truncated, e.g. unclean leader election)"
    )
    if opts.fail_on_data_loss:
        raise DataLossError(msg + ". Set failOnDataLoss=false to continue.")
    log.warning("%s; failOnDataLoss=false: skipping them", msg)


def produce_batches(opts: SourceOptions, topic: str, batches) -> int:
    """Send the `value` (and optional `key`) column of each Arrow batch to `topic` with
    acks=all; flush and raise on any delivery error. Returns the records sent."""
    from confluent_kafka import KafkaException, Producer

    conf = {"acks": "all", "linger.ms": 5}
    conf.update(opts.client)
    producer = Producer(conf)
    errors: list = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    sent = 0
    for batch in batches:
        values = batch.column("value").to_pylist()
        names = batch.schema.names
        keys = batch.column("key").to_pylist() if "key" in names else [None] * len(values)
        for key, value in zip(keys, values, strict=True):
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
            sent += 1
        producer.poll(0)
        if errors:
            raise KafkaException(errors[0])
    left = producer.flush(METADATA_TIMEOUT_S * 4)
    if errors:
        raise KafkaException(errors[0])
    if left:
        raise TimeoutError(f"logflume: {left} records to {topic!r} not acknowledged in time")
    return sent
