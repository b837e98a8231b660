"""Share groups (KIP-932) in a 3-broker cluster: the share-partition's state is
written to `__share_group_state` (RF 3, min.insync.replicas 2) before an
acknowledgement is answered, so it survives the SIGKILL of the broker leading the
data partition: the new leader loads it, no accepted record is delivered again, and
the records produced before the kill but not yet delivered are (a share-partition
started afresh would begin at the high watermark, past them).
"""

import time

from confluent_kafka import AcknowledgeType

from tests.broker.share.test_share_consumers import poll_data, produce, share_consumer, warm_up
from tests.cluster.util import create_topic, producer, wait_until

SHARE = {
    "share.coordinator.state.topic.num.partitions": 3,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    "group.share.record.lock.duration.ms": 5000,
}


def _leader(cluster, topic):
    state = cluster.zk.state(topic)
    return state["leader"] if state else -1


def _consume(consumer, want: set[bytes], seen: list, timeout_s: float = 90) -> None:
    """Poll, accept and commit until every value of `want` was seen."""
    deadline = time.monotonic() + timeout_s
    while not want <= {m[0] for m in seen}:
        assert time.monotonic() < deadline, (sorted(want - {m[0] for m in seen}), len(seen))
        for message in poll_data(consumer, explicit=True):
            seen.append((message.value(), message.delivery_count()))
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        results = consumer.commit_sync(30)
        assert all(err is None for err in results.values()), results


def test_share_state_survives_the_kill_of_the_partition_leader(cluster_factory):
    cluster = cluster_factory(settings=SHARE)
    create_topic(cluster, "shared")
    p = producer(cluster, acks="all", **{"enable.idempotence": True})
    consumer = share_consumer(cluster.bootstrap, "sg-failover", "shared", explicit=True)
    warm = []

    def got_warm() -> bool:
        for message in consumer.poll(0.5):
            if message.error() is None:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                warm.append(message)
        return bool(warm)

    warm_up(p, "shared", got_warm, deadline_s=120)
    before = [b"before-%d" % i for i in range(30)]
    produce(p, "shared", before)
    seen: list = []
    _consume(consumer, set(before), seen)

    pending = [b"pending-%d" % i for i in range(30)]
    produce(p, "shared", pending)  # acks=all: on every replica, not delivered yet
    victim = _leader(cluster, "shared")
    cluster.brokers[victim].kill()
    wait_until(lambda: _leader(cluster, "shared") not in (-1, victim), what="a new leader")
    after = [b"after-%d" % i for i in range(30)]
    produce(p, "shared", after)
    seen_after: list = []
    _consume(consumer, set(pending) | set(after), seen_after, timeout_s=120)
    consumer.close()

    redelivered = [value for value, _ in seen_after if value.startswith(b"before")]
    assert redelivered == [], redelivered
    assert sorted(v for v, _ in seen if v.startswith(b"before")) == sorted(before)
    assert {v for v, _ in seen_after} == set(pending) | set(after)
