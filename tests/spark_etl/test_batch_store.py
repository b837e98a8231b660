"""Pure parts of the offline job's per-task store (`batch_store`)."""

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_etl.jobs import batch_store as B


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 70_000), max_size=8))
def test_rebatched_keeps_every_row_in_order_in_batches_of_about_parse_batch(sizes):
    batches, start = [], 0
    for n in sizes:
        batches.append(
            pa.record_batch([pa.array(range(start, start + n), pa.int64())], names=["x"])
        )
        start += n
    out = list(B._rebatched(iter(batches)))
    assert [v for b in out for v in b.column(0).to_pylist()] == list(range(start))
    assert all(b.num_rows >= B.PARSE_BATCH for b in out[:-1])
    assert all(b.num_rows for b in out)


def test_file_names_depend_only_on_batch_hour_and_task():
    key = 473_832  # 2024-01-21 00:00 UTC
    assert B.parsed_file("/o", 3, key, 1) == (
        "/o/parsed/date=2024-01-21/hour=0/batch=3/part-00001.parquet"
    )
    assert B.partial_file("/o", "paths", 3, key, 1) == (
        "/o/partials/paths/date=2024-01-21/hour=0/batch=3/part-00001.parquet"
    )
    assert B.reject_file("/o", 3, 2) == "/o/rejects/batch=3/part-00002.parquet"


def test_summary_merges_the_task_batches():
    def part(ok, key, n, lo, hi, host="web-1", hashes=(1, 2)):
        return pa.table(
            {
                "topic": ["t"], "partition": pa.array([0], pa.int32()), "parse_ok": [ok],
                "hour_key": pa.array([key], pa.int64()), "record_host": [host],
                "record_minute": pa.array([60_000], pa.int64()),
                "count_all": pa.array([n], pa.int64()),
                "offset_min": pa.array([lo], pa.int64()), "offset_max": pa.array([hi], pa.int64()),
                "hash_hi_sum": pa.array([hashes[0]], pa.int64()),
                "hash_lo_sum": pa.array([hashes[1]], pa.int64()),
            }
        )  # fmt: skip

    got = B._summary(
        4,
        [
            part(True, 7, 10, 0, 9),
            part(True, 7, 5, 10, 14, hashes=(3, 4)),
            part(True, 7, 2, 15, 16, host="web-2"),
            part(False, None, 1, 3, 3),
        ],
    )
    assert got.schema == B.SUMMARY_SCHEMA
    rows = sorted(got.to_pylist(), key=lambda r: (r["parse_ok"], r["record_host"]))
    assert [
        (r["task"], r["parse_ok"], r["hour_key"], r["record_host"], r["n"], r["lo"], r["hi"])
        for r in rows
    ] == [
        (4, False, None, "web-1", 1, 3, 3),
        (4, True, 7, "web-1", 15, 0, 14),
        (4, True, 7, "web-2", 2, 15, 16),
    ]
    assert (rows[1]["hash_hi"], rows[1]["hash_lo"]) == (4, 6)
    assert B._summary(0, []).num_rows == 0


def test_an_output_pyarrow_cannot_write_is_named_with_the_way_out():
    try:
        B.filesystem("nosuch://bucket/out")
    except ValueError as e:
        assert str(e).startswith("--output nosuch://bucket/out: not a file system")
        assert "hdfs://, s3:// or gs://" in str(e)
    else:
        raise AssertionError("accepted an unknown file system")
