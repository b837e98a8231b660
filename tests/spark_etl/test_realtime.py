"""The near-real-time job against a known stream: provisional rows while a minute is
open, then exactly one final row per minute equal to the truth, across a restart."""

import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import pyarrow.parquet as pq
import pytest

from common.audit import SPARK_REALTIME
from spark_etl import loggen
from spark_etl.jobs.realtime import RealtimeJob, lateness_ms, start_realtime, window_doc
from testkit.kafka import consume_all, create_topic, produce
from testkit.procs import BrokerProcess
from tests.spark_etl import expected

BASE = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MINUTES = 6
PROVISIONAL_FIELDS = {
    "window_start", "window_end", "host", "requests", "status_2xx", "status_3xx",
    "status_4xx", "status_5xx", "bytes", "final",
}  # fmt: skip
COUNT_FIELDS = ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes")


@pytest.fixture
def bk(tmp_path):
    b = BrokerProcess(tmp_path / "broker").start()
    yield b
    b.stop()


def _epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp())


def test_every_final_minute_equals_the_truth_across_a_restart(spark, bk, tmp_path):
    """Six minutes of traffic (10 % unparsable) in chunks of 6 event-time seconds on
    two partitions; the job is stopped and started again on its checkpoint while
    they arrive; then one line three minutes ahead closes every minute. Each minute
    has exactly one Parquet row, equal to the truth; its published final rows equal
    it; its provisional rows never exceed it and the last one reaches it (the running
    counts survived the restart, neither lost nor doubled)."""
    create_topic(bk.bootstrap, "live", 2)
    create_topic(bk.bootstrap, "nginx-stats", 1)
    end = BASE + timedelta(minutes=MINUTES)
    items = list(loggen.generate(BASE, end, MINUTES * 400, seed=7, bad_ratio=0.1))
    truth = expected.by_minute([(a, False) for a in items])
    chunks = [items[i : i + 40] for i in range(0, len(items), 40)]
    kwargs = dict(
        bootstrap=bk.bootstrap, topic="live", output=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "ckpt"), trigger_seconds=0.5, watermark="10 seconds",
        starting_offsets="earliest", say=lambda _: None,
    )  # fmt: skip
    job = start_realtime(spark, **kwargs)
    try:
        for n, chunk in enumerate(chunks):
            produce(bk.bootstrap, "live", [a.line().encode() for a in chunk])
            time.sleep(0.2)
            assert job.failure() is None, job.failure()
            if n == len(chunks) // 2:
                job.stop()
                job = start_realtime(spark, **kwargs)
        last = _until(bk, _of_last_minute, job)
        assert not any(d["final"] for d in _of_last_minute(last))  # still open
        closing = next(loggen.generate(end + timedelta(minutes=3), end + timedelta(minutes=3), 1))
        produce(bk.bootstrap, "live", [closing.line().encode()])
        docs = _until(bk, lambda docs: len({_epoch(d["window_start"]) for d in docs
                                            if d["final"]}) == MINUTES, job)  # fmt: skip
        parquet = tmp_path / "out" / "minute"
        deadline = time.monotonic() + 30
        while len(list(parquet.rglob("part-*.parquet"))) < MINUTES:
            assert time.monotonic() < deadline, list(parquet.rglob("*"))
            time.sleep(0.2)
    finally:
        job.stop()
    rows = pq.read_table(parquet).to_pylist()
    got = {(int(r["window_start"].timestamp()), r["host"]): r for r in rows}
    assert len(rows) == len(got) == MINUTES and set(got) == set(truth)
    for key, row in got.items():
        expected.assert_figures(row, truth[key], key)
        assert row["unique_clients"] == truth[key]["clients"]  # exact in the realtime job
        assert row["window_end"] - row["window_start"] == timedelta(minutes=1)
    for d in docs:
        key = (_epoch(d["window_start"]), d.get("host"))
        if key not in got:  # the closing line's minute
            continue
        if d["final"]:
            assert {k: d[k] for k in COUNT_FIELDS} == {k: got[key][k] for k in COUNT_FIELDS}
            assert d["unique_clients"] == got[key]["unique_clients"]
        else:
            assert set(d) | {"host"} == PROVISIONAL_FIELDS
            assert d["requests"] <= got[key]["requests"]
    for key, row in got.items():
        provisional = [d for d in docs if _epoch(d["window_start"]) == key[0] and not d["final"]]
        assert provisional and provisional[-1]["requests"] == row["requests"], key
    assert not any((tmp_path / "ckpt" / "staging" / str(m)).exists() for m, _ in got)
    # every record read counted once in the audit, across the restart
    assert expected.assert_audit_equals_recount(bk.bootstrap, "live", SPARK_REALTIME) == (
        len(items) + 1
    )


def _of_last_minute(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["window_start"].startswith("2024-05-01T12:05")]


def _until(bk, done, job, timeout: float = 90) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        assert job.failure() is None, job.failure()
        docs = [orjson.loads(m.value()) for m in consume_all(bk.bootstrap, "nginx-stats")]
        if done(docs):
            return docs
        assert time.monotonic() < deadline, docs[-5:]
        time.sleep(0.5)


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
    job = RealtimeJob(
        spark, bootstrap=bk.bootstrap, topic="now", output=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "ckpt"), starting_offsets="earliest", say=lambda _: None,
    ).start()  # fmt: skip
    try:
        docs = _until(bk, bool, job)
        still_arriving = feeder.is_alive()
        produced = list(sent)
        assert "lines/s in" in job.progress_line()
    finally:
        stop.set()
        job.stop()
        feeder.join(30)
    assert still_arriving and docs
    assert not any(d["final"] for d in docs)  # the 1-minute watermark closed nothing yet
    minutes = {t.replace(second=0, tzinfo=None).isoformat() for t, _ in produced}
    for d in docs:
        assert d["window_start"][:19] in minutes
        in_minute = sum(n for t, n in produced if t.replace(second=0, tzinfo=None).isoformat()
                        == d["window_start"][:19])  # fmt: skip
        assert 0 < d["requests"] <= in_minute


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1 minute", 60_000),
        ("30 seconds", 30_000),
        ("1 minute 30 seconds", 90_000),
        ("500 milliseconds", 500),
        ("2 hours", 7_200_000),
    ],  # fmt: skip
)
def test_watermark_intervals(text, ms):
    assert lateness_ms(text) == ms


@pytest.mark.parametrize("text", ["", "soon", "1 fortnight", "-1 minute"])
def test_bad_watermark_names_the_value(text):
    with pytest.raises(ValueError, match="watermark"):
        lateness_ms(text)


def test_realtime_cli_defaults_and_conf_wins():
    import argparse

    from logflume.commands import etl
    from spark_etl.command import session_conf

    parser = argparse.ArgumentParser()
    etl.add_parser(parser.add_subparsers())
    args = parser.parse_args(["etl", "realtime", "--conf", "a=c"])
    assert args.trigger_seconds == 0.5 and args.provisional
    assert parser.parse_args(["etl", "realtime", "--no-provisional"]).provisional is False
    assert session_conf(args, {"a": "b", "d": "e"}) == {"a": "c", "d": "e"}


def test_stats_rows_are_keyed_by_window_and_host():
    key, value = window_doc(1_795_000_000 // 60 * 60, "web1", {"requests": 3}, final=True)
    doc = orjson.loads(value)
    assert key == f"{doc['window_start']} web1".encode()
    assert doc["final"] is True and doc["requests"] == 3
    assert window_doc(60, None, {}, final=False)[0] == b"1970-01-01T00:01:00.000Z"
