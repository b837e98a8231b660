"""The data source's broker I/O: planning and writing through confluent-kafka
(librdkafka), reading through Fetch requests of our own (fetcher.py).

Consumers come from a per-process pool (`_borrowed`, pool.py), never from the reader
and writer objects that Spark pickles, so those hold no socket, thread or lock; the
fetchers of the reads are pooled the same way (fetcher.borrowed).

`read_range` is the hot path: it fetches the range's raw record sets from the
partition's leader and decodes them straight into pyarrow.RecordBatches in the
Kafka-source schema (batches.RecordSet, in C), without a Python object per
record: consume() cost ~0.5 us a record (one Python Message each) and building the
columns from those ~0.4 us more. bench/RESULTS.md has the measurements.

A reader that checksums the values as well (the offline job's audit) asks for a
`value_hash` column (VALUE_HASH) after the Kafka columns of its schema: the decoder
hashes each value as it copies it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from spark_etl.source import fetcher
from spark_etl.source.batches import RecordSet
from spark_etl.source.options import TP, DataLossError, SourceOptions, check_start
from spark_etl.source.pool import ClientPool

log = logging.getLogger("spark_etl.source")

METADATA_TIMEOUT_S = 30.0
READ_COMMITTED = "read_committed"
# How long a partition must keep ending before a range's end for read_range to call
# the rest of the range lost (see there).
END_CONFIRM_S = 3.0

if TYPE_CHECKING:
    from confluent_kafka import Consumer


POOL_IDLE_S = 300.0


def _new_consumer(conf: dict) -> Consumer:
    from confluent_kafka import Consumer

    return Consumer(conf)


_consumers: ClientPool[Consumer] = ClientPool(_new_consumer, POOL_IDLE_S)


def _borrowed(opts: SourceOptions):
    """A consumer with `opts`' settings, taken from the pool (or new) and given back;
    one that failed is closed instead."""
    return _consumers.borrowed(_consumer_conf(opts))


def close_pooled() -> None:
    """Close every idle pooled consumer and fetcher: a consumer left behind keeps
    reconnecting to its brokers until the process ends, even after the cluster is
    gone."""
    _consumers.close_all()
    fetcher.close_pooled()


def check_read_settings(opts: SourceOptions) -> None:
    """Refuse, before a query starts, settings the reads cannot honour: a ValueError
    naming the option (planning goes through librdkafka, reads through fetcher.py)."""
    _read_committed(opts)
    fetcher.check_settings(opts.client)


def _consumer_conf(opts: SourceOptions) -> dict:
    """The planning consumer's settings: it never consumes, it lists partitions and
    asks for watermarks (which follow the isolation level: the last stable offset in
    read_committed)."""
    conf = {
        "group.id": "logflume-spark",
        "enable.auto.commit": False,
        # Spark's Kafka source reads uncommitted by default; here the committed view
        # is the default (librdkafka's too): records of aborted transactions and
        # those of open ones never reach a job. `kafka.isolation.level` overrides it.
        "isolation.level": READ_COMMITTED,
    }
    conf.update(opts.client)
    return conf


def topic_partitions(opts: SourceOptions) -> list[TP]:
    """The subscribed topics' partitions, sorted (topics matched by name or pattern)."""
    opts.require_subscription()
    with _borrowed(opts) as consumer:
        meta = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
    out = []
    for name, topic in meta.topics.items():
        if opts.selects(name) and topic.error is None:
            out += [(name, p) for p in topic.partitions]
    return sorted(out)


def watermarks(opts: SourceOptions, tps: list[TP]) -> dict[TP, tuple[int, int]]:
    """(log start offset, high watermark) of each partition, asked of the leaders.
    A retriable answer (NOT_LEADER_FOR_PARTITION while a killed broker's partitions
    move, a dropped connection) is asked again until METADATA_TIMEOUT_S is spent, as
    Kafka's consumers do, instead of failing the query. librdkafka answers a
    partition that has no live leader in its metadata with "Local: Unknown
    partition" (_UNKNOWN_PARTITION: it found no leader to ask), so that one waits
    too; a partition that really does not exist fails at the deadline. Before asking
    again the topic's metadata is read afresh: librdkafka does not refresh it by
    itself for a partition it last saw without a leader."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    moving = (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    )
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    out = {}
    with _borrowed(opts) as consumer:
        for tp in tps:
            while tp not in out:
                try:
                    out[tp] = consumer.get_watermark_offsets(
                        TopicPartition(*tp), timeout=METADATA_TIMEOUT_S, cached=False
                    )
                except KafkaException as exc:
                    err = exc.args[0]
                    retriable = err.retriable() or err.code() in moving
                    if not retriable or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
                    _refresh_metadata(consumer, tp[0])
    return out


def _refresh_metadata(consumer: Consumer, topic: str) -> None:
    """Ask a broker for `topic`'s metadata now, which updates librdkafka's cache; a
    failure here is left to the next watermark query to report."""
    from confluent_kafka import KafkaException

    with contextlib.suppress(KafkaException):
        consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S / 10)


def read_range(opts: SourceOptions, tp: TP, start: int, end: int, arrow_schema) -> Iterator:
    """Yield pyarrow.RecordBatches with the records of `tp` in [start, end), in
    `arrow_schema`: the Kafka source's columns, then optionally VALUE_HASH.

    Raw record sets from Fetch requests to the partition's leader (fetcher.py),
    decoded into Arrow by batches.RecordSet: control batches and, in
    read_committed, aborted transactions' records are skipped. The next Fetch is
    sent before a record set is decoded (`prefetch`), so that the broker reads and
    sends it meanwhile (the read waited for each answer for a third of its time). Offsets retention
    removed (OFFSET_OUT_OF_RANGE) go to `check_start` (failOnDataLoss). When the
    partition ends (its high watermark, or its last stable offset in
    read_committed) before `end` and stays so for END_CONFIRM_S, the planned offsets
    are gone (`_truncated`): a leader that just took over may report a high
    watermark behind its predecessor's for a moment. Nothing new for
    `opts.poll_timeout_s` is a TimeoutError.
    """
    topic, partition = tp
    read_committed = _read_committed(opts)
    pos = start
    last_progress = time.monotonic()
    ended_at: float | None = None  # when the partition was first seen to end before `end`
    with fetcher.borrowed(opts.client) as source:
        while pos < end:
            data = source.fetch(tp, pos, read_committed, last_progress + opts.poll_timeout_s)
            if data.error == fetcher.OFFSET_OUT_OF_RANGE:
                low, high = watermarks(opts, [tp])[tp]
                nxt = check_start(tp, pos, low, high, opts.fail_on_data_loss, log)
                log_end = end  # the log's bounds hold `pos` again: only ask again
            else:
                records = RecordSet(data.records, topic, partition, pos, end, data.aborted)
                nxt = records.next_offset
                if pos < nxt < end:
                    source.prefetch(tp, nxt, read_committed)
                for batch in records.to_arrow(arrow_schema):
                    if batch.num_rows:
                        yield batch
                log_end = data.last_stable_offset if read_committed else data.high_watermark
            now = time.monotonic()
            if nxt != pos:
                pos, last_progress, ended_at = nxt, now, None
                continue
            if log_end <= pos:
                ended_at = ended_at or now
                if now - ended_at >= END_CONFIRM_S:
                    _truncated(opts, tp, pos, end)
                    return
            elif now - last_progress > opts.poll_timeout_s:
                raise TimeoutError(
                    f"logflume: no records from {topic}-{partition} at offset {pos} "
                    f"(want up to {end}) for {opts.poll_timeout_s:.0f}s"
                )
            time.sleep(fetcher.RETRY_BACKOFF_S)


def _read_committed(opts: SourceOptions) -> bool:
    level = str(opts.client.get("isolation.level", READ_COMMITTED)).lower()
    if level not in (READ_COMMITTED, "read_uncommitted"):
        raise ValueError(
            "logflume: option kafka.isolation.level must be read_committed or read_uncommitted"
        )
    return level == READ_COMMITTED


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
