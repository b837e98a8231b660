"""The consumer group protocol (KIP-848) in a 3-broker cluster with confluent-kafka
(`group.protocol=consumer`): the coordinator is SIGKILLed while members consume; the
next leader of the group's `__consumer_offsets` partition resumes the group from its
records (same group epoch, members carrying on) and its committed offsets, and
every record is consumed exactly once while members join and leave."""

from __future__ import annotations

import threading

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.protocol import ApiKey
from broker.protocol.client import BlockingClient
from tests.broker.groups.consumer.members import Member, wait_until
from tests.cluster.util import create_topic, producer

SETTINGS = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 20000,
}


def produce(cluster, topic: str, values: range) -> None:
    p = producer(cluster, acks="all")
    for i in values:
        p.produce(topic, b"%d" % i, partition=i % 6)
    assert p.flush(60) == 0


def describe(admin: AdminClient, group: str):
    return admin.describe_consumer_groups([group])[group].result(30)


def group_epochs(cluster, broker_id: int, group: str) -> tuple[int, dict[str, int]]:
    """ConsumerGroupDescribe at the coordinator: the group epoch and each client's
    member epoch."""
    with BlockingClient("127.0.0.1", cluster.brokers[broker_id].port) as client:
        body = {"group_ids": [group], "include_authorized_operations": False}
        (g,) = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, body)["groups"]
    assert g["error_code"] == 0, g
    return g["group_epoch"], {m["client_id"]: m["member_epoch"] for m in g["members"]}


def test_coordinator_kill_keeps_epoch_assignments_and_offsets(cluster_factory):
    cluster = cluster_factory(3, settings=SETTINGS)
    create_topic(cluster, "kip848", partitions=6)
    produce(cluster, "kip848", range(600))
    members = [Member(cluster.bootstrap, "kip848-g", ["kip848"], f"m{i}") for i in range(3)]

    def consumed() -> list[bytes]:
        return [r[3] for m in members for r in m.records]

    wait_until(lambda: len(consumed()) >= 600, what="the first 600 records")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # the first member may read all 600 before the others have joined
    wait_until(lambda: len(describe(admin, "kip848-g").members) == 3, what="three members")
    before = describe(admin, "kip848-g")
    assert before.type.name == "CONSUMER" and len(before.members) == 3
    victim = before.coordinator.id
    wait_until(
        lambda: len(set(group_epochs(cluster, victim, "kip848-g")[1].values())) == 1,
        what="every member at the group epoch",
    )
    epoch, member_epochs = group_epochs(cluster, victim, "kip848-g")
    cluster.brokers[victim].kill()

    def moved():
        try:
            d = describe(admin, "kip848-g")
        except Exception:
            return None
        return d if d.coordinator.id != victim else None

    wait_until(lambda: moved() is not None, what="another broker to coordinate the group")
    after = moved()
    # the group was resumed from its records, not formed anew: same members, epochs
    assert {m.client_id for m in after.members} == set(member_epochs)
    assert group_epochs(cluster, after.coordinator.id, "kip848-g") == (epoch, member_epochs)
    # members join and leave the resumed group while a producer writes
    writer = threading.Thread(target=produce, args=(cluster, "kip848", range(600, 1200)))
    writer.start()
    members += [Member(cluster.bootstrap, "kip848-g", ["kip848"], f"m{i}") for i in (3, 4)]
    members[1].close()
    writer.join(120)
    wait_until(lambda: len(consumed()) >= 1200, what="the records written after the kill")
    for m in members:
        if m is not members[1]:
            m.close()
    values = consumed()
    assert sorted(int(v) for v in values) == list(range(1200))
    assert len(values) == 1200
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("kip848-g", [TopicPartition("kip848", p) for p in range(6)])]
    )["kip848-g"].result(30)
    assert sum(tp.offset for tp in committed.topic_partitions) == 1200
