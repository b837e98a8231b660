"""Replication under broker failures: RF 3, min.insync.replicas 2, acks=all.

Real ZooKeeper and broker processes; brokers are SIGKILLed (no clean shutdown) and
restarted. Every record the producer saw acknowledged must be read back, in order,
with no duplicates (idempotent producer).
"""

import threading

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from tests.cluster.util import consume_all, create_topic, producer, wait_until


def _leader(cluster, topic):
    state = cluster.zk.state(topic)
    return state["leader"] if state else -1


@pytest.mark.parametrize("kills", [5, pytest.param(20, marks=pytest.mark.soak)])
def test_acknowledged_records_survive_leader_kills(cluster_factory, kills):
    cluster = cluster_factory()
    topic = "kills"
    create_topic(cluster, topic)
    acked: list[int] = []
    failed: list = []
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked.append(int(msg.value()))
        else:
            failed.append(err)

    def produce_loop():
        p = producer(
            cluster, acks="all", **{"enable.idempotence": True, "message.timeout.ms": 60000}
        )
        i = 0
        while not stop.is_set():
            p.produce(topic, str(i).encode(), callback=on_delivery)
            i += 1
            p.poll(0.002)
        p.flush(60)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    try:
        for _ in range(kills):
            wait_until(lambda: len(acked) > 200, what="some acknowledged records")
            victim = _leader(cluster, topic)
            before = len(acked)
            cluster.brokers[victim].kill()
            wait_until(lambda v=victim: _leader(cluster, topic) not in (-1, v), what="a new leader")
            wait_until(lambda b=before: len(acked) > b + 100, what="acks from the new leader")
            cluster.brokers[victim].start()
            wait_until(
                lambda: len(cluster.zk.state(topic)["isr"]) == 3, what="the ISR to be full again"
            )
    finally:
        stop.set()
        thread.join(90)
    assert not [e for e in failed if e.code() != KafkaError._MSG_TIMED_OUT]
    values = [int(v) for v in consume_all(cluster, topic, len(acked))]
    assert len(values) == len(set(values)), "duplicates"
    assert values == sorted(values), "out of order"
    assert set(acked) <= set(values), f"lost {len(set(acked) - set(values))} acked records"


def test_two_brokers_down_acks_all_refused_acks_1_works_isr_recovers(cluster_factory):
    cluster = cluster_factory()
    topic = "two-down"
    create_topic(cluster, topic)
    leader = _leader(cluster, topic)
    others = [b for b in cluster.brokers if b != leader]
    for b in others:
        cluster.brokers[b].kill()
    wait_until(lambda: cluster.zk.state(topic)["isr"] == [leader], what="the ISR to shrink")
    # The znode may be the controller's write: wait until the leader itself applied it
    # (its Metadata answer comes from the same state), else an acks=all write could
    # still be taken against the old ISR and fail only after the append.
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    wait_until(
        lambda: admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs == [leader],
        what="the leader to see the shrunk ISR",
    )

    results = {}

    def send(acks):
        p = producer(cluster, acks=acks, retries=0, **{"message.timeout.ms": 10000})
        out = []
        p.produce(topic, b"x", callback=lambda err, msg: out.append(err))
        assert p.flush(30) == 0
        results[acks] = out[0]

    send("all")
    send("1")
    assert results["all"] is not None and results["all"].code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert results["1"] is None
    for b in others:
        cluster.brokers[b].start()
    wait_until(
        lambda: sorted(cluster.zk.state(topic)["isr"]) == [0, 1, 2],
        timeout=60,
        what="the ISR to expand",
    )
    assert _leader(cluster, topic) == leader
