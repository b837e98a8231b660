"""The near-real-time nginx job: `logflume etl realtime`.

Two streaming queries over the same topic, each with its own checkpoint
sub-directory, both computing `transforms.minute_stats` (one-minute tumbling windows
per host, with a watermark) in append mode, so each window is emitted once, as soon
as the watermark (latest event time seen minus `watermark`) passes its end:

- `parquet`: the file sink (exactly-once) into `<output>/minute/date=D/`;
- `publish`: JSON documents (key = host) to the broker topic `stats_topic` through
  the `logflume` data source's stream writer (at-least-once, acks=all).

Rows later than the watermark are dropped from the windows (that is the price of
emitting early); the offline job, which never drops late rows, is the reference.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from spark_etl import transforms as T
from spark_etl.jobs.common import printer, source_stream


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
            f"{p.name}: batch {p.batchId}: {p.numInputRows} records in, {out} window rows out, "
            f"watermark {watermark}, offsets {' '.join(offsets) or '-'}"
        )

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        if event.exception:
            self.say(f"query {event.id} failed: {event.exception}")


def start_realtime(
    spark,
    *,
    bootstrap: str,
    topic: str,
    output: str,
    checkpoint: str,
    stats_topic: str = "nginx-stats",
    trigger_seconds: float = 5.0,
    watermark: str = "1 minute",
    starting_offsets: str = "latest",
    fail_on_data_loss: bool = True,
    say: Callable[[str], None] | None = None,
) -> list:
    """Start both queries and return them (running); stop them with `.stop()`."""
    say = say or printer()
    output, ckpt = output.rstrip("/"), checkpoint.rstrip("/")
    names = {"logflume-realtime-parquet", "logflume-realtime-publish"}
    spark.streams.addListener(ProgressPrinter(say, names))
    trigger = f"{trigger_seconds} seconds"

    def stats():
        stream = source_stream(spark, bootstrap, topic, starting_offsets, None, fail_on_data_loss)
        return T.minute_stats(T.parse_access(stream), watermark)

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
        .start()
    )
    to_topic = (
        T.to_json_value(stats())
        .writeStream.format("logflume")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", stats_topic)
        .option("checkpointLocation", f"{ckpt}/publish")
        .trigger(processingTime=trigger)
        .queryName("logflume-realtime-publish")
        .start()
    )
    say(
        f"realtime: {topic} @ {bootstrap} -> {output}/minute and topic {stats_topic} "
        f"every {trigger_seconds}s (watermark {watermark}, checkpoint {ckpt})"
    )
    return [to_files, to_topic]


def run_realtime(spark, *, stop: threading.Event | None = None, **kwargs) -> None:
    """Run until `stop` is set (or forever / until a query fails)."""
    queries = start_realtime(spark, **kwargs)
    try:
        while not (stop is not None and stop.is_set()):
            for q in queries:
                if q.awaitTermination(0.5):
                    raise RuntimeError(f"query {q.name} stopped: {q.exception()}")
    finally:
        for q in queries:
            q.stop()
