"""Partial figures of an hour (`hour_parts`): pure, against plain Python."""

import math
from collections import Counter
from datetime import UTC, datetime

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_etl.jobs import hour_parts as H

ROW = st.fixed_dictionaries(
    {
        "host": st.sampled_from([None, "web1", "web2"]),
        "status": st.integers(100, 599),
        "bytes": st.integers(0, 10_000),
        "client": st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e"])),
        "request_time": st.one_of(st.none(), st.sampled_from([0.001, 0.01, 0.2, 0.25, 1.5, 3.0])),
        "path": st.one_of(st.none(), st.sampled_from(["/", "/a", "/a?x=1", "/b?", "/c?d?e"])),
    }
)
SCHEMA = pa.schema(
    [
        ("host", pa.string()),
        ("status", pa.int32()),
        ("bytes", pa.int64()),
        ("client", pa.string()),
        ("request_time", pa.float64()),
        ("path", pa.string()),
    ]
)


def table(rows):
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def truth(rows):
    """{host: figures} and {host: [(path, n)] top 20} computed row by row."""
    figures, paths = {}, {}
    for host in {r["host"] for r in rows}:
        mine = [r for r in rows if r["host"] == host]
        classes = Counter(r["status"] // 100 for r in mine)
        times = sorted(r["request_time"] for r in mine if r["request_time"] is not None)
        f = {
            "requests": len(mine),
            **{f"status_{c}xx": classes.get(c, 0) for c in (2, 3, 4, 5)},
            "bytes": sum(r["bytes"] for r in mine),
            "unique_clients": len({r["client"] for r in mine} - {None}),
        }
        for p in (50, 95, 99):
            rank = max(1, math.ceil(p * len(times) / 100))
            f[f"rt_p{p}"] = times[rank - 1] if times else None
        figures[host] = f
        counted = Counter(r["path"].split("?")[0] for r in mine if r["path"] is not None)
        top = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
        if top:
            paths[host] = top
    return figures, paths


def figures_of(merged):
    got = {}
    for row in H.hour_figures(merged, "2024-05-01", 10).to_pylist():
        assert row.pop("hour_start") == datetime(2024, 5, 1, 10, tzinfo=UTC)
        got[row.pop("host")] = row
    return got


def top_of(merged):
    got = {}
    for row in H.hour_top_paths(merged).to_pylist():
        got.setdefault(row["host"], []).append((row["rank"], row["path"], row["requests"]))
    return {h: [(p, n) for _, p, n in sorted(v)] for h, v in got.items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=60), st.lists(st.integers(0, 60), max_size=4))
def test_merged_partials_of_any_split_give_the_exact_figures(rows, cuts):
    bounds = sorted({0, len(rows), *(min(c, len(rows)) for c in cuts)})
    pieces = [rows[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    merged = H.merge([H.partials(table(p)) for p in pieces])
    want_figures, want_paths = truth(rows)
    assert figures_of(merged) == want_figures
    assert top_of(merged) == want_paths


def test_partials_hold_one_row_per_distinct_value_not_per_record():
    rows = [
        {"host": "w", "status": 200, "bytes": 1, "client": "a", "request_time": 0.5, "path": "/x"}
    ] * 1000
    parts = H.partials(table(rows))
    assert {k: t.num_rows for k, t in parts.items()} == {
        "counts": 1,
        "clients": 1,
        "times": 1,
        "paths": 1,
    }
    assert parts["times"].to_pylist() == [{"host": "w", "request_time": 0.5, "n": 1000}]


def test_top_paths_keep_twenty_per_host_ties_broken_by_path():
    rows = [
        {"host": "w", "status": 200, "bytes": 0, "client": None, "request_time": None,
         "path": f"/p{i:02d}"}
        for i in range(25)
        for _ in range(1 + (i % 3))
    ]  # fmt: skip
    top = H.hour_top_paths(H.merge([H.partials(table(rows))])).to_pylist()
    assert [r["rank"] for r in top] == list(range(1, 21))
    assert [r["path"] for r in top[:3]] == ["/p02", "/p05", "/p08"]


def test_an_hour_without_partials_has_no_rows():
    merged = H.merge([])
    assert H.hour_figures(merged, "2024-05-01", 3).num_rows == 0
    assert H.hour_top_paths(merged).num_rows == 0


def test_hour_keys_and_names():
    t = pa.array([datetime(2024, 5, 1, 10, 59, 59, tzinfo=UTC), None], pa.timestamp("us", "UTC"))
    keys = H.hour_keys(t)
    assert H.hour_name(int(keys[0])) == ("2024-05-01", 10)
    assert H.hour_name(
        int(H.hour_keys(pa.array([datetime(1969, 12, 31, 23, 30)], pa.timestamp("us")))[0])
    ) == ("1969-12-31", 23)
