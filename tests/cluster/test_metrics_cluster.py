"""Replication metrics of a 3-broker cluster: a follower frozen with SIGSTOP drops out
of the ISR and its leader reports the partition under-replicated (and under min ISR
when min.insync.replicas is 3); after SIGCONT it catches up and both go back to 0."""

import signal

from common.ports import free_port
from testkit.scrape import scrape
from tests.cluster.util import create_topic, producer, wait_until

TOPIC = "watched"


def test_under_replicated_follows_a_paused_follower(cluster_factory):
    ports = {i: free_port() for i in range(3)}
    cluster = cluster_factory(
        settings={"min.insync.replicas": 3},
        per_broker=lambda i: {"metrics.listen": f"127.0.0.1:{ports[i]}"},
    )
    create_topic(cluster, TOPIC)
    p = producer(cluster)
    for i in range(100):
        p.produce(TOPIC, b"%d" % i)
    assert p.flush(30) == 0
    leader = cluster.zk.state(TOPIC)["leader"]
    follower = next(i for i in cluster.zk.assignment(TOPIC) if i != leader)
    controller = cluster.zk.controller()

    def leader_metric(name):
        return scrape(ports[leader]).get(name)

    samples = {i: scrape(ports[i]) for i in range(3)}
    assert [samples[i].get("logflume_broker_active_controller") for i in range(3)] == [
        float(i == controller) for i in range(3)
    ]
    assert samples[controller].get("logflume_broker_offline_partitions") == 0
    assert samples[leader].get("logflume_broker_under_replicated_partitions") == 0
    assert samples[leader].get("logflume_broker_messages_in_total", topic=TOPIC) == 100
    for i in set(range(3)) - {leader}:
        wait_until(
            lambda i=i: (
                scrape(ports[i]).get("logflume_broker_replication_bytes_in_total", topic=TOPIC)
                == samples[leader].get("logflume_broker_bytes_in_total", topic=TOPIC)
            ),
            what=f"broker {i} to have replicated every byte of {TOPIC}",
        )
    shrinks = leader_metric("logflume_broker_isr_shrinks_total")
    expands = leader_metric("logflume_broker_isr_expands_total")

    paused = cluster.brokers[follower].proc
    paused.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: leader_metric("logflume_broker_under_replicated_partitions") >= 1,
            what="the leader to report an under-replicated partition",
        )
        assert leader_metric("logflume_broker_under_min_isr_partitions") >= 1
        assert leader_metric("logflume_broker_isr_shrinks_total") > shrinks
    finally:
        paused.send_signal(signal.SIGCONT)
    wait_until(
        lambda: leader_metric("logflume_broker_under_replicated_partitions") == 0,
        timeout=60,
        what="the leader to report every partition fully replicated again",
    )
    assert leader_metric("logflume_broker_under_min_isr_partitions") == 0
    assert leader_metric("logflume_broker_isr_expands_total") > expands
