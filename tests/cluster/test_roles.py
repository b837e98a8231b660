"""Leadership changes: a frozen leader is fenced, groups survive coordinator failover,
controlled shutdown moves leaders without errors and preferred leaders come back."""

import signal
import threading

from confluent_kafka import Consumer, TopicPartition

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import WireClient, batch, produce_body
from tests.cluster.util import consume_all, create_topic, producer, wait_until


def test_frozen_leader_is_replaced_fenced_and_truncated(cluster_factory):
    # Rebalance on: the frozen leader is the preferred one and gets leadership back.
    cluster = cluster_factory(settings={"auto.leader.rebalance.enable": "true"})
    topic = "frozen"
    create_topic(cluster, topic)
    p = producer(cluster, acks="all", **{"enable.idempotence": True})
    for i in range(50):
        p.produce(topic, f"a{i}".encode())
    assert p.flush(20) == 0
    old = cluster.zk.state(topic)["leader"]
    old_proc = cluster.brokers[old]
    client = WireClient(old_proc.port, timeout=30)
    old_proc.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: cluster.zk.state(topic)["leader"] not in (-1, old), what="a new leader")
        # A write queued on the deposed leader's socket while it is frozen.
        client.send(ApiKey.PRODUCE, 7, produce_body(topic, batch(b"divergent"), acks=-1))
        p2 = producer(cluster, acks="all", **{"enable.idempotence": True})
        errors = []
        for i in range(50):
            p2.produce(topic, f"b{i}".encode(), callback=lambda e, m: e and errors.append(e))
        assert p2.flush(30) == 0 and errors == []
    finally:
        old_proc.proc.send_signal(signal.SIGCONT)
    try:
        _, resp = client.recv(ApiKey.PRODUCE, 7)
        code = resp["responses"][0]["partition_responses"][0]["error_code"]
    except ConnectionError:  # fenced on waking up (its lease ran out): clients dropped
        code = None
    client.close()
    assert code != ErrorCode.NONE, "a deposed leader acknowledged an acks=all write"
    wait_until(lambda: sorted(cluster.zk.state(topic)["isr"]) == [0, 1, 2], what="rejoin")
    wait_until(lambda: cluster.zk.state(topic)["leader"] == old, what="the preferred leader back")
    values = consume_all(cluster, topic, 100)
    assert b"divergent" not in values
    assert values == [f"a{i}".encode() for i in range(50)] + [f"b{i}".encode() for i in range(50)]
    assert "truncating from" in old_proc.log_text() or "divergent" not in old_proc.log_text()


def test_group_keeps_offsets_across_coordinator_failover(cluster_factory):
    cluster = cluster_factory()
    topic = "grouped"
    create_topic(cluster, topic)
    p = producer(cluster, acks="all")
    for i in range(100):
        p.produce(topic, str(i).encode())
    assert p.flush(20) == 0

    def consumer():
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "g1",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        c.subscribe([topic])
        return c

    c = consumer()
    seen = []
    while len(seen) < 50:
        msg = c.poll(1)
        if msg is not None and not msg.error():
            seen.append(int(msg.value()))
            c.commit(msg, asynchronous=False)
    states = [cluster.zk.state("__consumer_offsets", i) for i in range(3)]
    coordinators = {s["leader"] for s in states}
    victim = next(iter(coordinators))
    cluster.brokers[victim].kill()
    while len(seen) < 100:
        msg = c.poll(1)
        if msg is not None and not msg.error():
            seen.append(int(msg.value()))
            try:
                c.commit(msg, asynchronous=False)
            except Exception:
                pass
    committed = c.committed([TopicPartition(topic, 0)], timeout=20)
    c.close()
    assert seen == list(range(100))
    assert committed[0].offset == 100
    cluster.brokers[victim].start()


def test_controlled_shutdown_and_preferred_leader_return(cluster_factory):
    cluster = cluster_factory()
    topic = "graceful"
    create_topic(cluster, topic)
    preferred = cluster.zk.state(topic)["leader"]
    errors = []
    acked = []
    stop = threading.Event()

    def produce_loop():
        p = producer(cluster, acks="all", **{"enable.idempotence": True})
        while not stop.is_set():
            p.produce(
                topic,
                b"x",
                callback=lambda err, m: errors.append(err) if err else acked.append(1),
            )
            p.poll(0.002)
        p.flush(30)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    try:
        wait_until(lambda: len(acked) > 100, what="acks")
        assert cluster.brokers[preferred].stop() == 0
        assert cluster.zk.state(topic)["leader"] not in (-1, preferred)
        before = len(acked)
        wait_until(lambda: len(acked) > before + 100, what="acks from the new leader")
        cluster.brokers[preferred].start()
        wait_until(
            lambda: cluster.zk.state(topic)["leader"] == preferred,
            timeout=40,
            what="the preferred leader to come back",
        )
    finally:
        stop.set()
        thread.join(60)
    assert errors == []


def test_producer_ids_are_unique_across_brokers(cluster_factory):
    """Every broker answers InitProducerId; two brokers must never hand out one id (a
    second producer's batches would pass for retries of the first one's and be
    acknowledged without being written)."""
    cluster = cluster_factory(count=2)
    ids = []
    for b in (*cluster.brokers.values(), *cluster.brokers.values()):
        with WireClient(b.port) as client:
            resp = client.request(ApiKey.INIT_PRODUCER_ID, 1, _init_pid_body())
        assert resp["error_code"] == ErrorCode.NONE
        ids.append(resp["producer_id"])
    assert len(set(ids)) == len(ids), ids


def _init_pid_body() -> dict:
    return {"transactional_id": None, "transaction_timeout_ms": 60000}
