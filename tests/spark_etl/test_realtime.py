"""The near-real-time job emits minute windows while data keeps arriving."""

import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from pyspark.errors import AnalysisException

from spark_etl import loggen
from spark_etl.jobs.realtime import start_realtime
from testkit.kafka import consume_all, create_topic, produce
from testkit.procs import BrokerProcess

BASE = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PROVISIONAL_FIELDS = {
    "window_start", "window_end", "host", "requests", "status_2xx", "status_3xx",
    "status_4xx", "status_5xx", "bytes", "final",
}  # fmt: skip


@pytest.fixture
def bk(tmp_path):
    b = BrokerProcess(tmp_path / "broker").start()
    yield b
    b.stop()


def test_minute_windows_are_emitted_while_data_keeps_arriving(spark, bk, tmp_path):
    create_topic(bk.bootstrap, "live", 1)
    create_topic(bk.bootstrap, "nginx-stats", 1)
    # Event time runs ~12x faster than the clock: 30 minutes of traffic in ~150 s,
    # more than the test waits, so records keep arriving throughout.
    traffic = list(loggen.generate(BASE, BASE + timedelta(minutes=30), 6000, seed=5))
    first_minute = sum(1 for a in traffic if a.time < BASE + timedelta(minutes=1))
    stop = threading.Event()

    def feed():
        for i in range(0, len(traffic), 20):
            if stop.is_set():
                return
            produce(bk.bootstrap, "live", [a.line().encode() for a in traffic[i : i + 20]])
            time.sleep(0.5)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out = tmp_path / "out"
    queries = start_realtime(
        spark, bootstrap=bk.bootstrap, topic="live", output=str(out),
        checkpoint=str(tmp_path / "ckpt"), trigger_seconds=1, watermark="5 seconds",
        starting_offsets="earliest", say=lambda _: None,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        rows, published = [], []
        while time.monotonic() < deadline and not (rows and published):
            time.sleep(1)
            for q in queries:
                assert q.exception() is None, q.exception()
            try:  # readable once the file sink has committed a batch with rows
                rows = spark.read.parquet(str(out / "minute")).collect()
            except AnalysisException:
                rows = []
            docs = [orjson.loads(m.value()) for m in consume_all(bk.bootstrap, "nginx-stats")]
            published = [d for d in docs if d["final"]]
        still_arriving = feeder.is_alive()
    finally:
        stop.set()
        for q in queries:
            q.stop()
        feeder.join(30)
    assert still_arriving, "the feeder had finished before any window came out"
    first = [r for r in rows if r.window_start == BASE.replace(tzinfo=None)]
    assert len(first) == 1 and first[0].requests == first_minute
    assert (
        first[0].status_2xx + first[0].status_3xx + first[0].status_4xx + first[0].status_5xx
        == first_minute
    )
    doc = next(d for d in published if d["window_start"].startswith("2024-05-01T12:00:00"))
    assert doc["requests"] == first_minute and doc["rt_p99"] >= doc["rt_p50"]
    early = [d for d in docs if d["window_start"] == doc["window_start"] and not d["final"]]
    assert early and all(d["requests"] <= first_minute for d in early)


def test_provisional_rows_show_the_open_minute_while_data_keeps_arriving(spark, bk, tmp_path):
    create_topic(bk.bootstrap, "now", 1)
    create_topic(bk.bootstrap, "nginx-stats", 1)
    stop = threading.Event()
    sent = []

    def feed():  # lines stamped with the wall clock: their minute is still open
        seed = 0
        while not stop.is_set():
            start = datetime.now(UTC).replace(microsecond=0)
            batch = [a.line() for a in loggen.generate(start, start, 20, seed=seed)]
            sent.append((start, len(batch)))  # before producing: docs never count more
            produce(bk.bootstrap, "now", [line.encode() for line in batch])
            seed += 1
            time.sleep(0.3)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    queries = start_realtime(
        spark, bootstrap=bk.bootstrap, topic="now", output=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "ckpt"), trigger_seconds=30, provisional_trigger_seconds=1,
        starting_offsets="earliest", say=lambda _: None,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        docs = []
        while time.monotonic() < deadline and not docs:
            time.sleep(1)
            for q in queries:
                assert q.exception() is None, q.exception()
            docs = [orjson.loads(m.value()) for m in consume_all(bk.bootstrap, "nginx-stats")]
        still_arriving = feeder.is_alive()
        produced = list(sent)
    finally:
        stop.set()
        for q in queries:
            q.stop()
        feeder.join(30)
    assert still_arriving and docs
    assert not any(d["final"] for d in docs)  # the 1-minute watermark closed nothing yet
    # counts only, no sketches (to_json leaves out a null host)
    assert all(set(d) | {"host"} == PROVISIONAL_FIELDS for d in docs)
    minutes = {t.replace(second=0, tzinfo=None).isoformat() for t, _ in produced}
    for d in docs:
        assert d["window_start"][:19] in minutes
        in_minute = sum(n for t, n in produced if t.replace(second=0, tzinfo=None).isoformat()
                        == d["window_start"][:19])  # fmt: skip
        assert 0 < d["requests"] <= in_minute


class _Writer:
    """Stands in for a DataStreamWriter: records what `start` saw."""

    def __init__(self, spark):
        self.spark = spark
        self.seen = None

    def start(self):
        sc = self.spark.sparkContext
        self.seen = (
            sc.getLocalProperty("spark.scheduler.pool"),
            self.spark.conf.get("spark.sql.shuffle.partitions"),
        )
        return self


def test_queries_start_in_their_scheduler_pool_and_settings_are_restored(spark):
    from spark_etl.jobs.realtime import PROVISIONAL_POOL, _start

    sc = spark.sparkContext
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    assert partitions != "1"
    sc.setLocalProperty("spark.scheduler.pool", "callers")
    try:
        writer = _start(spark, _Writer(spark), PROVISIONAL_POOL,
                        {"spark.sql.shuffle.partitions": "1"})  # fmt: skip
        assert writer.seen == (PROVISIONAL_POOL, "1")
        assert sc.getLocalProperty("spark.scheduler.pool") == "callers"
        assert spark.conf.get("spark.sql.shuffle.partitions") == partitions
    finally:
        sc.setLocalProperty("spark.scheduler.pool", None)


def test_realtime_cli_runs_fair_with_a_longer_final_trigger_and_conf_wins():
    import argparse

    from logflume.commands import etl

    parser = argparse.ArgumentParser()
    etl.add_parser(parser.add_subparsers())
    args = parser.parse_args(["etl", "realtime", "--conf", "spark.scheduler.mode=FIFO"])
    assert args.trigger_seconds == 20 and args.provisional_trigger_seconds == 1
    assert etl.session_conf(args, {"spark.scheduler.mode": "FAIR", "a": "b"}) == {
        "spark.scheduler.mode": "FIFO",
        "a": "b",
    }
    assert etl.REALTIME_CONF == {"spark.scheduler.mode": "FAIR"}
