"""Share groups (KIP-932) in a 3-broker cluster: the share-partition's state is
written to `__share_group_state` (RF 3, min.insync.replicas 2) before an
acknowledgement is answered, so it survives the SIGKILL of the broker leading the
data partition: the new leader loads it, no accepted record is delivered again, and
the records produced before the kill but not yet delivered are (a share-partition
started afresh would begin at the high watermark, past them). A start offset reset
by AlterShareGroupOffsets survives the SIGKILL of its share coordinator, and a share
group its group coordinator's (its records in `__consumer_offsets`).
"""

import json
import time

from confluent_kafka import AcknowledgeType

from broker.groups.offsets_topic import partition_for
from broker.protocol import ApiKey
from broker.share.state_store import state_partition
from common.topic_names import CONSUMER_OFFSETS, SHARE_GROUP_STATE
from tests.broker.server.wire import WireClient
from tests.broker.share.test_share_consumers import poll_data, produce, share_consumer, warm_up
from tests.cluster.util import create_topic, producer, wait_until
from tests.logflume.test_commands_clients import lf

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


def test_a_reset_start_offset_survives_the_kill_of_its_share_coordinator(cluster_factory):
    """AlterShareGroupOffsets (`logflume groups --reset-offsets`) writes the new start
    offset to `__share_group_state` with acks=all: after the SIGKILL of the broker
    leading the state's partition (the share coordinator), the next share consumer
    still starts at the reset offset and gets every record again."""
    cluster = cluster_factory(
        settings=SHARE
        | {"group.share.session.timeout.ms": 6000, "group.share.heartbeat.interval.ms": 1000}
    )
    create_topic(cluster, "reset-kept")
    p = producer(cluster, acks="all", **{"enable.idempotence": True})
    consumer = share_consumer(cluster.bootstrap, "sg-reset-kept", "reset-kept", explicit=True)
    warm: list = []

    def got_warm() -> bool:
        for message in consumer.poll(0.5):
            if message.error() is None:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                warm.append(message)
        return bool(warm)

    warm_up(p, "reset-kept", got_warm, deadline_s=120)
    records = [b"rec-%d" % i for i in range(20)]
    produce(p, "reset-kept", records)
    _consume(consumer, set(records), [])
    consumer.close()

    def reset() -> bool:
        r = lf(
            "groups", "--bootstrap-server", cluster.bootstrap, "--reset-offsets",
            "--group", "sg-reset-kept", "--topic", "reset-kept", "--to-earliest", "--execute",
        )  # fmt: skip
        return r.returncode == 0  # refused while the group still has its member

    wait_until(reset, what="the reset of the emptied share group", timeout=60, every=1.0)
    broker = next(iter(cluster.brokers.values()))
    with WireClient(broker.port) as client:
        meta = client.request(
            ApiKey.METADATA, 12, {"topics": [{"name": "reset-kept", "topic_id": None}]}
        )
    topic_id = meta["topics"][0]["topic_id"]
    state_index = state_partition("sg-reset-kept", topic_id.hex, 0, 3)
    victim = cluster.zk.state(SHARE_GROUP_STATE, state_index)["leader"]
    cluster.brokers[victim].kill()
    wait_until(
        lambda: (
            (cluster.zk.state(SHARE_GROUP_STATE, state_index) or {}).get("leader")
            not in (-1, victim)
        ),
        what="a new share coordinator",
    )
    again = share_consumer(cluster.bootstrap, "sg-reset-kept", "reset-kept", explicit=True)
    seen: list = []
    _consume(again, set(records), seen, timeout_s=120)
    again.close()
    assert {v for v, _ in seen} >= set(records)


def _describe(cluster, group: str):
    return lf("groups", "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group,
              "--output", "json")  # fmt: skip


def _share_offsets(cluster, group: str) -> dict[int, int] | None:
    """`logflume groups --describe` of a share group: partition -> start offset
    (None: the command failed, e.g. no coordinator yet or no such group)."""
    r = _describe(cluster, group)
    if r.returncode != 0:
        return None
    return {row["partition"]: row["start_offset"] for row in json.loads(r.stdout)}


def test_an_empty_share_group_survives_the_kill_of_its_coordinator(cluster_factory):
    """A share group's records in `__consumer_offsets` (Kafka's share group records)
    let the next leader of its partition coordinate it: after the SIGKILL of the
    coordinator, the emptied group is listed and described with its start offsets,
    and DeleteGroups deletes it with its durable state, so that a group created
    again under its id starts afresh (at the high watermark, past the records left
    undelivered before the deletion)."""
    cluster = cluster_factory(
        settings=SHARE
        | {"group.share.session.timeout.ms": 6000, "group.share.heartbeat.interval.ms": 1000}
    )
    group = "sg-moved"
    create_topic(cluster, "moved")
    p = producer(cluster, acks="all", **{"enable.idempotence": True})
    consumer = share_consumer(cluster.bootstrap, group, "moved", explicit=True)
    warm: list = []

    def got_warm() -> bool:
        for message in consumer.poll(0.5):
            if message.error() is None:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                warm.append(message)
        return bool(warm)

    warm_up(p, "moved", got_warm, deadline_s=120)
    records = [b"rec-%d" % i for i in range(20)]
    produce(p, "moved", records)
    _consume(consumer, set(records), [])
    consumer.close()
    produce(p, "moved", [b"left-%d" % i for i in range(10)])  # never delivered to the group

    def emptied() -> bool:
        r = lf("groups", "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group,
               "--state", "--output", "json")  # fmt: skip
        return r.returncode == 0 and json.loads(r.stdout)[0]["state"] == "Empty"

    wait_until(emptied, what="the share group emptied", timeout=60, every=1.0)
    before = _share_offsets(cluster, group)
    assert before is not None and set(before) == {0} and before[0] > len(records), before

    index = partition_for(group, 3)  # offsets.topic.num.partitions of the cluster tests
    victim = cluster.zk.state(CONSUMER_OFFSETS, index)["leader"]
    cluster.brokers[victim].kill()
    wait_until(
        lambda: (cluster.zk.state(CONSUMER_OFFSETS, index) or {}).get("leader") not in (-1, victim),
        what="a new coordinator of the share group",
    )
    wait_until(
        lambda: _share_offsets(cluster, group) == before,
        what=lambda: f"the new coordinator describing {before}: {_describe(cluster, group)}",
        timeout=60,
        every=1.0,
    )
    listed = lf("groups", "--bootstrap-server", cluster.bootstrap, "--list")
    assert group in listed.stdout.decode().split(), listed

    deleted = lf("groups", "--bootstrap-server", cluster.bootstrap, "--delete", "--group", group)
    assert deleted.returncode == 0, deleted
    gone = lf("groups", "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group)
    assert gone.returncode != 0 and b"does not exist" in gone.stdout + gone.stderr, gone

    again = share_consumer(cluster.bootstrap, group, "moved", explicit=True)
    seen: list = []

    def got_fresh() -> bool:
        for message in again.poll(0.5):
            if message.error() is None:
                again.acknowledge(message, AcknowledgeType.ACCEPT)
                seen.append(message.value())
        return b"warm" in seen

    warm_up(p, "moved", got_fresh, deadline_s=120)
    again.commit_sync(30)
    again.close()
    assert not [v for v in seen if v.startswith((b"left", b"rec"))], seen
