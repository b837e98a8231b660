"""The Spark jobs' audit columns and totals (spark_etl/audit.py), in pyarrow alone:
the same buckets and checksums as the agent's (common/audit.py)."""

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from common.audit import MINUTE_MS, SPARK_OFFLINE, AuditRecord, Bucket, Tally, checksum, minute_of
from spark_etl import access_log
from spark_etl.audit import Totals, audit_columns, grouped, parse_and_audit
from spark_etl.source.batches import VALUE_HASH
from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA
from tests.spark_etl.librdkafka_arrow import value_hashes

M = 1_764_345_600_000
LINE = b'1.2.3.4 - - [28/Nov/2025:16:00:01 +0000] "GET / HTTP/1.1" 200 5 "-" "c"'


def source_batch(rows) -> pa.RecordBatch:
    """Records as the source reads them: (value, host header or None, timestamp ms)."""
    return pa.RecordBatch.from_pylist(
        [
            {
                "key": None,
                "value": value,
                "topic": "t",
                "partition": 0,
                "offset": i,
                "timestamp": dt.datetime.fromtimestamp(ts / 1000, dt.UTC),
                "timestampType": 0,
                "headers": [] if host is None else [{"key": "host", "value": host.encode()}],
            }
            for i, (value, host, ts) in enumerate(rows)
        ],
        schema=RECORDS_ARROW_SCHEMA,
    )


rows_strategy = st.lists(
    st.tuples(
        st.one_of(st.binary(max_size=12), st.just(LINE)),
        st.sampled_from([None, "web-1", "web-2"]),
        st.integers(M, M + 3 * MINUTE_MS),
    ),
    max_size=40,
)


@settings(max_examples=50, deadline=None)
@given(rows_strategy)
def test_totals_equal_the_agents_buckets(rows):
    batch = source_batch(rows)
    parsed = next(parse_and_audit(iter([batch])))
    totals = Totals()
    totals.add(grouped(pa.Table.from_batches([parsed]), []))
    expected: dict[Bucket, list[bytes]] = {}
    for value, host, ts in rows:
        expected.setdefault(Bucket(host or "", "t", minute_of(ts)), []).append(value)
    got = {}
    for key, value in totals.records(SPARK_OFFLINE, "job"):
        rec = AuditRecord.parse(key, value)
        got[rec.bucket] = rec.tally
        assert rec.extra["parsed"] + rec.extra["rejected"] == rec.tally.count
    assert got == {b: Tally(len(v), checksum(v)) for b, v in expected.items()}


def test_the_parse_is_unchanged_and_counted():
    batch = source_batch([(LINE, "web-1", M), (b"junk", "web-1", M + 1)])
    parsed = next(parse_and_audit(iter([batch])))
    plain = access_log.parse_batch(batch)
    assert parsed.select(plain.schema.names).equals(plain)
    assert audit_columns(batch)["record_host"].to_pylist() == ["web-1", "web-1"]
    totals = Totals()
    (bucket,) = totals.add(grouped(pa.Table.from_batches([parsed]), []))
    ((key, value),) = totals.records(SPARK_OFFLINE, "job")
    rec = AuditRecord.parse(key, value)
    assert rec.extra == {"parsed": 1, "rejected": 1}
    assert key.endswith(b"/job.0")


def test_totals_survive_the_state_file_and_old_buckets_open_a_new_generation():
    totals = Totals()
    for minute in (M, M + MINUTE_MS):
        totals.buckets[Bucket("h", "t", minute)] = [1, 2, 3, 1, 0]
    again = Totals.from_json(totals.to_json())
    assert again.buckets == totals.buckets and again.generation == 0
    again.forget_before(M + MINUTE_MS)
    assert list(again.buckets) == [Bucket("h", "t", M + MINUTE_MS)] and again.generation == 1
    again.forget_before(M)  # nothing to forget: the same generation
    assert again.generation == 1


@settings(max_examples=30, deadline=None)
@given(rows_strategy)
def test_a_value_hash_column_made_while_reading_gives_the_same_columns(rows):
    batch = source_batch(rows)
    values = batch.column("value").to_pylist()
    hashed = batch.append_column(VALUE_HASH, value_hashes(values, None in values))
    got, want = audit_columns(hashed), audit_columns(batch)
    assert got.keys() == want.keys()
    assert all(got[k].equals(want[k]) for k in want)
