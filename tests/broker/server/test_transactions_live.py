"""Transactions on a live broker, before the coordinator exists: transactional batches
produced over the wire (the broker's own client), end-transaction markers written
through the partition on the broker's event loop, read back by real consumers
(confluent-kafka, read_committed and read_uncommitted) and raw Fetch/ListOffsets.
Also KIP-890's verification of a produce against a stand-in `txn_verifier`.

The broker runs in-process, on its own event loop in a thread, so that the test can
reach its partitions the way the coordinator will."""

import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.records import BatchBuilder, iter_batches
from testkit.procs import wait_until
from tests.broker.server.inprocess import InProcessBroker
from tests.broker.server.wire import WireClient, batch, fetch_body

TXN_ID = "tx-live"


@pytest.fixture
def live(tmp_path):
    b = InProcessBroker(tmp_path / "data")
    # These tests stand in for the coordinator (markers written directly, no
    # AddPartitionsToTxn): the broker's own verifier would refuse their batches.
    b.on_loop(lambda: setattr(b.core, "txn_verifier", None))
    yield b
    b.stop()


def txn_records(pid: int, seq: int, *values: bytes, epoch: int = 0) -> bytes:
    b = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    for v in values:
        b.append(v)
    return b.build()


def produce(c: WireClient, topic: str, records: bytes, partition: int = 0, txn_id=TXN_ID):
    body = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }
    resp = c.request(ApiKey.PRODUCE, 8, body)
    return resp["responses"][0]["partition_responses"][0]


def consume_all(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    """Values of the first `count` records a fresh consumer reads from offset 0."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def test_read_committed_consumers_stop_at_the_lso_and_skip_aborted_records(live):
    topic = "txn-live"
    with WireClient(live.port) as c:
        assert produce(c, topic, batch(b"p0"), txn_id=None)["error_code"] == 0  # 0
        assert produce(c, topic, txn_records(1000, 0, b"c1", b"c2"))["error_code"] == 0  # 1-2
        assert produce(c, topic, txn_records(2000, 0, b"a1"))["error_code"] == 0  # 3
        assert produce(c, topic, batch(b"p1"), txn_id=None)["error_code"] == 0  # 4
        # Both transactions open: read_committed sees offset 0 only.
        fetch = fetch_body(topic)
        fetch["isolation_level"] = 1
        part = c.request(ApiKey.FETCH, 11, fetch)["responses"][0]["partitions"][0]
        assert (part["high_watermark"], part["last_stable_offset"]) == (5, 1)
        assert [r.value for b in iter_batches(bytes(part["records"])) for r in b.records()] == [
            b"p0"
        ]
        assert part["aborted_transactions"] == []
        offsets = c.request(ApiKey.LIST_OFFSETS, 5, _list_latest(topic, isolation=1))
        assert offsets["topics"][0]["partitions"][0]["offset"] == 1
        offsets = c.request(ApiKey.LIST_OFFSETS, 5, _list_latest(topic, isolation=0))
        assert offsets["topics"][0]["partitions"][0]["offset"] == 5
        assert consume_all(live.bootstrap, topic, "read_committed", 1) == [b"p0"]
        lo, hi = _watermarks(live.bootstrap, topic)
        assert (lo, hi) == (0, 1)  # librdkafka asks ListOffsets read_committed
        # kcat -e exits at the end of the partition: for read_committed, the LSO.
        assert kcat(live.bootstrap, topic, "read_committed") == [b"p0"]
        assert kcat(live.bootstrap, topic, "read_uncommitted") == [
            b"p0",
            b"c1",
            b"c2",
            b"a1",
            b"p1",
        ]

        live.marker(topic, 0, 1000, commit=True)  # 5
        live.marker(topic, 0, 2000, commit=False)  # 6
        assert produce(c, topic, batch(b"p2"), txn_id=None)["error_code"] == 0  # 7
        part = c.request(ApiKey.FETCH, 11, fetch)["responses"][0]["partitions"][0]
        assert part["last_stable_offset"] == 8
        assert part["aborted_transactions"] == [{"producer_id": 2000, "first_offset": 3}]

    committed = [b"p0", b"c1", b"c2", b"p1", b"p2"]
    assert consume_all(live.bootstrap, topic, "read_committed", 5) == committed
    assert kcat(live.bootstrap, topic, "read_committed") == committed
    everything = [b"p0", b"c1", b"c2", b"a1", b"p1", b"p2"]
    assert consume_all(live.bootstrap, topic, "read_uncommitted", 6) == everything


def test_waiting_read_committed_fetch_wakes_when_the_marker_lands(live):
    topic = "txn-wait"
    with WireClient(live.port) as c:
        assert produce(c, topic, txn_records(3000, 0, b"t"))["error_code"] == 0
        fetch = fetch_body(topic, max_wait_ms=20000)
        fetch["isolation_level"] = 1
        corr = c.send(ApiKey.FETCH, 11, fetch)
        # The fetch waits in the purgatory: the HW moved past the record, the LSO did not.
        wait_until(
            lambda: live.on_loop(lambda: live.core.fetch_purgatory.watched((topic, 0))),
            what="the read_committed fetch to wait",
        )
        live.marker(topic, 0, 3000, commit=True)
        got, resp = c.recv(ApiKey.FETCH, 11)
        assert got == corr
        part = resp["responses"][0]["partitions"][0]
        assert part["last_stable_offset"] == 2
        values = [r.value for b in iter_batches(bytes(part["records"])) for r in b.records()]
        assert values[0] == b"t"


def test_produce_verifies_first_transactional_writes_with_the_coordinator(live):
    topic = "txn-verify"
    calls = []

    async def verifier(txn_id, pid, epoch, partitions):
        calls.append((txn_id, pid, epoch, sorted(partitions)))
        return {
            tp: ErrorCode.NONE if tp[1] == 0 else ErrorCode.INVALID_TXN_STATE for tp in partitions
        }

    live.on_loop(lambda: setattr(live.core, "txn_verifier", verifier))
    with WireClient(live.port) as c:
        assert produce(c, topic, txn_records(4000, 0, b"a"), partition=0)["error_code"] == 0
        refused = produce(c, topic, txn_records(4000, 0, b"b"), partition=1)
        assert refused["error_code"] == ErrorCode.INVALID_TXN_STATE
        assert calls == [
            (TXN_ID, 4000, 0, [(topic, 0)]),
            (TXN_ID, 4000, 0, [(topic, 1)]),
        ]
        # The transaction is ongoing on partition 0: no second verification.
        assert produce(c, topic, txn_records(4000, 1, b"c"), partition=0)["error_code"] == 0
        assert len(calls) == 2

        # A marker landing while the produce awaits the coordinator voids the verification.
        async def racing(txn_id, pid, epoch, partitions):
            p = live.core.replicas.get_partition(topic, 1)
            p.append_txn_marker(pid, epoch, False, coordinator_epoch=0)
            return dict.fromkeys(partitions, ErrorCode.NONE)

        live.on_loop(lambda: setattr(live.core, "txn_verifier", racing))
        raced = produce(c, topic, txn_records(5000, 0, b"d"), partition=1)
        assert raced["error_code"] == ErrorCode.INVALID_TXN_STATE

        async def unavailable(txn_id, pid, epoch, partitions):
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)

        live.on_loop(lambda: setattr(live.core, "txn_verifier", unavailable))
        retry = produce(c, topic, txn_records(6000, 0, b"e"), partition=1)
        assert retry["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS

        # A fenced producer (an older epoch than the coordinator's) is told, as Kafka
        # tells a Produce, INVALID_PRODUCER_EPOCH: clients make it fatal.
        async def fenced(txn_id, pid, epoch, partitions):
            return dict.fromkeys(partitions, ErrorCode.PRODUCER_FENCED)

        live.on_loop(lambda: setattr(live.core, "txn_verifier", fenced))
        zombie = produce(c, topic, txn_records(7000, 0, b"f"), partition=1)
        assert zombie["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
        # Non-transactional writes never wait for the coordinator.
        assert produce(c, topic, batch(b"plain"), partition=1, txn_id=None)["error_code"] == 0


def kcat(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Values kcat reads from the beginning to the end of partition 0, then exits."""
    cmd = ["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e"]
    cmd += ["-q", "-f", "%s\\n", "-X", f"isolation.level={isolation}"]
    out = subprocess.run(cmd, capture_output=True, timeout=60, check=True).stdout
    return out.splitlines()


def _list_latest(topic: str, isolation: int) -> dict:
    return {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    }


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": "read_committed"}
    )
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_transactional_batches_without_a_transactional_id_are_refused(live):
    with WireClient(live.port) as c:
        resp = produce(c, "txn-no-id", txn_records(7000, 0, b"x"), txn_id=None)
        assert resp["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce(c, "txn-no-id", batch(b"plain"), txn_id=None)["error_code"] == 0


def test_cli_finds_a_hanging_transaction_and_aborts_it_by_its_start_offset(live):
    """A transaction no coordinator knows (its batches written straight to the
    partition, as a coordinator that lost its state would leave them) holds the last
    stable offset back for good: kafka-transactions.sh's find-hanging reports it
    and `abort --start-offset` ends it."""
    with WireClient(live.port) as c:
        assert produce(c, "hang", batch(b"before"), txn_id=None)["error_code"] == 0
        assert produce(c, "hang", txn_records(4242, 0, b"stuck"))["error_code"] == 0

    def cli(*args):
        done = subprocess.run(
            [sys.executable, "-m", "logflume", "transactions", "--bootstrap-server"]
            + [live.bootstrap, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return [line.split() for line in done.stdout.splitlines()]

    producers = cli("describe-producers", "--topic", "hang", "--partition", "0")
    assert producers[0][0] == "ProducerId" and producers[0][-1] == "CurrentTransactionStartOffset"
    assert [r[0] for r in producers[1:]] == ["4242"] and producers[1][-1] == "1"
    wait_until(lambda: cli("find-hanging", "--topic", "hang", "--max-transaction-timeout", "0")[1:])
    (row,) = cli("find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")[1:]
    assert row[:3] == ["hang", "0", "4242"] and row[5] == "1"  # StartOffset
    assert consume_all(live.bootstrap, "hang", "read_committed", 1) == [b"before"]
    cli("abort", "--topic", "hang", "--partition", "0", "--start-offset", "1")
    assert cli("find-hanging", "--topic", "hang", "--max-transaction-timeout", "0")[1:] == []
    with WireClient(live.port) as c:
        assert produce(c, "hang", batch(b"after"), txn_id=None)["error_code"] == 0
    assert consume_all(live.bootstrap, "hang", "read_committed", 2) == [b"before", b"after"]


def test_cli_abort_of_an_unknown_topic_creates_no_topic(live):
    """The tool's Metadata request never auto-creates what it names (v1 would, on a
    broker with auto.create.topics.enable, the default)."""
    done = subprocess.run(
        [sys.executable, "-m", "logflume", "transactions", "--bootstrap-server", live.bootstrap]
        + ["abort", "--topic", "no-such-topic", "--partition", "0", "--producer-id", "7"]
        + ["--producer-epoch", "0", "--coordinator-epoch", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "no-such-topic-0" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    with WireClient(live.port) as c:
        meta = c.request(ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
    assert "no-such-topic" not in {t["name"] for t in meta["topics"]}


def test_a_batch_of_a_newer_epoch_is_verified_though_a_transaction_is_ongoing(live):
    """Transactions v2 bump the epoch at every end: the next transaction's first batch
    may reach a partition before the previous one's marker. It is verified (added,
    from Produce v12) with the coordinator, never appended into the old transaction."""
    topic = "txn-next-epoch"
    calls = []

    async def verifier(txn_id, pid, epoch, partitions, add=False):
        calls.append((epoch, add))
        code = ErrorCode.CONCURRENT_TRANSACTIONS if epoch == 1 else ErrorCode.NONE
        return dict.fromkeys(partitions, code)

    live.on_loop(lambda: setattr(live.core, "txn_verifier", verifier))
    with WireClient(live.port) as c:
        assert produce(c, topic, txn_records(8000, 0, b"old"))["error_code"] == 0
        assert produce(c, topic, txn_records(8000, 1, b"old2"))["error_code"] == 0
        assert calls == [(0, False)]  # ongoing under epoch 0: no second verification

        def produce_v12(records):
            body = {
                "transactional_id": TXN_ID,
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": records}]}
                ],
            }
            return c.request(ApiKey.PRODUCE, 12, body)["responses"][0]["partition_responses"][0]

        # The coordinator still writes the old transaction's markers: retriable.
        refused = produce_v12(txn_records(8000, 0, b"new", epoch=1))
        assert refused["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
        assert calls[-1] == (1, True)
