"""Transactions across replicas: two brokers (in this process, so the test can write
end-transaction markers on the leader as the coordinator will) joined through a real
ZooKeeper. A follower copies the leader's transactional batches and markers into its
own producer state and transaction index; after a failover the new leader holds
the same last stable offset and answers read_committed fetches with the same
aborted transactions."""

import types
import uuid

import pytest

from broker.log.txn_index import AbortedTxn
from broker.protocol import ApiKey
from tests.broker.server.inprocess import InProcessBroker
from tests.broker.server.test_transactions_live import produce, txn_records
from tests.broker.server.wire import WireClient, fetch_body
from tests.cluster.conftest import FAST
from tests.cluster.util import ZkView, create_topic, wait_until

TOPIC = "txn-replicated"


@pytest.fixture
def pair(zookeeper, tmp_path):
    chroot = f"{zookeeper.connect}/t{uuid.uuid4().hex[:8]}"
    settings = {
        **FAST,
        "zookeeper.connect": chroot,
        "default.replication.factor": 2,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 2,
    }
    brokers = {}
    zk = ZkView(chroot)
    try:
        for i in (0, 1):
            b = brokers[i] = InProcessBroker(tmp_path / f"b{i}", {**settings, "broker.id": i})
            # the test stands in for the coordinator: no verification of its batches
            b.on_loop(lambda b=b: setattr(b.core, "txn_verifier", None))
        wait_until(lambda: zk.live() == [0, 1], what="both brokers to register")
        # and each to know the other: CreateTopics on a broker that has not yet seen
        # the other's registration answers INVALID_REPLICATION_FACTOR for rf=2
        wait_until(
            lambda: all(
                b.on_loop(lambda b=b: sorted(b.core.cluster.brokers)) == [0, 1]
                for b in brokers.values()
            ),
            what="both brokers to see each other",
        )
        cluster = types.SimpleNamespace(
            bootstrap=",".join(b.bootstrap for b in brokers.values()), zk=zk
        )
        create_topic(cluster, TOPIC, partitions=1, rf=2)
        yield brokers, zk
    finally:
        for b in brokers.values():
            if b.thread.is_alive():
                b.stop()
        zk.close()


def log_state(broker: InProcessBroker):
    def read():
        p = broker.core.replicas.get_partition(TOPIC, 0)
        log = p.log
        return (
            log.log_end_offset,
            dict(log.producer_state.ongoing),
            log.collect_aborted(0, log.log_end_offset + 1),
        )

    return broker.on_loop(read)


def test_follower_copies_markers_and_serves_them_after_failover(pair):
    brokers, zk = pair
    leader_id = zk.state(TOPIC)["leader"]
    leader, follower = brokers[leader_id], brokers[1 - leader_id]
    with WireClient(leader.port) as c:
        assert produce(c, TOPIC, txn_records(11, 0, b"aborted"))["error_code"] == 0  # 0
        assert produce(c, TOPIC, txn_records(12, 0, b"open"))["error_code"] == 0  # 1
        leader.marker(TOPIC, 0, 11, commit=False)  # 2
    expected = (3, {1: 12}, [AbortedTxn(11, 0, 2, 1)])
    assert log_state(leader) == expected
    wait_until(lambda: log_state(follower) == expected, what="the follower to copy the marker")
    # DescribeProducers answers from the follower's own copy of the producer states
    with WireClient(follower.port) as c:
        body = {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
        part = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    starts = {a["producer_id"]: a["current_txn_start_offset"] for a in part["active_producers"]}
    assert starts == {11: -1, 12: 1}

    leader.stop()
    wait_until(
        lambda: (s := zk.state(TOPIC)) and s["leader"] == follower_id(brokers, leader),
        what="the follower to take over",
    )
    with WireClient(follower.port) as c:
        body = fetch_body(TOPIC)
        body["isolation_level"] = 1
        part = wait_until(
            lambda: _fetched(c, body), what="the new leader to answer the read_committed fetch"
        )
        # The open transaction (producer 12, from offset 1) holds the LSO back.
        assert part["last_stable_offset"] == 1
        assert part["aborted_transactions"] == [{"producer_id": 11, "first_offset": 0}]
    follower.marker(TOPIC, 0, 12, commit=True)
    with WireClient(follower.port) as c:
        part = c.request(ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]
        assert part["last_stable_offset"] == 4


def follower_id(brokers, stopped) -> int:
    return next(i for i, b in brokers.items() if b is not stopped)


def _fetched(c: WireClient, body: dict):
    part = c.request(ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]
    return part if part["error_code"] == 0 and part["records"] else None
