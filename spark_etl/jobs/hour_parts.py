"""Mergeable partial figures of an hour (pure: pyarrow tables in, tables out).

The offline job stores, next to each micro-batch's parsed rows of an hour, the
*partials* of those rows, and computes the hour's figures by merging the partials of
every batch that holds rows of the hour (`hour_figures`, `hour_top_paths`) instead of
re-reading every stored row. Each kind of partial is a small table, one file per
(hour, batch, task), and merging is a sum of counts:

- `counts`: per host, requests, status_2xx..status_5xx and bytes.
- `clients`: per host, each distinct client once (with how many requests it made).
- `times`: per host, each distinct request_time with its count (nginx writes
  `$request_time` in milliseconds, so an hour holds a few thousand distinct values).
- `paths`: per host, each distinct path (query string stripped) with its count.

So the figures are exact: `unique_clients` counts distinct clients; rt_p50/p95/p99
are nearest-rank percentiles (the smallest request_time with at least that share of
the host's timed requests at or below it), as the realtime job's final figures.
A partial's size grows with the distinct clients, request times and paths of its
batch and hour, not with its rows.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COUNTS = ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes")
PERCENTILES = (50, 95, 99)
TOP_PATHS = 20
HOUR_US = 3_600_000_000

# What partials need of a parsed row (its hour aside).
ROW_COLUMNS = ("host", "status", "bytes", "client", "request_time", "path")

_HOST = ("host", pa.string())
_N = ("n", pa.int64())
SCHEMAS = {
    "counts": pa.schema([_HOST, *((c, pa.int64()) for c in COUNTS)]),
    "clients": pa.schema([_HOST, ("client", pa.string()), _N]),
    "times": pa.schema([_HOST, ("request_time", pa.float64()), _N]),
    "paths": pa.schema([_HOST, ("path", pa.string()), _N]),
}
HOURLY_SCHEMA = pa.schema(
    [
        _HOST,
        ("hour_start", pa.timestamp("us", tz="UTC")),
        *((c, pa.int64()) for c in COUNTS),
        ("unique_clients", pa.int64()),
        *((f"rt_p{p}", pa.float64()) for p in PERCENTILES),
    ]
)
TOP_PATHS_SCHEMA = pa.schema(
    [_HOST, ("rank", pa.int32()), ("path", pa.string()), ("requests", pa.int64())]
)


def hour_keys(time: pa.Array) -> np.ndarray:
    """Hours since the epoch (UTC) of timestamps in microseconds (a null gives 0:
    callers keep only rows with a time)."""
    us = pc.fill_null(pc.cast(time, pa.int64()), 0)
    return np.floor_divide(us.to_numpy(zero_copy_only=False), HOUR_US)


def hour_name(key: int) -> tuple[str, int]:
    """(yyyy-MM-dd, hour) of an hour key."""
    t = datetime.fromtimestamp(key * 3600, UTC)
    return t.strftime("%Y-%m-%d"), t.hour


def partials(rows: pa.Table) -> dict[str, pa.Table]:
    """The partials (SCHEMAS) of parsed rows (ROW_COLUMNS) of one hour."""
    cls = pc.divide(rows["status"], 100)
    counts = pa.table(
        {
            "host": rows["host"],
            "requests": pa.array(np.ones(rows.num_rows, np.int64)),
            **{f"status_{c}xx": pc.cast(pc.equal(cls, c), pa.int64()) for c in (2, 3, 4, 5)},
            "bytes": pc.cast(rows["bytes"], pa.int64()),
        }
    )
    # The query string is stripped from each distinct path, not from each row.
    paths = _tally(rows, "path")
    paths = _sums(paths.set_column(1, "path", _strip_query(paths["path"])), ["host", "path"])
    return {
        "counts": _sums(counts, ["host"]),
        "clients": _tally(rows, "client"),
        "times": _tally(rows, "request_time"),
        "paths": paths,
    }


def _strip_query(path: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.replace_substring_regex(path, r"\?.*$", "")


def _tally(rows: pa.Table, column: str) -> pa.Table:
    """(host, value, n) for the non-null values of `column`."""
    kept = rows.select(["host", column]).filter(pc.is_valid(rows[column]))
    counted = kept.group_by(["host", column], use_threads=False).aggregate([([], "count_all")])
    return _shaped(counted.rename_columns(["host", column, "n"]), column)


def _shaped(table: pa.Table, kind: str) -> pa.Table:
    schema = SCHEMAS[{"client": "clients", "request_time": "times", "path": "paths"}[kind]]
    return table.select(schema.names).cast(schema)


def _sums(table: pa.Table, keys: list[str]) -> pa.Table:
    """`table` grouped by `keys`, every other column summed (same names and order)."""
    values = [c for c in table.column_names if c not in keys]
    summed = table.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in values])
    names = [n if n in keys else n.removesuffix("_sum") for n in summed.column_names]
    return summed.rename_columns(names).select([*keys, *values])


def merge(parts: list[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """Partials of several batches (or tasks) of one hour as one set of partials."""
    out = {}
    for kind, schema in SCHEMAS.items():
        tables = [p[kind] for p in parts if kind in p]
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        keys = [n for n in schema.names if n not in (*COUNTS, "n")]
        out[kind] = _sums(table, keys).cast(schema) if table.num_rows else schema.empty_table()
    return out


def _by_host(table: pa.Table) -> dict[str | None, pa.Table]:
    hosts = table["host"].unique().to_pylist()
    return {
        h: table.filter(pc.is_null(table["host"]) if h is None else pc.equal(table["host"], h))
        for h in hosts
    }


def hour_figures(merged: dict[str, pa.Table], date: str, hour: int) -> pa.Table:
    """The hourly table's rows (HOURLY_SCHEMA) of one hour, one per host, sorted by host."""
    counts = merged["counts"].to_pylist()
    clients = _by_host(merged["clients"])
    times = _by_host(merged["times"])
    start = datetime.strptime(date, "%Y-%m-%d").replace(hour=hour, tzinfo=UTC)
    rows = []
    for c in sorted(counts, key=lambda r: (r["host"] is not None, r["host"] or "")):
        host = c["host"]
        row = {**c, "hour_start": start}
        row["unique_clients"] = clients[host].num_rows if host in clients else 0
        row.update(nearest_rank(times.get(host)))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=HOURLY_SCHEMA)


def nearest_rank(times: pa.Table | None) -> dict[str, float | None]:
    """rt_p50/95/99 of a (request_time, n) tally: the smallest value with at least p %
    of the counted values at or below it; None when nothing was timed."""
    if times is None or times.num_rows == 0:
        return {f"rt_p{p}": None for p in PERCENTILES}
    order = pc.sort_indices(times["request_time"])
    values = times["request_time"].take(order).to_numpy()
    cumulative = np.cumsum(times["n"].take(order).to_numpy())
    total = int(cumulative[-1])
    out: dict[str, float | None] = {}
    for p in PERCENTILES:
        rank = max(1, math.ceil(p * total / 100))
        out[f"rt_p{p}"] = float(values[np.searchsorted(cumulative, rank)])
    return out


def hour_top_paths(merged: dict[str, pa.Table], n: int = TOP_PATHS) -> pa.Table:
    """The `n` most requested paths per host (TOP_PATHS_SCHEMA; rank 1 is the busiest,
    ties broken by path), sorted by host and rank."""
    rows = []
    paths = _by_host(merged["paths"])
    for host in sorted(paths, key=lambda h: (h is not None, h or "")):
        mine = paths[host].sort_by([("n", "descending"), ("path", "ascending")]).slice(0, n)
        for rank, (path, count) in enumerate(
            zip(mine["path"].to_pylist(), mine["n"].to_pylist(), strict=True), 1
        ):
            rows.append({"host": host, "rank": rank, "path": path, "requests": count})
    return pa.Table.from_pylist(rows, schema=TOP_PATHS_SCHEMA)
