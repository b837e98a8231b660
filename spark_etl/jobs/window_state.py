"""The realtime job's explicit minute-window state (pure: pyarrow in, values out).

Each micro-batch brings a table of `transforms.minute_rows` (parse_ok, minute,
time_ms, host, status, bytes, client, request_time). `WindowState.step` decides
which rows count and what changes:

- The watermark is the latest event time seen in earlier batches minus the allowed
  lateness (as Spark's `withWatermark`). A window (one minute, one host) is *open*
  while its end is after the watermark and *closed* once the watermark reaches its
  end; a closed window never changes again, so its final row can be written.
- A parsed row whose window is open is kept: added to the window's running counts
  (the provisional row) and staged for the final figures. A row whose window has
  closed is *late* and dropped (counted). Spark drops any row older than the
  watermark; keeping every row of a still-open window is the same promise, kept
  for more rows.
- Unparsable rows are counted, never staged.

The state is small (the counts of the open windows, the latest event time, the
batch it follows, the audit's totals of the last hours) and goes to JSON after every batch, so a restarted job resumes
the running counts exactly where the committed batches left them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from spark_etl.audit import Totals

WINDOW_S = 60
COUNTS = ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes")
Key = tuple[int, str | None]  # (window start in epoch seconds, host)


@dataclasses.dataclass
class Step:
    """What one batch did: `kept` rows to stage (open windows only), `changed`
    windows with their running counts, windows `closed` by this batch's events."""

    kept: pa.Table
    changed: dict[Key, list[int]]
    closed: list[Key]
    unparsable: int
    late: int


@dataclasses.dataclass
class WindowState:
    """`batch_id`: the last micro-batch folded in (-1: none). `max_time_ms`: the
    latest event time seen. `open`: running counts (COUNTS order) per open window."""

    lateness_ms: int
    batch_id: int = -1
    max_time_ms: int | None = None
    open: dict[Key, list[int]] = dataclasses.field(default_factory=dict)
    # the job's audit totals (spark_etl/audit.py), saved with the windows after each batch
    audit: Totals = dataclasses.field(default_factory=Totals)

    @property
    def watermark_ms(self) -> int | None:
        return None if self.max_time_ms is None else self.max_time_ms - self.lateness_ms

    def is_closed(self, minute: int) -> bool:
        """Whether the window starting at `minute` (epoch seconds) has closed."""
        wm = self.watermark_ms
        return wm is not None and (minute + WINDOW_S) * 1000 <= wm

    def step(self, batch_id: int, rows: pa.Table) -> Step:
        """Fold micro-batch `batch_id` in (the state changes in place)."""
        parsed = rows.filter(rows["parse_ok"])
        unparsable = rows.num_rows - parsed.num_rows
        kept = parsed
        wm = self.watermark_ms
        if wm is not None:
            window_end_ms = pc.multiply(pc.add(parsed["minute"], WINDOW_S), 1000)
            kept = parsed.filter(pc.greater(window_end_ms, wm))
        changed = {}
        for key, counts in _window_counts(kept).items():
            total = self.open.setdefault(key, [0] * len(COUNTS))
            total[:] = [a + b for a, b in zip(total, counts, strict=True)]
            changed[key] = list(total)
        latest = pc.max(parsed["time_ms"]).as_py() if parsed.num_rows else None
        if latest is not None and (self.max_time_ms is None or latest > self.max_time_ms):
            self.max_time_ms = latest
        closed = sorted(key for key in self.open if self.is_closed(key[0]))
        for key in closed:
            del self.open[key]
        self.batch_id = batch_id
        return Step(kept, changed, closed, unparsable, parsed.num_rows - kept.num_rows)

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "batch_id": self.batch_id,
                "max_time_ms": self.max_time_ms,
                "open": [[m, h, *c] for (m, h), c in sorted(self.open.items(), key=_order)],
                "audit": self.audit.to_json(),
            }
        )

    @classmethod
    def from_json(cls, data: bytes, lateness_ms: int) -> WindowState:
        """The saved state, with today's `lateness_ms` (a changed --watermark applies
        from the next batch on)."""
        doc = orjson.loads(data)
        windows = {(m, h): list(c) for m, h, *c in doc["open"]}
        audit = Totals.from_json(doc["audit"]) if "audit" in doc else Totals()
        return cls(lateness_ms, doc["batch_id"], doc["max_time_ms"], windows, audit)


def _order(item) -> tuple:
    (minute, host), _ = item
    return (minute, host or "")


def _window_counts(rows: pa.Table) -> dict[Key, list[int]]:
    """COUNTS per (minute, host) of parsed rows."""
    if rows.num_rows == 0:
        return {}
    cls = pc.divide(rows["status"], 100)
    table = pa.table(
        {
            "minute": rows["minute"],
            "host": rows["host"],
            "bytes": pc.cast(rows["bytes"], pa.int64()),
            **{f"s{c}": pc.cast(pc.equal(cls, c), pa.int64()) for c in (2, 3, 4, 5)},
        }
    )
    aggregated = (
        table.group_by(["minute", "host"], use_threads=False)
        .aggregate(
            [
                ("minute", "count"),
                ("s2", "sum"),
                ("s3", "sum"),
                ("s4", "sum"),
                ("s5", "sum"),
                ("bytes", "sum"),
            ]  # fmt: skip
        )
        .to_pydict()
    )
    names = ("minute_count", "s2_sum", "s3_sum", "s4_sum", "s5_sum", "bytes_sum")
    return {
        (m, h): [aggregated[n][i] for n in names]
        for i, (m, h) in enumerate(zip(aggregated["minute"], aggregated["host"], strict=True))
    }


def minute_figures(rows: pa.Table) -> list[dict]:
    """The final figures of one minute's staged rows (parsed rows of open windows:
    host, status, bytes, client, request_time), one dict per host, sorted by host:
    COUNTS, unique_clients (exact) and rt_p50/rt_p95/rt_p99 (nearest rank: the
    smallest request_time with at least that share of the host's timed requests at
    or below it; None when none was timed)."""
    out = []
    for host in sorted(rows["host"].unique().to_pylist(), key=lambda h: (h is not None, h)):
        mine = rows.filter(
            pc.is_null(rows["host"]) if host is None else pc.equal(rows["host"], host)
        )
        (counts,) = _window_counts(mine).values()  # one minute, one host
        figures: dict[str, object] = dict(zip(COUNTS, counts, strict=True))
        figures["host"] = host
        figures["unique_clients"] = pc.count_distinct(mine["client"]).as_py()
        times = np.sort(mine["request_time"].drop_null().to_numpy())
        for p in (50, 95, 99):
            rank = max(1, math.ceil(p * len(times) / 100))
            figures[f"rt_p{p}"] = float(times[rank - 1]) if len(times) else None
        out.append(figures)
    return out
