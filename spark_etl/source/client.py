"""The data source's broker I/O, through confluent-kafka (librdkafka).

Consumers come from a per-process pool (`_borrowed`), never from the reader and
writer objects that Spark pickles, so those hold no socket, thread or lock. The
pool is what keeps a micro-batch cheap: Spark reuses its Python workers and keeps
the streaming planner process for the query's lifetime, and a new consumer costs a
connection, an ApiVersions and a Metadata round trip (tens of ms each time, and a
micro-batch needs one to plan, one to find the latest offsets, one per partition
read), while a pooled one only re-assigns. Idle consumers are unassigned (no
background fetching) and closed after POOL_IDLE_S. (Spark's Kafka source pools its
consumers for the same reason.)

`read_range` is the hot path: it assigns one topic-partition at the range's start,
consumes in batches (`consume(num_messages=...)`), and turns each batch into one
pyarrow.RecordBatch in the Kafka-source schema, column by column. Per record that
costs ~0.5 us in consume() (one Python Message each: the floor with this library)
and ~0.4 us to build the columns, provided librdkafka's prefetcher never idles
(`fetch.queue.backoff.ms`) and the cyclic GC does not scan the batch's objects
(`_gc_paused`). bench/RESULTS.md has the measurements.

A reader that checksums the values as well (the offline job's audit) asks for a
`value_hash` column (VALUE_HASH) after the Kafka columns of its schema: the hash is
taken of the bytes objects consume() made (~0.07 us a record), where hashing the
Arrow column later would first make them again (another ~0.13 us).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING

from common.audit import HASH_SEED
from spark_etl.source.batches import VALUE_HASH
from spark_etl.source.options import TP, DataLossError, SourceOptions, check_start

log = logging.getLogger("spark_etl.source")

CONSUME_BATCH = 10_000
CONSUME_WAIT_S = 0.2
METADATA_TIMEOUT_S = 30.0
# librdkafka timestamp types (0 none, 1 create, 2 log append), as list indexes ->
# Kafka's timestampType (0 CreateTime, 1 LogAppendTime; -1 for none)
if TYPE_CHECKING:
    from confluent_kafka import Consumer

_NO_TIMESTAMP = 0
_TS_TYPE = [-1, 0, 1]


POOL_IDLE_S = 300.0
_pool_lock = threading.Lock()
_pool: dict[tuple, list[tuple[float, Consumer]]] = {}  # conf -> [(idle since, consumer)]


@contextlib.contextmanager
def _borrowed(opts: SourceOptions):
    """A consumer with `opts`' settings, taken from the pool (or new) and given back
    unassigned; one that failed is closed instead."""
    conf = _consumer_conf(opts)
    key = tuple(sorted(conf.items()))
    now = time.monotonic()
    consumer: Consumer | None = None
    expired: list[Consumer] = []
    with _pool_lock:
        idle = _pool.get(key, [])
        while idle and consumer is None:
            since, candidate = idle.pop()
            if now - since < POOL_IDLE_S:
                consumer = candidate
            else:
                expired.append(candidate)
    for old in expired:
        old.close()
    if consumer is None:
        from confluent_kafka import Consumer

        consumer = Consumer(conf)
    try:
        yield consumer
        consumer.unassign()
    except BaseException:
        consumer.close()
        raise
    with _pool_lock:
        _pool.setdefault(key, []).append((time.monotonic(), consumer))


def close_pooled() -> None:
    """Close every idle pooled consumer: one left behind keeps reconnecting to its
    brokers until the process ends, even after the cluster is gone."""
    with _pool_lock:
        idle = [consumer for entries in _pool.values() for _, consumer in entries]
        _pool.clear()
    for consumer in idle:
        consumer.close()


def _consumer_conf(opts: SourceOptions) -> dict:
    conf = {
        "group.id": "logflume-spark",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        # A pooled consumer re-assigned while a long poll of its earlier assignment is
        # in flight waits for it (one fetch per broker at a time): keep it short.
        "fetch.wait.max.ms": 10,
        "max.partition.fetch.bytes": 8 << 20,
        "queued.max.messages.kbytes": 64 << 10,
        # librdkafka >= 2.0 waits this long to fetch again once its queue is full:
        # the default (1 s) stalls a reader that drains the queue faster than that
        # (consume rate 200k -> 1M records/s).
        "fetch.queue.backoff.ms": 1,
        # Spark's Kafka source reads uncommitted by default; here the committed view
        # is the default (librdkafka's too): records of aborted transactions and
        # those of open ones never reach a job. `kafka.isolation.level` overrides it.
        "isolation.level": "read_committed",
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
    `arrow_schema`: the Kafka source's columns, then optionally VALUE_HASH."""
    from confluent_kafka import TopicPartition

    topic, partition = tp
    with _borrowed(opts) as consumer:
        consumer.assign([TopicPartition(topic, partition, start)])
        pos = start
        last_progress = time.monotonic()
        while pos < end:
            with _gc_paused():
                batches, pos = _consume_step(consumer, opts, tp, pos, end, arrow_schema)
            yield from batches
            if batches:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > opts.poll_timeout_s:
                raise TimeoutError(
                    f"logflume: no records from {topic}-{partition} at offset {pos} "
                    f"(want up to {end}) for {opts.poll_timeout_s:.0f}s"
                )


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while one consume() batch becomes Arrow.

    A batch allocates tens of thousands of GC-tracked objects (Message objects,
    timestamp tuples) that live only until its columns are built; they would set off
    generation scans costing about a third of the read. Reference counting frees
    them all; nothing here makes cycles. The previous state is restored before the
    batches are yielded, so Spark's code never runs with the collector paused.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _consume_step(consumer, opts: SourceOptions, tp: TP, pos: int, end: int, arrow_schema):
    """One consume() call: (Arrow batches of the records in [pos, end), next position)."""
    from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

    topic, partition = tp
    # consume() returns when it has `num_messages` or at the timeout: asking for more
    # than the range holds would wait out the timeout on every read that ends near
    # the partition's end (a streaming micro-batch), so ask for the range's rest.
    # (Fewer exist only across gaps: compaction, transaction markers.)
    msgs = consumer.consume(num_messages=min(CONSUME_BATCH, end - pos), timeout=CONSUME_WAIT_S)
    if msgs and msgs[0].error() is None and msgs[0].offset() < pos:
        # Records of a pooled consumer's earlier assignment: librdkafka drops what it
        # fetched for it on re-assign; this guards the offsets contract all the same.
        msgs = [m for m in msgs if m.error() is not None or m.offset() >= pos]
    # Records come in runs between (rare) error events: EOF, offset reset.
    flags = list(map(Message.error, msgs))
    errors = _error_indexes(flags) if any(flags) else []
    batches, run_start = [], 0
    for i in [*errors, len(msgs)]:
        run = msgs[run_start:i]
        run_start = i + 1
        if run and pos < end:
            batch, pos = _to_arrow(run, topic, partition, end, arrow_schema)
            if batch.num_rows:
                batches.append(batch)
        if i == len(msgs) or pos >= end:
            continue
        err = msgs[i].error()
        if err.code() == KafkaError._PARTITION_EOF:
            # at the partition's end (its last stable offset in read_committed):
            # what lies between the last record and `end` are transaction markers
            # or aborted records, which librdkafka skips
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
    return batches, pos


def _error_indexes(flags: list) -> list[int]:
    return [i for i, err in enumerate(flags) if err is not None]


def _to_arrow(run: list, topic: str, partition: int, end: int, arrow_schema):
    """(RecordBatch of the records of `run` below `end`, next position).

    Column-wise: each column is one `map` of an unbound `Message` method over the run
    (about 30 ns a record) handed to pyarrow whole; offsets are a range when the run
    is contiguous (the usual case: gaps only come from compaction and transaction
    markers), timestamps are converted by Arrow kernels, and absent headers are one
    all-null column.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Message

    first, last = run[0].offset(), run[-1].offset()
    if last - first == len(run) - 1:
        if last >= end:
            run, last = run[: max(0, end - first)], end - 1
        offsets = pa.array(np.arange(first, last + 1, dtype=np.int64))
    else:
        listed = list(map(Message.offset, run))
        if last >= end:
            # a consumed message has an offset: the stub's None is for produced ones
            cut = bisect.bisect_left(listed, end)  # type: ignore[type-var]
            run, listed = run[:cut], listed[:cut]
        offsets = pa.array(listed, pa.int64())
    n = len(run)
    nxt = min(last + 1, end)
    if not n:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema), nxt
    pairs = list(map(Message.timestamp, run))
    kinds = list(map(itemgetter(0), pairs))
    ts_type = arrow_schema.field("timestamp").type
    stamps = (
        pa.array(list(map(itemgetter(1), pairs)), pa.int64())
        .cast(pa.timestamp("ms", tz=ts_type.tz))
        .cast(ts_type)
    )
    if _NO_TIMESTAMP in kinds:
        stamps = pc.if_else(pa.array([k == _NO_TIMESTAMP for k in kinds]), None, stamps)
    headers_type = arrow_schema.field("headers").type
    headers = list(map(Message.headers, run))
    if any(headers):
        headers = pa.array(
            # consumed headers are (key, value) pairs: the stub's dict is for producing
            [[{"key": k, "value": v} for k, v in h] if h else None for h in headers],  # type: ignore[str-unpack]
            headers_type,
        )
    else:
        headers = pa.nulls(n, headers_type)
    values = list(map(Message.value, run))
    value_column = pa.array(values, pa.binary())
    columns = [
        pa.array(list(map(Message.key, run)), pa.binary()),
        value_column,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets,
        stamps,
        pc.take(pa.array(_TS_TYPE, pa.int32()), pa.array(kinds, pa.int8())),
        headers,
    ]
    if arrow_schema.get_field_index(VALUE_HASH) >= 0:
        columns.append(_value_hashes(values, value_column.null_count > 0))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema), nxt


def _value_hashes(values: list[bytes | None], nulls: bool):
    """VALUE_HASH of each value (`nulls`: whether any is None)."""
    import numpy as np
    import pyarrow as pa
    import xxhash

    present = [b"" if v is None else v for v in values] if nulls else values
    hashes = np.fromiter(
        map(xxhash.xxh64_intdigest, present, repeat(HASH_SEED)),  # type: ignore[arg-type]
        np.uint64,
        len(values),
    )
    return pa.array(hashes.view(np.int64))


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
