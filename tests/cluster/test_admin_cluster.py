"""The admin APIs on a three-broker cluster: a change made through any broker reaches
every broker (configs, partitions), deleted records stay deleted on the followers
(a follower that becomes leader starts where the old leader did), and ElectLeaders
gives leadership back to the preferred replica. CreateTopics answers once the
topic is served as created, also when an auto-creation races it, and takes replica
lists naming the cluster's brokers."""

import threading

import pytest
from confluent_kafka import (
    ElectionType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import WireClient
from tests.cluster.util import create_topic, producer, wait_until

TIMEOUT = 30


def _one_broker_admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _retention_seen_by(broker, topic: str) -> str | None:
    with WireClient(broker.port) as client:
        answer = client.request(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": topic,
                        "configuration_keys": ["retention.ms"],
                    }
                ],
                "include_synonyms": False,
            },
        )
    (entry,) = answer["results"][0]["configs"]
    return entry["value"] if entry["config_source"] == 1 else None


def _partitions_seen_by(broker, topic: str) -> list[int]:
    with WireClient(broker.port) as client:
        answer = client.request(ApiKey.METADATA, 1, {"topics": [{"name": topic}]})
    return sorted(p["leader_id"] for p in answer["topics"][0]["partitions"])


def _produce(cluster, topic: str, values: list[bytes], partition: int = 0) -> None:
    p = producer(cluster, acks="all")
    errors = []
    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(TIMEOUT) == 0 and errors == []


def test_config_and_partition_changes_reach_every_broker(cluster_factory):
    cluster = cluster_factory(3)
    create_topic(cluster, "shared", 1, 3)
    first, *others = cluster.brokers.values()
    entry = ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("TOPIC", "shared", incremental_configs=[entry])
    admin = _one_broker_admin(first)  # kept: a collected client cancels its requests
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    for b in cluster.brokers.values():
        wait_until(
            lambda b=b: _retention_seen_by(b, "shared") == "7200000",
            what=f"broker {b.port} to see the new retention.ms",
        )

    admin = _one_broker_admin(others[-1])
    admin.create_partitions([NewPartitions("shared", 4)])["shared"].result(TIMEOUT)
    for b in cluster.brokers.values():
        wait_until(
            lambda b=b: len(leaders := _partitions_seen_by(b, "shared")) == 4 and min(leaders) >= 0,
            what=f"broker {b.port} to see 4 led partitions",
        )
    assignments = [cluster.zk.assignment("shared", p) for p in range(4)]
    assert all(len(set(a)) == 3 for a in assignments)
    _produce(cluster, "shared", [b"new partition"], partition=3)


def test_deleted_records_stay_deleted_after_the_leader_changes(cluster_factory):
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "trimmed", 1, 3)
    _produce(cluster, "trimmed", [b"r%d" % i for i in range(20)])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("trimmed", 0, 12)
    assert admin.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 12
    _produce(cluster, "trimmed", [b"after"])  # a fetch round carries the new log start
    leader = cluster.zk.state("trimmed")["leader"]
    cluster.brokers[leader].stop()
    wait_until(
        lambda: cluster.zk.state("trimmed")["leader"] not in (-1, leader),
        what="another broker to lead trimmed-0",
    )
    new_leader = cluster.brokers[cluster.zk.state("trimmed")["leader"]]
    request = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": "trimmed", "partitions": [{"partition_index": 0, "timestamp": -2}]}],
    }

    def earliest():
        with WireClient(new_leader.port) as client:
            answer = client.request(ApiKey.LIST_OFFSETS, 1, request)
        part = answer["topics"][0]["partitions"][0]
        return part["offset"] if part["error_code"] == 0 else None

    wait_until(lambda: earliest() is not None, what="the new leader to answer")
    assert earliest() == 12


def test_elect_leaders_gives_leadership_back_to_the_preferred_replica(cluster_factory):
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "elected", 1, 3)
    preferred = cluster.zk.assignment("elected")[0]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("elected", 0)
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(TIMEOUT)
    assert result[tp].code() == KafkaError.ELECTION_NOT_NEEDED

    cluster.brokers[preferred].restart()  # a new leader while it was away
    wait_until(
        lambda: (s := cluster.zk.state("elected"))["leader"] != preferred and len(s["isr"]) == 3,
        what="another leader and the preferred replica back in the ISR",
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(TIMEOUT)
    assert result[tp] is None
    assert cluster.zk.state("elected")["leader"] == preferred
    _produce(cluster, "elected", [b"after the election"])

    follower = next(b for i, b in cluster.brokers.items() if i != cluster.zk.controller())
    with WireClient(follower.port) as client:
        answer = client.request(
            ApiKey.ELECT_LEADERS,
            2,
            {
                "election_type": 0,
                "topic_partitions": [{"topic": "elected", "partitions": [0]}],
                "timeout_ms": 5000,
            },
        )
    (result,) = answer["replica_election_results"]
    assert result["partition_result"][0]["error_code"] == ErrorCode.NOT_CONTROLLER


def _create_request(name: str, partitions: int) -> dict:
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 3,
        "assignments": [],
        "configs": [],
    }
    return {"topics": [topic], "timeout_ms": 10000, "validate_only": False}


def test_create_topics_answers_when_the_topic_is_served_as_created(cluster_factory):
    """Each broker in turn creates a 4-partition topic; the moment it answers, it
    serves the topic with 4 led partitions (it used to answer before ZooKeeper had
    it, and an auto-creation by another broker could make a 1-partition topic)."""
    cluster = cluster_factory(3)
    brokers = list(cluster.brokers.values())
    for i in range(6):
        creator, racer = brokers[i % 3], brokers[(i + 1) % 3]
        name = f"made{i}"
        auto = threading.Thread(target=_partitions_seen_by, args=(racer, name))  # auto-creates
        with WireClient(creator.port) as client:
            auto.start()
            answer = client.request(ApiKey.CREATE_TOPICS, 4, _create_request(name, 4))
            code = answer["topics"][0]["error_code"]
            seen = client.request(ApiKey.METADATA, 1, {"topics": [{"name": name}]})
        auto.join()
        assert code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
        want = 4 if code == ErrorCode.NONE else 1
        wait_until(
            lambda n=name, w=want: cluster.zk.partition_count(n) == w,
            what=f"{name} to have {want} partition(s) in ZooKeeper",
        )
        if code == ErrorCode.NONE:
            (topic,) = seen["topics"]
            assert topic["error_code"] == 0
            assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2, 3]
            assert min(p["leader_id"] for p in topic["partitions"]) >= 0

    with WireClient(brokers[0].port) as client:
        again = client.request(ApiKey.CREATE_TOPICS, 4, _create_request("made0", 2))
    assert again["topics"][0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS


# Partition fields compared apart: no ELR here, and Metadata's error code for a
# leaderless partition is one DescribeTopicPartitions does not set.
_NOT_IN_METADATA = ("eligible_leader_replicas", "last_known_elr", "error_code")


def _described_partitions(broker, topic: str, limit: int) -> list[dict]:
    """`topic`'s partitions as DescribeTopicPartitions pages them from `broker`,
    following the cursor; without the fields Metadata has no equivalent of."""
    partitions: list[dict] = []
    cursor = None
    with WireClient(broker.port) as client:
        while True:
            body = {"topics": [{"name": topic}], "response_partition_limit": limit}
            answer = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body | {"cursor": cursor})
            (entry,) = answer["topics"]
            assert entry["error_code"] == ErrorCode.NONE
            for p in entry["partitions"]:
                assert p["eligible_leader_replicas"] == [] and p["last_known_elr"] == []
                assert p["error_code"] == ErrorCode.NONE
                partitions.append({k: v for k, v in p.items() if k not in _NOT_IN_METADATA})
            cursor = answer["next_cursor"]
            if cursor is None:
                return partitions


def _metadata_partitions(broker, topic: str) -> list[dict]:
    with WireClient(broker.port) as client:
        answer = client.request(
            ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}]}
        )
    (entry,) = answer["topics"]
    return [
        {k: v for k, v in p.items() if k != "error_code"}
        for p in sorted(entry["partitions"], key=lambda p: p["partition_index"])
    ]


def test_describe_topic_partitions_agrees_with_metadata_on_every_broker(cluster_factory):
    """Leaders, epochs, replicas, ISR and offline replicas, paged 4 at a time: the
    same as each broker's Metadata, with all three brokers up and after one died
    (its partitions led elsewhere, it left every ISR and shows as offline)."""
    cluster = cluster_factory(3)
    create_topic(cluster, "dtp-c", partitions=6)
    for broker in cluster.brokers.values():
        described = _described_partitions(broker, "dtp-c", 4)
        assert [p["partition_index"] for p in described] == list(range(6))
        assert described == _metadata_partitions(broker, "dtp-c")
        assert all(sorted(p["isr_nodes"]) == [0, 1, 2] for p in described)

    cluster.brokers[2].kill()
    for broker in (cluster.brokers[0], cluster.brokers[1]):

        def settled(b=broker) -> bool:
            described = _described_partitions(b, "dtp-c", 4)
            return described == _metadata_partitions(b, "dtp-c") and all(
                p["leader_id"] in (0, 1)
                and 2 not in p["isr_nodes"]
                and p["offline_replicas"] == [2]
                for p in described
            )

        wait_until(settled, what=f"broker {broker.port} to describe dtp-c without broker 2")


def test_create_topics_with_a_replica_assignment_over_the_cluster(cluster_factory):
    """Replica lists naming the brokers of the cluster make the topic as given (each
    partition's replicas in the given order, its first replica leading); a broker
    the cluster does not have is refused, as Kafka does."""
    cluster = cluster_factory(3)
    ids = sorted(cluster.brokers)
    given = [[ids[1], ids[2], ids[0]], ids]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    made = admin.create_topics([NewTopic("placed", 2, replica_assignment=given)])
    made["placed"].result(TIMEOUT)
    assert [cluster.zk.assignment("placed", p) for p in range(2)] == given

    def described():
        futures = admin.describe_topics(TopicCollection(["placed"]))
        partitions = futures["placed"].result(TIMEOUT).partitions
        return [
            ([r.id for r in p.replicas], p.leader.id if p.leader is not None else -1)
            for p in sorted(partitions, key=lambda p: p.id)
        ]

    wait_until(
        lambda: described() == [(replicas, replicas[0]) for replicas in given],
        what="placed's partitions described with the given replicas, led by the first",
    )

    unknown = max(ids) + 10
    refused = admin.create_topics(
        [NewTopic("misplaced", 1, replica_assignment=[[ids[0], unknown]])]
    )
    with pytest.raises(KafkaException) as caught:
        refused["misplaced"].result(TIMEOUT)
    error = caught.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert f"Unknown broker(s) in replica assignment: {unknown}." in error.str()
    assert "misplaced" not in admin.list_topics(timeout=10).topics
