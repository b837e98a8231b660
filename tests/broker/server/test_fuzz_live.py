"""Live-socket fuzzing: real client requests, mutated, against a broker process.

kcat and confluent-kafka talk to the broker through a recording proxy (every API a
producer, a consumer group and an admin client use); those frames are mutated
(tests/broker/server/fuzzlib.py says how) and sent over many connections from a few
threads. After every `CHECK_EVERY` mutations the broker process must be alive,
answer ApiVersions and Metadata, and its RSS is sampled; growth after warm-up must
stay under `RSS_GROWTH_LIMIT_KIB`. Finally every stored batch of every partition
must decode with the broker's own codec (CRC, lengths, records), and the records
produced before the fuzzing must read back intact through confluent-kafka.

The seed is fixed per run (`LOGFLUME_FUZZ_SEED` overrides it; the soak variant picks
a new one each run) and printed with the failing case; the captured corpus is saved
next to the broker log, so `make_case(corpus, maps, seed, index)` rebuilds the case.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey
from broker.protocol.records import iter_batches
from common.ports import free_port
from tests.broker.server import fuzzlib
from tests.broker.server.wire import WireClient, fetch_body

KEEP_TOPIC = "fuzz-keep"
KEEP = 300
CHECK_EVERY = 250
SHORT_CASES = 30_000  # ~12 s of fuzzing on a 2-core machine
SOAK_CASES = 600_000  # about 4 minutes on a 2-core machine
RSS_GROWTH_LIMIT_KIB = 40 * 1024
SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "socket.request.max.bytes": fuzzlib.MAX_REQUEST,
    "offsets.topic.num.partitions": 4,
}
REQUIRED_APIS = {
    ApiKey.API_VERSIONS,
    ApiKey.METADATA,
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
}


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def capture(bootstrap: str, proxy: fuzzlib.RecordingProxy) -> None:
    """Drive real clients through the proxy: produce (plain, lz4 idempotent, gzip,
    kcat), metadata, a consumer group that commits and heartbeats, kcat consume,
    ListOffsets by time, CreateTopics."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fuzz-two", 2, 1)])["fuzz-two"].result(15)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(KEEP):
        p.produce(KEEP_TOPIC, b"keep-%05d" % i, key=b"k%d" % (i % 7), partition=0)
    p.produce("fuzz-two", b"h", headers=[("trace", b"x"), ("null", None)], partition=1)
    assert p.flush(30) == 0
    for codec, topic in (("lz4", "fuzz-lz4"), ("gzip", "fuzz-gzip")):
        cp = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True}
        )
        for i in range(40):
            cp.produce(topic, b"compressed %d " % i * 4)
        assert cp.flush(30) == 0
    kcat = ["kcat", "-b", bootstrap, "-q"]
    subprocess.run(kcat + ["-P", "-t", "fuzz-kcat", "-K:"], input=b"a:1\nb:2\n:3\n", check=True)
    subprocess.run(kcat + ["-L"], check=True, capture_output=True, timeout=30)
    subprocess.run(
        kcat + ["-C", "-t", "fuzz-kcat", "-o", "beginning", "-e"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 100,
            "session.timeout.ms": 6000,
        }
    )
    try:
        c.subscribe([KEEP_TOPIC])
        got = 0
        deadline = time.monotonic() + 30
        while got < KEEP and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += 1
        assert got == KEEP
        c.commit(asynchronous=False)
        tp = TopicPartition(KEEP_TOPIC, 0)
        assert c.committed([tp], timeout=10)[0].offset == KEEP
        c.get_watermark_offsets(tp, timeout=10, cached=False)
        c.offsets_for_times([TopicPartition(KEEP_TOPIC, 0, int(time.time() * 1000) - 60_000)], 10)

        def heartbeat_seen():
            c.poll(0.05)
            return ApiKey.HEARTBEAT in proxy.api_keys()

        _wait(heartbeat_seen, 20, "no Heartbeat seen")
    finally:
        c.close()


def read_back_keep(bootstrap: str) -> None:
    """The records produced before the fuzzing, through confluent-kafka."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-verify", "check.crcs": True})
    try:
        c.assign([TopicPartition(KEEP_TOPIC, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < KEEP and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    want = [(i, b"k%d" % (i % 7), b"keep-%05d" % i) for i in range(KEEP)]
    assert got[:KEEP] == want


def check_stored(port: int) -> tuple[int, int, int]:
    """Fetch every partition of every topic from 0 to its high watermark and decode
    every batch. -> (partitions, batches, records)."""
    parts = batches = records = 0
    with WireClient(port) as c:
        md = c.request(ApiKey.METADATA, 1, {"topics": None})
        for t in md["topics"]:
            for p in t["partitions"]:
                parts += 1
                offset = 0
                while True:
                    f = c.request(
                        ApiKey.FETCH, 11, fetch_body(t["name"], offset, p["partition_index"])
                    )
                    r = f["responses"][0]["partitions"][0]
                    assert r["error_code"] == 0, (t["name"], p, r["error_code"])
                    data = bytes(r["records"] or b"")
                    nb, nr = fuzzlib.check_batches(data)
                    if nb == 0:
                        break
                    batches += nb
                    records += nr
                    last = list(iter_batches(data, allow_partial_tail=True))[-1]
                    offset = last.next_offset
                    if offset >= r["high_watermark"]:
                        break
    return parts, batches, records


def health(port: int) -> None:
    with WireClient(port, timeout=10) as c:
        assert c.request(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
        md = c.request(ApiKey.METADATA, 8, {"topics": [{"name": KEEP_TOPIC}]})
        assert md["topics"][0]["error_code"] == 0


def fuzz(broker_factory, tmp_path: Path, seed: int, cases: int, workers: int) -> dict:
    proxy_port = free_port()
    b = broker_factory(settings=SETTINGS, args=["--advertised", f"127.0.0.1:{proxy_port}"])
    report = {"seed": seed, "cases": cases}
    with fuzzlib.RecordingProxy(b.port, proxy_port) as proxy:
        t0 = time.monotonic()
        capture(proxy.address, proxy)
        report["capture_s"] = round(time.monotonic() - t0, 1)
        assert REQUIRED_APIS <= proxy.api_keys(), REQUIRED_APIS - proxy.api_keys()
        corpus = fuzzlib.dedupe(proxy.frames())
        corpus_path = tmp_path / "corpus.bin"
        if os.environ.get("LOGFLUME_FUZZ_CORPUS"):  # replay a saved run's corpus
            corpus = fuzzlib.load_corpus(Path(os.environ["LOGFLUME_FUZZ_CORPUS"]))
        else:
            fuzzlib.save_corpus(corpus, corpus_path)
        maps = [fuzzlib.field_map(f) for f in corpus]
        report["corpus_frames"] = len(corpus)

        def where(index: int) -> str:
            return (
                f"seed={seed} (LOGFLUME_FUZZ_SEED), corpus {corpus_path}, broker log "
                f"{b.log_path}: {fuzzlib.make_case(corpus, maps, seed, index).describe()}"
            )

        def one(index: int) -> str:
            case = fuzzlib.make_case(corpus, maps, seed, index)
            try:
                return fuzzlib.run_case(b.port, case)
            except fuzzlib.Verdict as e:
                raise AssertionError(f"{e}\n  {where(index)}") from None

        outcomes: dict[str, int] = {}
        rss = []
        t0 = time.monotonic()
        only = os.environ.get("LOGFLUME_FUZZ_ONLY")  # "17,230": replay these cases alone
        indexes = [int(i) for i in only.split(",")] if only else range(cases)
        with concurrent.futures.ThreadPoolExecutor(1 if only else workers) as pool:
            for start in range(0, len(indexes), CHECK_EVERY):
                for outcome in pool.map(one, indexes[start : start + CHECK_EVERY]):
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                assert b.proc.poll() is None, f"broker died (seed {seed}, cases up to {start}...)"
                try:
                    health(b.port)
                except Exception as e:
                    raise AssertionError(f"unhealthy after cases up to {start}: {e!r}") from e
                rss.append(fuzzlib.rss_kib(b.proc.pid))
        report["fuzz_s"] = round(time.monotonic() - t0, 1)
        report["outcomes"] = outcomes
        warm = rss[min(2, len(rss) - 1)]
        report["rss_kib"] = {"first": rss[0], "after_warmup": warm, "max": max(rss)}
        report["stored"] = check_stored(b.port)
        read_back_keep(proxy.address)
    assert b.proc.poll() is None
    assert "Traceback" not in b.log_text(), b.log_text()[-4000:]
    assert max(rss) - warm < RSS_GROWTH_LIMIT_KIB, f"RSS grew: {report}, log {b.log_path}"
    print(f"fuzz report: {report}")
    return report


def test_fuzz_live_short(broker_factory, tmp_path):
    seed = int(os.environ.get("LOGFLUME_FUZZ_SEED", "20240611"))
    fuzz(
        broker_factory,
        tmp_path,
        seed,
        cases=int(os.environ.get("LOGFLUME_FUZZ_CASES", SHORT_CASES)),
        workers=4,
    )


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_fuzz_live_soak(broker_factory, tmp_path):
    seed = int(os.environ.get("LOGFLUME_FUZZ_SEED", time.time_ns() % 10**9))
    fuzz(broker_factory, tmp_path, seed, cases=SOAK_CASES, workers=6)
