"""The near-real-time nginx job: `logflume etl realtime`.

Three streaming queries over the same topic, each with its own checkpoint
sub-directory, all over one-minute tumbling windows per host with a watermark. Two
compute `transforms.minute_stats` (every figure, with the percentile and
HyperLogLog sketches) in append mode, so each window is emitted once, FINAL, as soon
as the watermark (latest event time seen minus `watermark`) passes its end, every
`trigger_seconds`:

- `parquet`: the file sink (exactly-once) into `<output>/minute/date=D/`;
- `publish`: JSON documents (key = host, `"final": true`) to the broker topic
  `stats_topic` through the `logflume` data source's stream writer (at-least-once,
  acks=all).

A final window can only appear after its minute plus the watermark has passed, so
the third query makes fresh data visible within seconds:

- `provisional`: update mode every `provisional_trigger_seconds` (default 1 s):
  each micro-batch publishes (from the driver, see DriverPublisher) to the same
  topic, with `"final": false`, the rows of every window (still open or not yet
  closed by the watermark) that the batch's records changed, with the counts so far.
  A provisional row is superseded by any later row of the same window and host
  (provisional or final); the final row is the one to keep. Readers wanting only
  settled figures skip `final: false`.

Provisional rows carry the counts only (`transforms.minute_counts`): window_start,
window_end, host, requests, status_2xx, status_3xx, status_4xx, status_5xx, bytes
and final. No unique_clients, rt_p50/p95/p99: those sketches are the bulk of a
window's state, and serializing and committing them every second made a
provisional micro-batch several times longer than its trigger. They come with the
final row. The provisional query's state has `provisional_shuffle_partitions`
partitions (default 1: a handful of windows, one state store task per batch instead
of one per `spark.sql.shuffle.partitions`); a streaming query keeps the value its
checkpoint was created with, so this applies to new checkpoints only.

Rows later than the watermark are dropped from the windows (that is the price of
emitting early); the offline job, which never drops late rows, is the reference.
Each query reads and parses the topic on its own (Spark runs one source per query).

Scheduling, for freshness (issue 6: p99 <= 5 s from log line to provisional row at
5,000 lines/s on two cores). The final queries start in scheduler pool FINAL_POOL,
the provisional query in PROVISIONAL_POOL: with `spark.scheduler.mode=FAIR` (what
`logflume etl realtime` sets) a free core goes to the pool with fewer running
tasks, so the provisional query's one-task stages no longer queue behind the final
queries' tasks; under FIFO the pools are ignored. The final trigger defaults to
20 s: a window's final row cannot come before its minute plus the watermark have
passed, so a long trigger delays it by seconds out of minutes, while each final
micro-batch costs a fixed few hundred ms of CPU (planning, state store commit of the
sketches) that the provisional query would otherwise wait for. bench/NOTES.md
("Freshness") has the measurements.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from spark_etl import transforms as T
from spark_etl.jobs.common import printer, source_stream

POOL_PROPERTY = "spark.scheduler.pool"
PROVISIONAL_POOL = "logflume-provisional"
FINAL_POOL = "logflume-final"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
STOP_INTERRUPTED = "interrupted by stop"  # DriverPublisher's error when a stop cuts a batch


class ProgressPrinter(StreamingQueryListener):
    """Prints one line per micro-batch of the queries named in `names`. Called by
    Spark's listener bus thread."""

    def __init__(self, say: Callable[[str], None], names: set[str]):
        self.say = say
        self.names = names

    def onQueryStarted(self, event) -> None:
        if event.name in self.names:
            self.say(f"{event.name}: started (id {event.id})")

    def onQueryProgress(self, event) -> None:
        p = event.progress
        if p.name not in self.names:
            return
        offsets = []
        for src in p.sources:
            end = src.endOffset
            end = json.loads(end) if isinstance(end, str) else end
            for t, parts in (end or {}).items():
                offsets += [f"{t}-{k}@{v}" for k, v in sorted(parts.items())]
        out = p.sink.numOutputRows if p.sink is not None else -1
        watermark = (p.eventTime or {}).get("watermark", "-")
        self.say(
            f"{p.name}: batch {p.batchId} ({p.batchDuration} ms): {p.numInputRows} records in, "
            f"{out} window rows out, "
            f"watermark {watermark}, offsets {' '.join(offsets) or '-'}"
        )

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        if not event.exception:
            return
        if STOP_INTERRUPTED in event.exception:
            self.say(
                f"query {event.id}: stopped mid-batch (the batch runs again at the next start)"
            )
        else:
            self.say(f"query {event.id} failed: {event.exception}")


class DriverPublisher:
    """The provisional query's foreachBatch sink: collects the batch's few window
    rows in the driver and produces them (acks=all, flushed before the batch
    completes: at-least-once). Cheaper and quicker than the data source's writer for
    a handful of rows every second (no Python worker per task). A producer per batch
    (a loopback connection costs milliseconds), so nothing outlives the query. Called
    by Spark's stream thread of one query, one batch at a time."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap = bootstrap
        self.topic = topic

    def __call__(self, batch, batch_id: int) -> None:
        from confluent_kafka import KafkaException, Producer
        from py4j.protocol import Py4JJavaError

        try:
            rows = batch.collect()  # the batch's only Spark job
        except Py4JJavaError as e:
            if "java.lang.InterruptedException" not in str(e):
                raise
            # The query is being stopped. Fail the batch (it is not committed and runs
            # again at the next start) with a short message: Spark matches the error
            # text against a regex that overflows the JVM stack on the long Java trace
            # a Py4JJavaError carries, printing a thousand-line StackOverflowError.
            raise InterruptedError(f"batch {batch_id} {STOP_INTERRUPTED}") from None
        if not rows:
            return
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0})
        errors = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(err)

        for row in rows:
            key = None if row.key is None else row.key.encode()
            producer.produce(self.topic, row.value.encode(), key, on_delivery=delivered)
        if producer.flush(30) or errors:
            raise KafkaException(errors[0] if errors else f"batch {batch_id}: flush timed out")


def start_realtime(
    spark,
    *,
    bootstrap: str,
    topic: str,
    output: str,
    checkpoint: str,
    stats_topic: str = "nginx-stats",
    trigger_seconds: float = 20.0,
    provisional_trigger_seconds: float = 1.0,
    provisional_shuffle_partitions: int = 1,
    watermark: str = "1 minute",
    starting_offsets: str = "latest",
    fail_on_data_loss: bool = True,
    say: Callable[[str], None] | None = None,
) -> list:
    """Start the queries and return them (running); stop them with `.stop()`.
    `provisional_trigger_seconds` 0 leaves the provisional query out."""
    say = say or printer()
    output, ckpt = output.rstrip("/"), checkpoint.rstrip("/")
    names = {f"logflume-realtime-{n}" for n in ("parquet", "publish", "provisional")}
    spark.streams.addListener(ProgressPrinter(say, names))
    trigger = f"{trigger_seconds} seconds"

    def parsed():
        stream = source_stream(spark, bootstrap, topic, starting_offsets, None, fail_on_data_loss)
        return T.parse_access(stream)

    def stats():
        return T.minute_stats(parsed(), watermark)

    to_files = (
        stats()
        .withColumn("date", F.date_format("window_start", "yyyy-MM-dd"))
        .writeStream.format("parquet")
        .outputMode("append")
        .partitionBy("date")
        .option("path", f"{output}/minute")
        .option("checkpointLocation", f"{ckpt}/parquet")
        .trigger(processingTime=trigger)
        .queryName("logflume-realtime-parquet")
    )
    to_topic = (
        T.to_json_value(stats().withColumn("final", F.lit(True)))
        .writeStream.format("logflume")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", stats_topic)
        .option("checkpointLocation", f"{ckpt}/publish")
        .trigger(processingTime=trigger)
        .queryName("logflume-realtime-publish")
    )
    queries = [_start(spark, w, FINAL_POOL) for w in (to_files, to_topic)]
    if provisional_trigger_seconds > 0:
        writer = (
            T.to_json_value(T.minute_counts(parsed(), watermark).withColumn("final", F.lit(False)))
            .writeStream.outputMode("update")
            .foreachBatch(DriverPublisher(bootstrap, stats_topic))
            .option("checkpointLocation", f"{ckpt}/provisional")
            .trigger(processingTime=f"{provisional_trigger_seconds} seconds")
            .queryName("logflume-realtime-provisional")
        )
        conf = {SHUFFLE_PARTITIONS: str(provisional_shuffle_partitions)}
        queries.append(_start(spark, writer, PROVISIONAL_POOL, conf))
    provisional = (
        f", provisional rows every {provisional_trigger_seconds}s"
        if provisional_trigger_seconds > 0
        else ""
    )
    say(
        f"realtime: {topic} @ {bootstrap} -> {output}/minute and topic {stats_topic} "
        f"every {trigger_seconds}s{provisional} (watermark {watermark}, checkpoint {ckpt})"
    )
    return queries


def _start(spark, writer, pool: str, conf: dict[str, str] | None = None):
    """Start `writer` in scheduler pool `pool`, with the session settings `conf`.

    A query's jobs go to the pool named by the local property
    `spark.scheduler.pool` of the thread that starts it, and a query takes session
    settings such as `spark.sql.shuffle.partitions` when it starts (a new checkpoint
    records them): both are set around the start and restored, leaving the caller's
    thread and the other queries unchanged.
    """
    sc = spark.sparkContext
    pool_before = sc.getLocalProperty(POOL_PROPERTY)
    conf_before = {key: spark.conf.get(key) for key in conf or {}}
    sc.setLocalProperty(POOL_PROPERTY, pool)
    for key, value in (conf or {}).items():
        spark.conf.set(key, value)
    try:
        return writer.start()
    finally:
        sc.setLocalProperty(POOL_PROPERTY, pool_before)
        for key, value in conf_before.items():
            spark.conf.set(key, value)


def run_realtime(spark, *, stop: threading.Event | None = None, **kwargs) -> None:
    """Run until `stop` is set (or forever / until a query fails)."""
    queries = start_realtime(spark, **kwargs)
    try:
        while not (stop is not None and stop.is_set()):
            for q in queries:
                if q.awaitTermination(0.5):
                    raise RuntimeError(f"query {q.name} stopped: {q.exception()}")
    finally:
        if stop is not None and stop.is_set():
            _quiet_interrupted_batches(spark)
        for q in queries:
            q.stop()


def _quiet_interrupted_batches(spark) -> None:
    """Stopping a query interrupts its running micro-batch: Spark logs the aborted
    write and py4j the interrupted foreachBatch callback, each with a stack trace.
    On a requested stop (Ctrl-C) those are expected and would bury the user's
    terminal, so both loggers are turned down first; the batch itself is not
    committed and runs again at the next start."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("FATAL")
