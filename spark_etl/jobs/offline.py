"""The offline (scheduled, hourly) nginx job: `logflume etl offline`.

Theory of operation: exactly-once hourly aggregates across runs and crashes

A run is a streaming query with `Trigger.AvailableNow` over a checkpoint: it pins
the topic's current end offsets, processes everything between the checkpoint's
last committed offsets and those, in micro-batches of at most
`maxOffsetsPerTrigger` records, and stops. Spark writes each batch's offset range
to the checkpoint *before* running it and marks it committed *after*; a batch that
crashed is re-run at the next start with exactly the same offsets, hence exactly
the same rows.

The source is read with `emit=ranges`: a micro-batch's DataFrame holds only its
offset ranges, one row per Spark task. Each micro-batch (foreachBatch,
`_Batch.__call__`) then does three idempotent steps:

1. One Spark job (`batch_store.BatchStore` under mapInArrow): each task reads its
   range from the broker, parses it, and stores the parsed rows under
   `<output>/parsed/date=D/hour=H/batch=B/part-<task>.parquet`, the unparsable
   ones (with their Kafka coordinates and text) under `<output>/rejects/batch=B/`,
   and the hour's mergeable partial figures (`hour_parts`: counts, distinct
   clients, request-time and path tallies) under
   `<output>/partials/<kind>/date=D/hour=H/batch=B/`. Names depend only on the batch
   id B and the task, so a re-run of batch B rewrites what a crashed attempt wrote;
   files of B that this attempt did not write are then removed. Nothing is
   appended twice.
2. For every (date, hour) the batch touched, merge the partials of *all* batches of
   the hour (every batch of every run) in the driver and overwrite
   `<output>/hourly/date=D/hour=H/` and `<output>/top_paths/date=D/hour=H/`. The
   figures are exact (see `hour_parts`).
3. Publish the batch's audit totals (per host, topic and minute of the record
   timestamps: records read, parsed, rejected, checksum; spark_etl/audit.py) to
   the audit topic, keyed by this job and batch id, so a re-run rewrites them.
4. Return; Spark commits the batch.

Once every batch of the run is done, a progress mark on the audit topic says the
job has read the topic to its end as of the run's start (`common.audit.Progress`).

So an hour's aggregates are always a pure function of the distinct records stored
for it (each batch's partials are a function of its stored rows of the hour): late records for an hour written by an earlier run simply cause that hour
to be recomputed, and a crash at any point is repaired by the re-run of the batch.
(The alternative, append mode with a watermark, would emit each hour once but drop
records later than the watermark; this design never drops late data.)

Keep `<output>` and `<checkpoint>` together: batch ids restart at 0 with a new
checkpoint and would overwrite stored rows, so `run_offline` refuses a fresh
checkpoint when `<output>/parsed` already holds data.
"""

from __future__ import annotations

import dataclasses
import posixpath
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import from_arrow_schema

from common.audit import SPARK_OFFLINE, Progress
from common.topic_names import AUDIT_TOPIC
from spark_etl import audit
from spark_etl.jobs import batch_store, hour_parts
from spark_etl.jobs.common import (
    Publisher,
    ensure_audit_topic,
    hadoop_path_exists,
    printer,
    source_options,
)
from spark_etl.source.options import SourceOptions


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

    def __init__(
        self,
        source: SourceOptions,
        output: str,
        report: OfflineReport,
        say,
        after_store=None,
        audit_to: tuple[Publisher, str] | None = None,
    ):
        self.source = source
        self.audit_to = audit_to  # (publisher, audit topic), or None: no audit
        self.output = output.rstrip("/")
        self.fs, self.root = batch_store.filesystem(self.output)
        self.report = report
        self.say = say
        self.after_store = after_store
        self.timings: dict[str, float] = {}

    def __call__(self, batch_df, batch_id: int) -> None:
        started = time.perf_counter()
        schema = from_arrow_schema(batch_store.SUMMARY_SCHEMA)
        store = batch_store.BatchStore(self.output, batch_id, self.source)
        stored = batch_df.mapInArrow(store, schema)
        summary = stored.toArrow()
        self._drop_stale(batch_id, summary)
        stored_at = time.perf_counter()
        if self.after_store is not None:
            self.after_store(batch_id)
        ok = pc.fill_null(summary["parse_ok"], False)
        rows = pc.sum(summary["n"]).as_py() or 0
        bad = pc.sum(summary.filter(pc.invert(ok))["n"]).as_py() or 0
        keys = sorted(set(summary.filter(ok)["hour_key"].to_pylist()))
        hours = [hour_parts.hour_name(k) for k in keys]
        for date, hour in hours:
            self._recompute(date, hour)
        if self.audit_to is not None:
            self._publish_audit(batch_id, summary)
        done = time.perf_counter()
        self.timings = {"store": stored_at - started, "figures": done - stored_at}
        self.report.batches += 1
        self.report.rows += rows
        self.report.rejected += bad
        self.report.hours.update(hours)
        self.say(
            f"batch {batch_id}: {rows} records in, {bad} unparsable, "
            f"hours written: {', '.join(f'{d} {h:02d}:00' for d, h in hours) or '-'}; "
            f"offsets {_ranges(summary)}; "
            f"{self.timings['store']:.1f}s read+parse+store, "
            f"{self.timings['figures']:.1f}s hour figures"
        )

    def _publish_audit(self, batch_id: int, summary: pa.Table) -> None:
        """The batch's audit totals, under a writer of this job and batch: a re-run of
        the batch (same offsets, same totals) rewrites the same keys."""
        assert self.audit_to is not None
        publisher, topic = self.audit_to
        parsed = pc.if_else(pc.fill_null(summary["parse_ok"], False), summary["n"], 0)
        totals = audit.Totals()
        totals.add(summary.append_column("parsed", parsed))
        writer = f"offline-{audit.job_id(self.output)}.b{batch_id}"
        publisher.send(topic, totals.records(SPARK_OFFLINE, writer))

    def _drop_stale(self, batch_id: int, summary) -> None:
        """Remove files of batch `batch_id` that this attempt did not write (an earlier
        attempt's, when the batch's offset ranges were cut into other tasks)."""
        wanted = set()
        for task, ok, key in zip(
            summary["task"].to_pylist(),
            summary["parse_ok"].to_pylist(),
            summary["hour_key"].to_pylist(),
            strict=True,
        ):
            if not ok:
                wanted.add(batch_store.reject_file(self.root, batch_id, task))
                continue
            wanted.add(batch_store.parsed_file(self.root, batch_id, key, task))
            wanted.update(
                batch_store.partial_file(self.root, kind, batch_id, key, task)
                for kind in hour_parts.SCHEMAS
            )
        dirs = {posixpath.dirname(f) for f in wanted}
        dirs.add(posixpath.dirname(batch_store.reject_file(self.root, batch_id, 0)))
        for d in dirs:
            for info in _files(self.fs, d, recursive=False):
                if info.path not in wanted and posixpath.basename(info.path).startswith("part-"):
                    self.fs.delete_file(info.path)

    def _recompute(self, date: str, hour: int) -> None:
        where = batch_store.hour_dir(date, hour)
        parts: list[dict[str, pq.Table]] = []
        for kind in hour_parts.SCHEMAS:
            tables = [
                pq.read_table(info.path, filesystem=self.fs)
                for info in _files(self.fs, f"{self.root}/partials/{kind}/{where}", recursive=True)
                if posixpath.basename(info.path).startswith("part-")
            ]
            parts.extend({kind: t} for t in tables)
        merged = hour_parts.merge(parts)
        outputs = {
            "hourly": hour_parts.hour_figures(merged, date, hour),
            "top_paths": hour_parts.hour_top_paths(merged),
        }
        for name, table in outputs.items():
            directory = f"{self.root}/{name}/{where}"
            path = f"{directory}/{batch_store.part_name(0)}"
            batch_store.write_table(self.fs, path, table)
            for info in _files(self.fs, directory, recursive=False):
                if info.path != path and not posixpath.basename(info.path).startswith("."):
                    self.fs.delete_file(info.path)


def _files(fs, directory: str, *, recursive: bool) -> list:
    selector = pafs.FileSelector(directory, allow_not_found=True, recursive=recursive)
    return [i for i in fs.get_file_info(selector) if i.type == pafs.FileType.File]


def _ranges(summary) -> str:
    spans: dict[tuple, list[int]] = {}
    for r in summary.to_pylist():
        t, p = r["topic"], r["partition"]
        lo, hi = spans.setdefault((t, p), [r["lo"], r["hi"]])
        spans[(t, p)] = [min(lo, r["lo"]), max(hi, r["hi"])]
    return ", ".join(f"{t}-{p}: {lo}..{hi}" for (t, p), (lo, hi) in sorted(spans.items())) or "-"


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
    audit_topic: str | None = AUDIT_TOPIC,
) -> OfflineReport:
    """Process everything that arrived since the last run, then return.

    `after_store(batch_id)` runs between steps 1 and 2 of each batch (see the module
    docstring); tests use it to crash a batch half-way. `audit_topic`: where each
    batch publishes its audit totals (spark_etl/audit.py) before Spark commits it;
    None: nowhere.
    """
    say = say or printer()
    output = batch_store.absolute(output.rstrip("/"))
    ckpt = checkpoint.rstrip("/")
    if not hadoop_path_exists(spark, f"{ckpt}/offsets") and hadoop_path_exists(
        spark, f"{output}/parsed"
    ):
        raise RuntimeError(
            f"logflume: {output}/parsed holds data but checkpoint {ckpt} is new; "
            "batch ids would restart and overwrite it. Restore the checkpoint, or use a "
            "new --output to reprocess from scratch."
        )
    if hadoop_path_exists(spark, f"{output}/parsed") and not hadoop_path_exists(
        spark, f"{output}/partials"
    ):
        raise RuntimeError(
            f"logflume: {output}/parsed was written by a version without partial "
            "figures (partials/), which the hourly figures are now merged from. Use a new "
            "--output (and checkpoint) to reprocess from scratch."
        )
    report = OfflineReport()
    started = time.monotonic()
    options = source_options(
        bootstrap, topic, "earliest", max_offsets_per_trigger, fail_on_data_loss, client
    )
    options["emit"] = "ranges"  # the batch's tasks read their ranges themselves
    stream = spark.readStream.format("logflume").options(**options).load()
    source = SourceOptions.parse(options, streaming=True)
    say(f"offline: {topic} @ {bootstrap} -> {output} (checkpoint {ckpt})")
    started_ms = int(time.time() * 1000)  # the run reads the topic to its end of now
    publisher = None
    if audit_topic:
        ensure_audit_topic(bootstrap, audit_topic, client)
        publisher = Publisher(bootstrap, client)
    audit_to = (publisher, audit_topic) if publisher is not None and audit_topic else None
    try:
        query = (
            stream.writeStream.foreachBatch(
                _Batch(source, output, report, say, after_store, audit_to)
            )
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .queryName("logflume-offline")
            .start()
        )
        query.awaitTermination()
        if audit_to is not None:
            writer = f"offline-{audit.job_id(output)}"
            marks = [Progress(SPARK_OFFLINE, t, writer, started_ms) for t in topic.split(",")]
            audit_to[0].send(audit_to[1], [(m.key(), m.value()) for m in marks])
    finally:
        if publisher is not None:
            publisher.close()
    report.seconds = time.monotonic() - started
    say(
        f"offline: done in {report.seconds:.1f}s: {report.batches} batches, {report.rows} records, "
        f"{report.rejected} unparsable (kept in {output}/rejects), {len(report.hours)} hours written"
    )
    return report
