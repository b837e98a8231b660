"""WindowState: the realtime job's window bookkeeping (pure pyarrow, no Spark)."""

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from spark_etl.jobs.window_state import COUNTS, WindowState, minute_figures

M = 1_714_564_800  # a minute start, epoch seconds
SCHEMA = pa.schema(
    [
        ("parse_ok", pa.bool_()),
        ("minute", pa.int64()),
        ("time_ms", pa.int64()),
        ("host", pa.string()),
        ("status", pa.int32()),
        ("bytes", pa.int64()),
        ("client", pa.string()),
        ("request_time", pa.float64()),
    ]  # fmt: skip
)


def rows(*specs) -> pa.Table:
    """(second offset from M, host, status, bytes) per parsed row; None = unparsable."""
    out = []
    for spec in specs:
        if spec is None:
            out.append(dict.fromkeys(SCHEMA.names) | {"parse_ok": False})
            continue
        second, host, status, size = spec
        t = M + second
        out.append({"parse_ok": True, "minute": t // 60 * 60, "time_ms": t * 1000,
                    "host": host, "status": status, "bytes": size, "client": "10.0.0.1",
                    "request_time": 0.1})  # fmt: skip
    return pa.Table.from_pylist(out, schema=SCHEMA)


def test_rows_count_into_their_minute_and_host():
    state = WindowState(lateness_ms=10_000)
    step = state.step(0, rows((1, "a", 200, 10), (2, "a", 404, 5), (3, None, 503, 0), None))
    assert step.unparsable == 1 and step.late == 0 and step.kept.num_rows == 3
    assert step.changed == {(M, "a"): [2, 1, 0, 1, 0, 15], (M, None): [1, 0, 0, 0, 1, 0]}
    step = state.step(1, rows((4, "a", 301, 1)))
    assert step.changed == {(M, "a"): [3, 1, 1, 1, 0, 16]}  # running counts
    assert state.batch_id == 1 and state.max_time_ms == (M + 4) * 1000


def test_a_window_closes_when_the_watermark_reaches_its_end_and_later_rows_are_late():
    state = WindowState(lateness_ms=10_000)
    state.step(0, rows((5, "a", 200, 1)))
    step = state.step(1, rows((69, "a", 200, 1)))  # watermark M+59 s: minute M still open
    assert step.closed == [] and (M, "a") in state.open
    step = state.step(2, rows((30, "a", 200, 1), (70, "a", 200, 1)))  # row of M still counts
    assert step.late == 0 and step.changed[(M, "a")][0] == 2
    assert step.closed == [(M, "a")] and (M, "a") not in state.open  # watermark M+60 s
    step = state.step(3, rows((59, "a", 200, 1), (71, "a", 200, 1)))
    assert step.late == 1 and step.kept.num_rows == 1 and list(step.changed) == [(M + 60, "a")]
    assert state.is_closed(M) and not state.is_closed(M + 60)


def test_state_survives_json_with_a_null_host():
    state = WindowState(lateness_ms=60_000)
    state.step(7, rows((1, None, 200, 3), (2, "b", 500, 4)))
    again = WindowState.from_json(state.to_json(), 60_000)
    assert again == state
    assert WindowState.from_json(state.to_json(), 5_000).lateness_ms == 5_000


@given(
    st.lists(
        st.tuples(
            st.integers(0, 300),
            st.sampled_from(["a", "b", None]),
            st.sampled_from([200, 301, 404, 500]),
            st.integers(0, 10_000),
        ),  # fmt: skip
        min_size=1,
        max_size=60,
    ),
    st.lists(st.integers(1, 10), min_size=1, max_size=10),
)
def test_how_rows_are_cut_into_batches_does_not_change_the_counts(specs, cuts):
    """With lateness longer than the data, nothing is late: any cut of the same rows
    into batches ends with the counts of a single batch."""
    whole = WindowState(lateness_ms=10**9)
    expected = whole.step(0, rows(*specs)).changed
    state, start, batch = WindowState(lateness_ms=10**9), 0, 0
    for n in cuts * len(specs):
        if start >= len(specs):
            break
        state.step(batch, rows(*specs[start : start + n]))
        start, batch = start + n, batch + 1
    if start < len(specs):
        state.step(batch, rows(*specs[start:]))
    assert state.open == expected
    assert all(len(c) == len(COUNTS) for c in state.open.values())


def test_minute_figures_are_exact_per_host_with_nearest_rank_percentiles():
    staged = pa.Table.from_pylist(
        [{"minute": M, "host": "b", "status": 200 + i % 2 * 300, "bytes": i,
          "client": f"10.0.0.{i % 7}", "request_time": float(i)} for i in range(1, 101)]
        + [{"minute": M, "host": None, "status": 404, "bytes": 1, "client": "c",
            "request_time": None}],
        schema=pa.schema([f for f in SCHEMA if f.name in
                          ("minute", "host", "status", "bytes", "client", "request_time")]),
    )  # fmt: skip
    nobody, b = minute_figures(staged)
    assert nobody == {"requests": 1, "status_2xx": 0, "status_3xx": 0, "status_4xx": 1,
                      "status_5xx": 0, "bytes": 1, "host": None, "unique_clients": 1,
                      "rt_p50": None, "rt_p95": None, "rt_p99": None}  # fmt: skip
    assert (b["requests"], b["status_2xx"], b["status_5xx"], b["bytes"]) == (100, 50, 50, 5050)
    assert b["unique_clients"] == 7
    assert (b["rt_p50"], b["rt_p95"], b["rt_p99"]) == (50.0, 95.0, 99.0)
