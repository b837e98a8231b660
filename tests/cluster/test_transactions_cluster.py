"""Transactions on a three-broker ZooKeeper cluster: markers for partitions led by
other brokers than the coordinator (WriteTxnMarkers), and SIGKILL of the coordinator
and of a partition leader while a transactional producer runs: no committed record
lost, no aborted record visible, every transaction completes or aborts."""

from __future__ import annotations

import time

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from broker.groups.offsets_topic import partition_for as group_partition
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from logflume.commands.transactions.tool import describe_transaction
from tests.broker.server.tv2_producer import TV2Producer
from tests.cluster.util import create_topic, producer, wait_until

TXN = {
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
}


def read_committed(cluster, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed consumer reads up to each partition's end."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, at_end = [], set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in c.consume(num_messages=500, timeout=0.2):
                if msg.error() is not None:
                    at_end.add(msg.partition())
                else:
                    values.append(msg.value())
    finally:
        c.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return values


def txn_producer(cluster, tid: str):
    p = producer(cluster, **{"transactional.id": tid, "transaction.timeout.ms": 30000})
    p.init_transactions(60)
    return p


def coordinator_of(cluster) -> int:
    return cluster.zk.state("__transaction_state", 0)["leader"]


def run_transactions(p, topic: str, partitions: int, count: int, per_txn: int, during=None):
    """`count` transactions of `per_txn` values each (every odd one aborted on purpose);
    `during(i)` runs in the middle of transaction i. Returns (committed, aborted) value
    sets: a transaction the client had to abort counts as aborted."""
    committed, aborted = set(), set()
    for i in range(count):
        values = {b"%d-%d" % (i, j) for j in range(per_txn)}
        p.begin_transaction()
        try:
            for n, v in enumerate(sorted(values)):
                p.produce(topic, value=v, partition=n % partitions)
                if during is not None and n == per_txn // 2:
                    during(i)
            if i % 2:
                p.flush(60)
                p.abort_transaction(60)
                aborted |= values
                continue
            _commit(p)
            committed |= values
        except KafkaException as e:
            assert e.args[0].txn_requires_abort(), e
            p.abort_transaction(60)
            aborted |= values
    return committed, aborted


def _commit(p) -> None:
    for _ in range(10):
        try:
            p.commit_transaction(60)
            return
        except KafkaException as e:
            if not e.args[0].retriable():
                raise
    raise AssertionError("commit_transaction kept failing")


def test_markers_for_partitions_led_by_other_brokers(cluster_factory):
    cluster = cluster_factory(3, TXN)
    create_topic(cluster, "spread", partitions=3)
    leaders = {cluster.zk.state("spread", p)["leader"] for p in range(3)}
    assert len(leaders) == 3  # so two partitions are led by another broker than any one
    p = txn_producer(cluster, "spread-tx")
    committed, aborted = run_transactions(p, "spread", 3, 4, 9)
    values = read_committed(cluster, "spread", 3)
    assert sorted(values) == sorted(committed) and not set(values) & aborted


def test_coordinator_killed_during_transactions(cluster_factory):
    cluster = cluster_factory(3, TXN)
    create_topic(cluster, "coord-kill", partitions=3)
    p = txn_producer(cluster, "coord-kill-tx")
    victim = coordinator_of(cluster)

    def kill(i):
        if i == 2:
            cluster.brokers[victim].kill()
            wait_until(
                lambda: coordinator_of(cluster) not in (-1, victim), what="a new coordinator"
            )

    committed, aborted = run_transactions(p, "coord-kill", 3, 6, 10, during=kill)
    cluster.brokers[victim].start()
    values = read_committed(cluster, "coord-kill", 3)
    assert sorted(values) == sorted(committed) and not set(values) & aborted
    assert len(committed) >= 20
    state = describe_transaction(cluster.bootstrap, "coord-kill-tx", 10)
    assert state["transaction_state"] in ("CompleteCommit", "CompleteAbort")
    assert state["coordinator"] == coordinator_of(cluster)


def test_partition_leader_killed_during_transactions(cluster_factory):
    cluster = cluster_factory(3, TXN)
    create_topic(cluster, "leader-kill", partitions=1)
    leader = cluster.zk.state("leader-kill", 0)["leader"]
    p = txn_producer(cluster, "leader-kill-tx")

    def kill(i):
        if i == 2:
            cluster.brokers[leader].kill()
            wait_until(
                lambda: cluster.zk.state("leader-kill", 0)["leader"] not in (-1, leader),
                what="a new leader",
            )

    committed, aborted = run_transactions(p, "leader-kill", 1, 6, 10, during=kill)
    cluster.brokers[leader].start()
    values = read_committed(cluster, "leader-kill", 1)
    assert sorted(values) == sorted(committed) and not set(values) & aborted
    assert len(committed) >= 20


def test_offsets_committed_through_a_transaction_on_another_broker(cluster_factory):
    """The group's `__consumer_offsets` partition is led by another broker than the
    transaction coordinator: TxnOffsetCommit is verified remotely and the commit
    marker reaches the group coordinator by WriteTxnMarkers."""
    cluster = cluster_factory(3, TXN)
    create_topic(cluster, "ctp-in", partitions=1)
    create_topic(cluster, "ctp-out", partitions=1)
    plain = producer(cluster, acks="all")
    for i in range(20):
        plain.produce("ctp-in", value=b"in-%d" % i, partition=0)
    assert plain.flush(30) == 0
    p = txn_producer(cluster, "ctp-tx")  # creates __transaction_state
    coordinator = coordinator_of(cluster)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe"})
    consumer.committed([TopicPartition("ctp-in", 0)], timeout=30)  # creates the offsets topic
    consumer.close()
    wait_until(lambda: cluster.zk.state("__consumer_offsets", 2), what="the offsets topic")
    group = next(
        g
        for g in (f"group-{i}" for i in range(100))
        if cluster.zk.state("__consumer_offsets", group_partition(g, 3))["leader"] != coordinator
    )
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["ctp-in"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m for m in consumer.consume(num_messages=100, timeout=0.5) if not m.error()]
    assert len(got) == 20
    p.begin_transaction()
    for m in got:
        p.produce("ctp-out", value=m.value().replace(b"in", b"out"), partition=0)
    p.send_offsets_to_transaction(
        [TopicPartition("ctp-in", 0, 20)], consumer.consumer_group_metadata(), 60
    )
    _commit(p)
    wait_until(
        lambda: consumer.committed([TopicPartition("ctp-in", 0)], timeout=10)[0].offset == 20,
        what="the transaction's offset to be committed",
    )
    consumer.close()
    assert sorted(read_committed(cluster, "ctp-out", 1)) == sorted(b"out-%d" % i for i in range(20))


def test_transactions_v2_across_brokers_and_one_feature_level(cluster_factory):
    """A transactions v2 producer (Produce v12, TxnOffsetCommit v5, EndTxn v5) on
    partitions led by other brokers than its coordinator: each leader adds its
    partition through AddPartitionsToTxn v5, the group coordinator its offsets
    partition, and the markers carry the bumped epochs. Every broker reports the
    finalized `transaction.version` of ZooKeeper's /feature, also the one whose own
    config asks for 1."""
    cluster = cluster_factory(
        3, TXN, per_broker=lambda i: {"transaction.version": 1} if i == 2 else {}
    )
    data, _ = cluster.zk.client.get("/feature")
    level = orjson.loads(data)["features"]["transaction.version"]["max_version_level"]
    for b in cluster.brokers.values():
        host, port = b.bootstrap.split(":")
        with BlockingClient(host, int(port)) as c:
            v4 = c.request(ApiKey.API_VERSIONS, 4, {})
        assert v4["finalized_features"] == [
            {"name": "group.version", "max_version_level": 1, "min_version_level": 1},
            {"name": "share.version", "max_version_level": 1, "min_version_level": 1},
            {"name": "transaction.version", "max_version_level": level, "min_version_level": level},
        ]
    create_topic(cluster, "tv2-spread", partitions=3)
    with TV2Producer(cluster.bootstrap, "tv2-spread-tx") as p:
        p.init()
        group = next(
            g
            for g in (f"tv2-group-{i}" for i in range(100))
            if cluster.zk.state("__consumer_offsets", group_partition(g, 3)) is None
            or cluster.zk.state("__consumer_offsets", group_partition(g, 3))["leader"]
            != coordinator_of(cluster)
        )
        committed = []
        for i in range(4):
            values = [b"%d-%d" % (i, n) for n in range(3)]
            for n, v in enumerate(values):
                assert p.produce("tv2-spread", n, v) == ErrorCode.NONE
            assert p.commit_offsets(group, "tv2-spread", 0, i + 1) == ErrorCode.NONE
            epoch = p.epoch
            assert p.end(i % 2 == 0) == ErrorCode.NONE
            assert p.epoch == epoch + 1
            if i % 2 == 0:
                committed += values
    assert sorted(read_committed(cluster, "tv2-spread", 3)) == sorted(committed)
