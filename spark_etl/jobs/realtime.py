"""The near-real-time nginx job: `logflume etl realtime`.

One streaming query reads and parses the topic once per micro-batch (every
`trigger_seconds`, default 0.5 s) and hands each batch to `RealtimeJob`, which keeps
one-minute tumbling windows per host itself (`window_state.WindowState`: running
counts of the open windows, the watermark):

- provisional rows: every window the batch changed is published at once to
  `stats_topic` (key = window start and host) with its counts so far and `"final": false`:
  window_start, window_end, host, requests, status_2xx..status_5xx, bytes. A
  provisional row is superseded by any later row of the same window and host.
- final rows: the batch's rows of open windows are staged as Parquet under the
  checkpoint (`staging/<minute>/<batch>.parquet`). Once the watermark (latest event
  time seen minus `watermark`) passes a minute's end and Spark has committed the
  batch that moved it there, a background thread computes the minute's figures from
  its staged rows (`window_state.minute_figures`: counts, exact unique_clients,
  nearest-rank rt_p50/p95/p99), writes them to
  `<output>/minute/date=D/part-<yyyymmdd-HHMM>.parquet` (one file per minute,
  replaced whole: exactly once) and publishes them with `"final": true`
  (acks=all), then deletes the staged rows. The final row is the one to keep; its
  requests equal the last provisional row's. A crash between the publish and the
  deletion publishes the same final row (same key and value) again at the restart:
  readers keep the last row per key (`window_doc`).

Why one query: Spark runs one source per query, so the three queries this job had
(provisional, Parquet finals, published finals) each read and parsed every record
and kept their own aggregation state, which on two cores made a 1 s provisional
batch take 2.5-5 s. Now a batch is one Spark job (read, parse, collect as Arrow)
and the window bookkeeping is a few milliseconds of pyarrow in the driver. The
final figures are computed in the driver too: a minute's staged rows (300,000 at
5,000 lines/s) take ~0.2 s of pyarrow against ~5 s of a Spark job with
percentile_approx, which slowed the batches running beside it.

Exactly once: Spark writes a batch's offsets before running it and runs it again
after a crash. The window state after batch N is saved as `state/<N>.json` and a
batch starts from the state of the batch before it, so a replayed batch counts the
same rows into the same windows and overwrites its own staged files. A minute is
finalized only after the commit of the batch that closed it, so no replay can add
rows to a finalized minute. Rows whose window has closed are dropped as late (the
offline job, which never drops late rows, is the reference); unparsable and late
rows are counted in the progress line.

The audit: every batch adds its records (parsed or not, late or not) to running
totals per host, topic and minute of the record timestamps, saved with the window
state, and publishes the buckets it changed to the audit topic (spark_etl/audit.py).

The checkpoint and the output must be on the local file system (the staged rows
and final files are written by the driver).
"""

from __future__ import annotations

import copy
import json
import logging
import re
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.audit import KEEP_S, SPARK_REALTIME, Progress
from common.fsutil import atomic_write
from common.topic_names import AUDIT_TOPIC
from spark_etl import audit
from spark_etl import transforms as T
from spark_etl.jobs.common import Publisher, ensure_audit_topic, printer, source_stream
from spark_etl.jobs.window_state import COUNTS, WINDOW_S, WindowState, minute_figures
from spark_etl.source.options import offsets_from_json

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "logflume-realtime"
PROGRESS_SECONDS = 10.0
STOP_INTERRUPTED = "interrupted by stop"  # a batch's error when a stop cuts it
FIGURES = ("unique_clients", "rt_p50", "rt_p95", "rt_p99")
FINAL_SCHEMA = pa.schema(
    [
        ("window_start", pa.timestamp("us", tz="UTC")),
        ("window_end", pa.timestamp("us", tz="UTC")),
        ("host", pa.string()),
        *[(c, pa.int64()) for c in COUNTS],
        ("unique_clients", pa.int64()),
        *[(c, pa.float64()) for c in FIGURES[1:]],
    ]
)
_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000}


def lateness_ms(watermark: str) -> int:
    """Milliseconds of an interval such as "1 minute", "30 seconds", "1 minute 30 seconds"."""
    parts = re.findall(r"(\d+)\s*([a-z]+?)s?\b", watermark.lower())
    if not parts or re.sub(r"[\d\sa-z]", "", watermark.lower()):
        raise ValueError(f"watermark {watermark!r}: expected e.g. '1 minute' or '30 seconds'")
    try:
        return sum(int(n) * _UNITS_MS[unit] for n, unit in parts)
    except KeyError as e:
        raise ValueError(f"watermark {watermark!r}: unknown unit {e.args[0]!r}") from None


def _iso(minute: int) -> str:
    """Spark's JSON form of a UTC timestamp, as the rows have always carried it."""
    return datetime.fromtimestamp(minute, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def window_doc(minute: int, host: str | None, figures: dict, final: bool) -> tuple:
    """(key, value) of a window row on the stats topic; null fields are left out.

    The key is the window and host ("2026-11-27T10:41:00.000Z web1"): every row of
    one window and host has the same key, the last one is the row to keep, and a
    compacted stats topic keeps exactly that. A final row published again after a
    crash (between the publish and the removal of the minute's staged rows) is the
    same key and value, so it doubles nothing for a reader keeping the last row per
    key."""
    start = _iso(minute)
    doc: dict[str, object] = {
        "window_start": start,
        "window_end": _iso(minute + WINDOW_S),
        "host": host,
    }
    doc.update(figures)
    doc["final"] = final
    value = orjson.dumps({k: v for k, v in doc.items() if v is not None})
    return (start.encode() if host is None else f"{start} {host}".encode(), value)


class RealtimeJob:
    """The query and its window bookkeeping. `start()` runs it; `failure()` is the
    first error of the query or the finalizer; `stop()` ends both."""

    def __init__(
        self,
        spark,
        *,
        bootstrap: str,
        topic: str,
        output: str,
        checkpoint: str,
        stats_topic: str = "nginx-stats",
        trigger_seconds: float = 0.5,
        provisional: bool = True,
        watermark: str = "1 minute",
        starting_offsets: str = "latest",
        fail_on_data_loss: bool = True,
        client: dict[str, str] | None = None,
        say: Callable[[str], None] | None = None,
        audit_topic: str | None = AUDIT_TOPIC,
    ):
        self.spark = spark
        self.audit_topic = audit_topic
        self.client = client
        self.bootstrap, self.topic, self.stats_topic = bootstrap, topic, stats_topic
        self.trigger_seconds, self.provisional = trigger_seconds, provisional
        self.lateness_ms = lateness_ms(watermark)
        self.watermark = watermark
        self.starting_offsets, self.fail_on_data_loss = starting_offsets, fail_on_data_loss
        self.say = say or printer()
        self.output = _local(output, "--output") / "minute"
        ckpt = _local(checkpoint, "--checkpoint")
        self.stream_dir, self.state_dir = ckpt / "stream", ckpt / "state"
        self.staging = ckpt / "staging"
        self.audit_writer = f"realtime-{audit.job_id(str(ckpt))}"
        self.publisher = Publisher(bootstrap, client)
        self.state: WindowState | None = None
        self.query: StreamingQuery | None = None
        self.finalizer = Finalizer(self)
        self.stopping = threading.Event()
        self.stats = BatchStats()

    def start(self) -> RealtimeJob:
        if self.audit_topic is not None:
            ensure_audit_topic(self.bootstrap, self.audit_topic, self.client)
        self._retire_file_sink_log()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        saved = self._load_state(None)
        self.finalizer.start()
        if saved.batch_id >= 0:  # minutes closed before a stop or crash
            self.finalizer.after(saved)
        rows = T.minute_rows(
            T.parse_access(
                source_stream(
                    self.spark,
                    self.bootstrap,
                    self.topic,
                    self.starting_offsets,
                    None,
                    self.fail_on_data_loss,
                    self.client,
                ),
                audit=self.audit_topic is not None,
            )
        )
        writer = (
            rows.writeStream.foreachBatch(self._batch)
            .option("checkpointLocation", str(self.stream_dir))
            .trigger(processingTime=f"{self.trigger_seconds} seconds")
            .queryName(QUERY_NAME)
        )
        self.query = writer.start()
        provisional = "provisional rows every batch, " if self.provisional else ""
        self.say(
            f"realtime: {self.topic} @ {self.bootstrap} -> {self.output} and topic "
            f"{self.stats_topic}: batches every {self.trigger_seconds:g}s, {provisional}"
            f"final rows once a minute is {self.watermark} old "
            f"(checkpoint {self.stream_dir.parent})"
        )
        return self

    def failure(self) -> str | None:
        if self.query is not None and self.query.exception() is not None:
            return str(self.query.exception())
        return self.finalizer.error

    def stop(self) -> None:
        self.stopping.set()
        self.finalizer.stop()
        if self.query is not None:
            self.query.stop()
        self.finalizer.join(60)
        self.publisher.close()

    def progress_line(self) -> str:
        """One line on the last PROGRESS_SECONDS (or since the previous line). It
        says "falling behind" when the median batch took longer than the trigger and
        records wait beyond the last batch (Spark's own warning for each slow batch,
        the JVM's first ones included, is kept for the log file)."""
        lag = _lag(self.query.lastProgress if self.query is not None else None)
        behind = "-" if lag is None else f"{lag:,}"
        closed_at = self.finalizer.last_closed
        closed = "none yet" if closed_at is None else _iso(closed_at)[11:16] + " UTC"
        summary, median_s = self.stats.summary()
        line = (
            f"realtime: {summary}, {behind} records behind the topic's end, "
            f"last window closed {closed}"
        )
        if median_s is not None and median_s > self.trigger_seconds and lag:
            line += (
                f"; falling behind: batches take longer than the {self.trigger_seconds:g}s "
                "trigger (give the job more cores or a longer --trigger-seconds)"
            )
        return line

    def _batch(self, batch, batch_id: int) -> None:
        """foreachBatch: one Spark job, then the windows, in the driver."""
        from py4j.protocol import Py4JJavaError

        started = time.monotonic()
        started_ms = int(time.time() * 1000)
        try:
            rows = batch.toArrow()
        except Py4JJavaError:
            if not self.stopping.is_set():
                raise
            # Fail the batch with a short message: it is not committed and runs again
            # at the next start. (Spark matches the error text against a regex that
            # overflows the JVM stack on the long Java trace a Py4JJavaError carries.)
            raise InterruptedError(f"batch {batch_id} {STOP_INTERRUPTED}") from None
        state = self._state_before(batch_id)
        step = state.step(batch_id, rows)
        if self.provisional and step.changed:
            self.publisher.send(
                self.stats_topic,
                [
                    window_doc(m, h, dict(zip(COUNTS, c, strict=True)), False)
                    for (m, h), c in step.changed.items()
                ],  # fmt: skip
            )
        if self.audit_topic is not None:
            self._audit(state, rows, started_ms)
        self._stage(batch_id, step.kept)
        self._save(state)
        self.finalizer.after(state)
        self.stats.add(rows.num_rows, step.unparsable, step.late, time.monotonic() - started)

    def _audit(self, state: WindowState, rows: pa.Table, started_ms: int) -> None:
        """Add the batch's records to the audit totals and publish the buckets it
        changed (a replayed batch starts from the same totals: same records), with a
        progress mark: the batch read the topic to its end of about `started_ms`
        (a batch replayed after a restart marks the time of the replay, a moment
        before the batches after it catch up)."""
        assert self.audit_topic is not None
        changed = state.audit.add(audit.grouped(rows, []))
        records = state.audit.records(SPARK_REALTIME, self.audit_writer, changed)
        for topic in self.topic.split(","):
            mark = Progress(SPARK_REALTIME, topic, self.audit_writer, started_ms)
            records.append((mark.key(), mark.value()))
        self.publisher.send(self.audit_topic, records)
        if state.max_time_ms is not None:
            state.audit.forget_before(state.max_time_ms - int(KEEP_S * 1000))

    def _state_before(self, batch_id: int) -> WindowState:
        """A copy of the state batch `batch_id` starts from (a failed batch must not
        leave its counts behind)."""
        if self.state is None or self.state.batch_id != batch_id - 1:
            self.state = self._load_state(batch_id)
        return copy.deepcopy(self.state)

    def _load_state(self, before: int | None) -> WindowState:
        """The newest saved state of a batch before `before` (None: any)."""
        ids = sorted(int(p.stem) for p in self.state_dir.glob("*.json"))
        ids = [i for i in ids if before is None or i < before]
        if not ids:
            return WindowState(self.lateness_ms)
        data = (self.state_dir / f"{ids[-1]}.json").read_bytes()
        return WindowState.from_json(data, self.lateness_ms)

    def _save(self, state: WindowState) -> None:
        atomic_write(self.state_dir / f"{state.batch_id}.json", state.to_json())
        for old in self.state_dir.glob("*.json"):
            if int(old.stem) < state.batch_id - 1:
                old.unlink(missing_ok=True)
        self.state = state

    def _stage(self, batch_id: int, kept: pa.Table) -> None:
        if kept.num_rows == 0:
            return
        kept = kept.select(list(T.MINUTE_ROW_COLUMNS))
        for minute in pc.unique(kept["minute"]).to_pylist():
            rows = kept.filter(pc.equal(kept["minute"], minute))
            path = self.staging / str(minute) / f"{batch_id}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, _parquet(rows))

    def finalize(self, minutes: list[int]) -> None:
        """Compute, write and publish the final rows of closed `minutes`, then
        forget their staged rows. Repeatable: the files are replaced whole."""
        for minute in minutes:
            staged = self.staging / str(minute)
            files = sorted(staged.glob("*.parquet"))
            rows = minute_figures(pa.concat_tables(map(pq.read_table, files))) if files else []
            if rows:
                self._write_final(minute, rows)
                self.publisher.send(
                    self.stats_topic,
                    [
                        window_doc(minute, r["host"], {k: r[k] for k in (*COUNTS, *FIGURES)}, True)
                        for r in rows
                    ],  # fmt: skip
                )
            shutil.rmtree(staged, ignore_errors=True)

    def _write_final(self, minute: int, rows: list[dict]) -> None:
        start = datetime.fromtimestamp(minute, UTC)
        columns = {
            "window_start": [start] * len(rows),
            "window_end": [datetime.fromtimestamp(minute + WINDOW_S, UTC)] * len(rows),
        }
        for name in FINAL_SCHEMA.names[2:]:
            columns[name] = [r[name] for r in rows]
        table = pa.table(columns, schema=FINAL_SCHEMA)
        path = self.output / f"date={start:%Y-%m-%d}" / f"part-{start:%Y%m%d-%H%M}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, _parquet(table), hidden_tmp=True)

    def _retire_file_sink_log(self) -> None:
        """Earlier versions wrote the finals with Spark's file sink, whose
        `_spark_metadata` log would make readers ignore every file not in it."""
        log = self.output / "_spark_metadata"
        if log.is_dir():
            log.rename(self.output / "_spark_metadata.retired")
            self.say(f"realtime: moved the old file sink log {log} aside")

    def committed(self, batch_id: int) -> bool:
        """Whether Spark has committed micro-batch `batch_id` (its commit log entry)."""
        return (self.stream_dir / "commits" / str(batch_id)).exists()


class Finalizer(threading.Thread):
    """Finalizes closed minutes in the background, once the batch whose state
    closed them is committed. Only the newest state
    matters: the watermark never goes back."""

    def __init__(self, job: RealtimeJob):
        super().__init__(name="logflume-realtime-finals", daemon=True)
        self.job = job
        self.cond = threading.Condition()
        self.pending: WindowState | None = None
        self.stopped = False
        self.error: str | None = None
        self.last_closed: int | None = None

    def after(self, state: WindowState) -> None:
        with self.cond:
            self.pending = state
            self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def run(self) -> None:
        try:
            while (state := self._next()) is not None:
                minutes = sorted(
                    int(d.name) for d in _subdirs(self.job.staging) if state.is_closed(int(d.name))
                )
                if minutes:
                    self.job.finalize(minutes)
                    self.last_closed = minutes[-1]
        except Exception as e:  # reported through RealtimeJob.failure()
            if not self.stopped:
                logging.getLogger(__name__).exception("finalizing windows failed")
                self.error = f"finalizing windows failed: {e}"

    def _next(self) -> WindowState | None:
        """The newest state whose batch Spark has committed; None once stopped."""
        with self.cond:
            while not self.stopped:
                state = self.pending
                if state is not None and self.job.committed(state.batch_id):
                    self.pending = None
                    return state
                self.cond.wait(0.05 if state is not None else None)
        return None


class BatchStats:
    """Figures of the batches since the last summary (batch thread adds, the
    printing thread reads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self._reset(time.monotonic())

    def _reset(self, now: float) -> None:
        self.since = now
        self.records = self.unparsable = self.late = 0
        self.durations: list[float] = []

    def add(self, records: int, unparsable: int, late: int, seconds: float) -> None:
        with self.lock:
            self.records += records
            self.unparsable += unparsable
            self.late += late
            self.durations.append(seconds)

    def summary(self) -> tuple[str, float | None]:
        """(text, median batch seconds or None), and a new period begins."""
        now = time.monotonic()
        with self.lock:
            rate = self.records / max(now - self.since, 1e-9)
            durations = self.durations
            text = f"{rate:,.0f} lines/s in ({self.unparsable} unparsable, {self.late} late), "
            self._reset(now)
        if not durations:
            return text + "no batches", None
        median = statistics.median(durations)
        return (
            text + f"{len(durations)} batches, median {median * 1000:.0f} ms, "
            f"max {max(durations) * 1000:.0f} ms",
            median,
        )


def _lag(progress) -> int | None:
    """Records between the last batch's end offsets and the topic's end."""
    if not progress or not progress.get("sources"):
        return None
    total = 0
    for source in progress["sources"]:
        end, latest = (_offsets(source.get(k)) for k in ("endOffset", "latestOffset"))
        if latest is None or end is None:
            return None
        total += sum(max(latest[tp] - end.get(tp, 0), 0) for tp in latest)
    return total


def _offsets(value) -> dict | None:
    """{(topic, partition): offset} of the data source's offset JSON (or None)."""
    if isinstance(value, str):
        value = json.loads(value)
    return offsets_from_json(value) if isinstance(value, dict) else None


def _subdirs(path: Path) -> list[Path]:
    return [d for d in path.iterdir() if d.is_dir()] if path.is_dir() else []


def _local(path: str, flag: str) -> Path:
    """`path` as a local directory (a file: URI is accepted)."""
    if path.startswith("file:"):
        path = re.sub(r"^file:(//)?", "", path)
    elif re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path):
        raise ValueError(f"{flag} {path}: the realtime job needs a local directory")
    return Path(path).absolute()


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def start_realtime(spark, **kwargs) -> RealtimeJob:
    """Start the job (see RealtimeJob for the arguments); stop it with `.stop()`."""
    return RealtimeJob(spark, **kwargs).start()


def run_realtime(spark, *, stop: threading.Event | None = None, **kwargs) -> None:
    """Run until `stop` is set (or forever / until the job fails), printing a
    progress line every PROGRESS_SECONDS."""
    job = start_realtime(spark, **kwargs)
    query = job.query
    assert query is not None  # started
    next_line = time.monotonic() + PROGRESS_SECONDS
    try:
        while not (stop is not None and stop.is_set()):
            # pyspark takes seconds as a float too; its annotation says int
            if query.awaitTermination(0.5) or job.failure():  # type: ignore[arg-type]
                raise RuntimeError(f"realtime job stopped: {job.failure()}")
            if time.monotonic() >= next_line:
                job.say(job.progress_line())
                next_line += PROGRESS_SECONDS
    finally:
        stopped = stop is not None and stop.is_set()
        if stopped:
            _quiet_interrupted_batches(spark)
        job.stop()
        if stopped:  # the last period's counts, so that the lines of a run add up
            job.say(job.progress_line())


def _quiet_interrupted_batches(spark) -> None:
    """Stopping the query interrupts its running micro-batch: Spark logs the
    aborted batch and py4j the interrupted foreachBatch callback, each with a stack
    trace. On a requested stop (Ctrl-C) those are expected and would bury the
    user's terminal, so both loggers are turned down first; the batch itself is not
    committed and runs again at the next start."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("FATAL")
