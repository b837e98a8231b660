"""The offline job end to end: broker subprocess -> AvailableNow runs -> Parquet tables."""

from datetime import UTC, datetime

import orjson
import pytest

from common.audit import SPARK_OFFLINE
from spark_etl import loggen
from spark_etl.jobs.offline import run_offline
from testkit.kafka import create_topic, produce
from testkit.procs import BrokerProcess
from tests.spark_etl import expected

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("offline") / "broker").start()
    yield b
    b.stop()


def send(bk, topic: str, items, first_index: int = 0) -> list:
    """Produce items over 2 partitions, mixing raw lines and agent JSON records.
    Returns [(item, sent_as_json)]."""
    sent, per_part = [], {0: [], 1: []}
    for i, item in enumerate(items, first_index):
        as_json = i % 3 == 0 and isinstance(item, loggen.Access)
        value = orjson.dumps(item.record()) if as_json else item.line().encode()
        per_part[(i // 7) % 2].append(value)
        sent.append((item, as_json))
    for p, values in per_part.items():
        produce(bk.bootstrap, topic, values, partition=p)
    return sent


def items(start_h: int, end_h: int, count: int, seed: int):
    start = T0.replace(hour=start_h)
    end = T0.replace(hour=end_h)
    return list(
        loggen.generate(start, end, count, seed=seed, hosts=("web1", "web2"), bad_ratio=0.02)
    )


def tables(spark, out):
    hourly = spark.read.parquet(f"{out}/hourly").collect()
    top = spark.read.parquet(f"{out}/top_paths").collect()
    return hourly, top


def assert_top_paths(rows, sent):
    want = expected.top_paths(sent)
    got = {}
    for r in sorted(rows, key=lambda r: r.rank):
        got.setdefault((str(r.date), r.hour, r.host), []).append((r.path, r.requests))
    assert got == want


def test_hourly_figures_match_python_and_a_second_run_takes_only_new_data(spark, bk, tmp_path):
    create_topic(bk.bootstrap, "access", 2)
    first = items(10, 13, 3000, seed=11)
    sent = send(bk, "access", first)
    out, ckpt, log = str(tmp_path / "out"), str(tmp_path / "ckpt"), []
    report = run_offline(
        spark, bootstrap=bk.bootstrap, topic="access", output=out, checkpoint=ckpt,
        max_offsets_per_trigger=1500, say=log.append,
    )  # fmt: skip
    garbage = sum(isinstance(i, loggen.Garbage) for i in first)
    assert garbage > 20
    assert (report.rows, report.rejected, report.batches) == (3000, garbage, 2)
    assert spark.read.parquet(f"{out}/rejects").count() == garbage
    assert any("unparsable" in line and "hours written" in line for line in log)
    hourly, top = tables(spark, out)
    expected.assert_hourly_matches(hourly, expected.hourly(sent))
    assert_top_paths(top, sent)

    # New data, part of it late for an hour the first run already wrote (12:00).
    second = items(12, 14, 800, seed=12)
    sent += send(bk, "access", second, first_index=len(first))
    report = run_offline(
        spark, bootstrap=bk.bootstrap, topic="access", output=out, checkpoint=ckpt,
        max_offsets_per_trigger=1000, say=log.append,
    )  # fmt: skip
    assert report.rows == 800
    assert {h for _, h in report.hours} == {12, 13}
    hourly, top = tables(spark, out)
    expected.assert_hourly_matches(hourly, expected.hourly(sent))
    assert_top_paths(top, sent)
    # A run with nothing new does nothing.
    assert run_offline(
        spark, bootstrap=bk.bootstrap, topic="access", output=out, checkpoint=ckpt,
        say=log.append,
    ).rows == 0  # fmt: skip


def test_a_batch_crashing_half_way_is_redone_exactly_once(spark, bk, tmp_path):
    create_topic(bk.bootstrap, "crashy", 2)
    sent = send(bk, "crashy", items(10, 12, 1500, seed=21))
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def crash(batch_id):
        if batch_id == 0:
            raise RuntimeError("injected crash after storing batch 0")

    opts = dict(bootstrap=bk.bootstrap, topic="crashy", output=out, checkpoint=ckpt)
    with pytest.raises(Exception, match="injected crash"):
        run_offline(
            spark, max_offsets_per_trigger=500, say=lambda _: None, after_store=crash, **opts
        )
    # Batch 0's rows were stored, its aggregates not, and it was never committed.
    report = run_offline(spark, max_offsets_per_trigger=1000, say=lambda _: None, **opts)
    # Batch 0 is re-run from the checkpoint's offset log with its own range (500
    # records), then the remaining 1000 come as one batch under the new limit.
    assert report.rows == 1500 and report.batches == 2
    hourly, _ = tables(spark, out)
    expected.assert_hourly_matches(hourly, expected.hourly(sent))
    accepted = sum(isinstance(i, loggen.Access) for i, _ in sent)
    stored = spark.read.parquet(f"{out}/parsed").select("partition", "offset", "time")
    assert stored.distinct().count() == stored.count() == accepted
    assert stored.where("offset is null or time is null").count() == 0
    # what the job read, per minute, counted once across the crash and the re-run
    assert expected.assert_audit_equals_recount(bk.bootstrap, "crashy", SPARK_OFFLINE) == 1500


def test_refuses_a_fresh_checkpoint_over_existing_output(spark, bk, tmp_path):
    # Stored rows from an earlier run (with another checkpoint) are enough to refuse.
    parsed = tmp_path / "out" / "parsed" / "date=2024-05-01" / "hour=10" / "batch=0"
    parsed.mkdir(parents=True)
    (parsed / "part-0.parquet").write_bytes(b"")
    opts = dict(bootstrap=bk.bootstrap, topic="fresh", output=str(tmp_path / "out"))
    with pytest.raises(RuntimeError, match="checkpoint .* is new"):
        run_offline(spark, checkpoint=str(tmp_path / "c2"), say=lambda _: None, **opts)


def test_refuses_output_written_without_partials(spark, bk, tmp_path):
    parsed = tmp_path / "out" / "parsed" / "date=2024-05-01" / "hour=10" / "batch=0"
    parsed.mkdir(parents=True)
    (parsed / "part-0.parquet").write_bytes(b"")
    (tmp_path / "ckpt" / "offsets").mkdir(parents=True)
    opts = dict(bootstrap=bk.bootstrap, topic="old", output=str(tmp_path / "out"))
    with pytest.raises(RuntimeError, match="without partial figures"):
        run_offline(spark, checkpoint=str(tmp_path / "ckpt"), say=lambda _: None, **opts)
