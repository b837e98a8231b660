"""The offline (scheduled, hourly) nginx job: `logflume etl offline`.

Theory of operation: exactly-once hourly aggregates across runs and crashes

A run is a streaming query with `Trigger.AvailableNow` over a checkpoint: it pins
the topic's current end offsets, processes everything between the checkpoint's
last committed offsets and those, in micro-batches of at most
`maxOffsetsPerTrigger` records, and stops. Spark writes each batch's offset range
to the checkpoint *before* running it and marks it committed *after*; a batch that
crashed is re-run at the next start with exactly the same offsets, hence exactly
the same rows.

Each micro-batch (foreachBatch, `_Batch.__call__`) then does three idempotent steps:

1. Store the parsed rows under `<output>/parsed/date=D/hour=H/batch=B/`, overwriting
   only the partitions of this batch id B (dynamic partition overwrite). A re-run of
   batch B replaces what a crashed attempt wrote; nothing is appended twice.
   Unparsable lines go to `<output>/rejects/batch=B/` the same way (with their
   Kafka coordinates and text), and are counted in the progress output.
2. For every (date, hour) the batch touched, recompute that hour's figures from
   *all* stored rows of the hour (every batch of every run), and overwrite
   `<output>/hourly/date=D/hour=H/` and `<output>/top_paths/date=D/hour=H/`.
3. Return; Spark commits the batch.

So an hour's aggregates are always a pure function of the distinct records stored
for it: late records for an hour written by an earlier run simply cause that hour
to be recomputed, and a crash at any point is repaired by the re-run of the batch.
(The alternative, append mode with a watermark, would emit each hour once but drop
records later than the watermark; this design never drops late data.)

Keep `<output>` and `<checkpoint>` together: batch ids restart at 0 with a new
checkpoint and would overwrite stored rows, so `run_offline` refuses a fresh
checkpoint when `<output>/parsed` already holds data.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from pyspark.sql import functions as F

from spark_etl import transforms as T
from spark_etl.jobs.common import hadoop_path_exists, printer, source_stream


@dataclasses.dataclass
class OfflineReport:
    """What one `run_offline` call did (filled in by its micro-batches)."""

    batches: int = 0
    rows: int = 0
    rejected: int = 0
    hours: set = dataclasses.field(default_factory=set)  # {(date, hour)} rewritten
    seconds: float = 0.0


class _Batch:
    """The foreachBatch handler. Called by Spark on the driver, one batch at a time."""

    def __init__(self, spark, output: str, report: OfflineReport, say, after_store=None):
        self.spark = spark
        self.output = output.rstrip("/")
        self.report = report
        self.say = say
        self.after_store = after_store

    def __call__(self, batch_df, batch_id: int) -> None:
        parsed = T.with_hour(batch_df).persist()
        try:
            summary = (
                parsed.groupBy("topic", "partition", "parse_ok", "date", "hour")
                .agg(
                    F.count(F.lit(1)).alias("n"),
                    F.min("offset").alias("lo"),
                    F.max("offset").alias("hi"),
                )
                .collect()
            )
            rows = sum(r.n for r in summary)
            bad = sum(r.n for r in summary if not r.parse_ok)
            hours = sorted({(r.date, r.hour) for r in summary if r.parse_ok})
            self._store(parsed, batch_id)
            if self.after_store is not None:
                self.after_store(batch_id)
            if hours:
                self._recompute(hours)
        finally:
            parsed.unpersist()
        self.report.batches += 1
        self.report.rows += rows
        self.report.rejected += bad
        self.report.hours.update(hours)
        self.say(
            f"batch {batch_id}: {rows} records in, {bad} unparsable, "
            f"hours written: {', '.join(f'{d} {h:02d}:00' for d, h in hours) or '-'}; "
            f"offsets {_ranges(summary)}"
        )

    def _store(self, parsed, batch_id: int) -> None:
        good = T.accepted(parsed).drop("parse_ok", "raw").withColumn("batch", F.lit(batch_id))
        good.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy(
            "date", "hour", "batch"
        ).parquet(f"{self.output}/parsed")
        bad = T.rejected(parsed).select(
            "topic", "partition", "offset", "ingest_time", "raw", F.lit(batch_id).alias("batch")
        )
        bad.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy(
            "batch"
        ).parquet(f"{self.output}/rejects")

    def _recompute(self, hours: list[tuple[str, int]]) -> None:
        stored = self.spark.read.parquet(f"{self.output}/parsed")
        wanted = None
        for d, h in hours:
            cond = (F.col("date") == F.lit(d).cast("date")) & (F.col("hour") == h)
            wanted = cond if wanted is None else wanted | cond
        rows = (
            stored.where(wanted).drop("date", "hour", "batch").withColumn("parse_ok", F.lit(True))
        )
        for name, table in (("hourly", T.hourly_stats(rows)), ("top_paths", T.top_paths(rows))):
            table.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy(
                "date", "hour"
            ).parquet(f"{self.output}/{name}")


def _ranges(summary) -> str:
    spans: dict[tuple, list[int]] = {}
    for r in summary:
        lo, hi = spans.setdefault((r.topic, r.partition), [r.lo, r.hi])
        spans[(r.topic, r.partition)] = [min(lo, r.lo), max(hi, r.hi)]
    return ", ".join(f"{t}-{p}: {lo}..{hi}" for (t, p), (lo, hi) in sorted(spans.items())) or "-"


# Session settings the job's micro-batches go faster with (measured in
# bench/RESULTS.md), applied unless the user's Spark configuration sets them: the
# parsed batch is cached once for three passes, and building an uncompressed cache is
# ~30 % cheaper; the partitioned store writes its few date/hour files side by side
# instead of sorting the batch by partition first.
SESSION_DEFAULTS = {
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "8",
}


def run_offline(
    spark,
    *,
    bootstrap: str,
    topic: str,
    output: str,
    checkpoint: str,
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    client: dict[str, str] | None = None,
    say: Callable[[str], None] | None = None,
    after_store: Callable[[int], None] | None = None,
) -> OfflineReport:
    """Process everything that arrived since the last run, then return.

    `after_store(batch_id)` runs between steps 1 and 2 of each batch (see the module
    docstring); tests use it to crash a batch half-way.
    """
    say = say or printer()
    output = output.rstrip("/")
    ckpt = checkpoint.rstrip("/")
    if not hadoop_path_exists(spark, f"{ckpt}/offsets") and hadoop_path_exists(
        spark, f"{output}/parsed"
    ):
        raise RuntimeError(
            f"logflume: {output}/parsed holds data but checkpoint {ckpt} is new; "
            "batch ids would restart and overwrite it. Restore the checkpoint, or use a "
            "new --output to reprocess from scratch."
        )
    configured = spark.sparkContext.getConf()
    for key, value in SESSION_DEFAULTS.items():
        if not configured.contains(key):
            spark.conf.set(key, value)
    report = OfflineReport()
    started = time.monotonic()
    stream = source_stream(
        spark, bootstrap, topic, "earliest", max_offsets_per_trigger, fail_on_data_loss, client
    )
    say(f"offline: {topic} @ {bootstrap} -> {output} (checkpoint {ckpt})")
    query = (
        T.parse_access(stream)
        .writeStream.foreachBatch(_Batch(spark, output, report, say, after_store))
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .queryName("logflume-offline")
        .start()
    )
    query.awaitTermination()
    report.seconds = time.monotonic() - started
    say(
        f"offline: done in {report.seconds:.1f}s: {report.batches} batches, {report.rows} records, "
        f"{report.rejected} unparsable (kept in {output}/rejects), {len(report.hours)} hours written"
    )
    return report
