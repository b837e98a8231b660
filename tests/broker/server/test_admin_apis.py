"""The admin APIs against one broker, driven by real admin clients (confluent-kafka's
AdminClient over librdkafka, kafka-python's KafkaAdminClient): the answers and error
codes Kafka gives, and the effect on the log (a config applies to the partitions, new
partitions take records, deleted records are gone, also after a restart)."""

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.structs import TopicPartition as KTopicPartition

from broker.protocol import ApiKey, ErrorCode
from testkit.kafka import consume_all, create_topic, produce
from tests.broker.server.wire import WireClient, fetch_body

TIMEOUT = 30


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _error(future) -> KafkaError | None:
    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        return e.args[0]
    return None


def _overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource("TOPIC", topic)
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return {
        name: e.value
        for name, e in entries.items()
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def _incremental(admin, topic, *changes, validate_only=False):
    entries = [
        ConfigEntry(name, value, incremental_operation=getattr(AlterConfigOpType, op))
        for op, name, value in changes
    ]
    resource = ConfigResource("TOPIC", topic, incremental_configs=entries)
    futures = admin.incremental_alter_configs([resource], validate_only=validate_only)
    return _error(futures[resource])


def test_describe_cluster(broker, admin):
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert cluster.cluster_id and cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", broker.port)]


def test_incremental_alter_configs_set_append_subtract_delete(broker, admin):
    create_topic(broker.bootstrap, "conf")
    assert _incremental(admin, "conf", ("SET", "retention.ms", "3600000")) is None
    assert _overrides(admin, "conf") == {"retention.ms": "3600000"}
    assert _incremental(admin, "conf", ("APPEND", "cleanup.policy", "compact")) is None
    assert _overrides(admin, "conf")["cleanup.policy"] == "compact,delete"
    assert _incremental(admin, "conf", ("SUBTRACT", "cleanup.policy", "delete")) is None
    assert _overrides(admin, "conf")["cleanup.policy"] == "compact"
    assert (
        _incremental(
            admin, "conf", ("DELETE", "retention.ms", ""), ("DELETE", "cleanup.policy", "")
        )
        is None
    )
    assert _overrides(admin, "conf") == {}

    bad = _incremental(admin, "conf", ("SET", "retention.ms", "soon"))
    assert bad.code() == KafkaError.INVALID_CONFIG and "retention.ms" in bad.str()
    bad = _incremental(admin, "conf", ("SET", "retention.msec", "1"))
    assert bad.code() == KafkaError.INVALID_CONFIG and "retention.msec" in bad.str()
    bad = _incremental(admin, "conf", ("APPEND", "retention.ms", "1"))
    assert bad.code() == KafkaError.INVALID_CONFIG
    bad = _incremental(admin, "no-such-topic", ("SET", "retention.ms", "1"))
    assert bad.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _incremental(admin, "conf", ("SET", "retention.ms", "5"), validate_only=True) is None
    assert _overrides(admin, "conf") == {}

    broker_resource = ConfigResource(
        "BROKER",
        "0",
        incremental_configs=[
            ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    err = _error(admin.incremental_alter_configs([broker_resource])[broker_resource])
    assert err.code() == KafkaError.INVALID_CONFIG and "Set(num.partitions)" in err.str()


def test_throttled_replica_lists_are_list_topic_configs_as_in_kafka(broker, admin):
    create_topic(broker.bootstrap, "lists")
    resource = ConfigResource("TOPIC", "lists")
    entry = admin.describe_configs([resource])[resource].result(TIMEOUT)[
        "leader.replication.throttled.replicas"
    ]
    # no broker key gives it a default: no synonym, source DEFAULT_CONFIG, an empty list
    assert (entry.value, entry.source, entry.synonyms) == (
        "",
        ConfigSource.DEFAULT_CONFIG.value,
        {},
    )
    assert (
        _incremental(admin, "lists", ("SET", "leader.replication.throttled.replicas", "0:0"))
        is None
    )
    assert (
        _incremental(
            admin, "lists", ("APPEND", "leader.replication.throttled.replicas", "1:0, 0:0")
        )
        is None
    )
    assert _overrides(admin, "lists") == {"leader.replication.throttled.replicas": "0:0,1:0"}
    bad = _incremental(admin, "lists", ("SET", "follower.replication.throttled.replicas", "0-1"))
    assert bad.code() == KafkaError.INVALID_CONFIG
    assert "must be the literal '*' or a list of replicas" in bad.str()
    with WireClient(broker.port) as c:
        answer = c.request(
            ApiKey.DESCRIBE_CONFIGS,
            3,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "lists",
                        "configuration_keys": ["follower.replication.throttled.replicas"],
                    }
                ],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )
    (config,) = answer["results"][0]["configs"]
    assert (config["config_type"], config["synonyms"]) == (7, [])  # LIST


def test_a_changed_config_applies_to_the_partitions_at_once(broker, admin):
    create_topic(broker.bootstrap, "limits")
    produce(broker.bootstrap, "limits", [b"x" * 5000])
    assert _incremental(admin, "limits", ("SET", "max.message.bytes", "1000")) is None
    with pytest.raises(KafkaException, match="MSG_SIZE_TOO_LARGE"):
        produce(broker.bootstrap, "limits", [b"y" * 5000])
    assert _incremental(admin, "limits", ("DELETE", "max.message.bytes", "")) is None
    produce(broker.bootstrap, "limits", [b"z" * 5000])
    assert len(consume_all(broker.bootstrap, "limits")) == 2


def test_legacy_alter_configs_replaces_every_override(broker, admin):
    create_topic(broker.bootstrap, "legacy", config={"retention.ms": "1000", "segment.ms": "9000"})
    # kafka-python's AlterConfigs sends the topic's other overrides along (it knows
    # that AlterConfigs resets what it omits)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = KConfigResource(ConfigResourceType.TOPIC, "legacy", {"retention.bytes": "4096"})
        client.alter_configs([resource], incremental=False)
    finally:
        client.close()
    assert _overrides(admin, "legacy") == {
        "retention.ms": "1000",
        "segment.ms": "9000",
        "retention.bytes": "4096",
    }
    resource = {
        "resource_type": 2,
        "resource_name": "legacy",
        "configs": [{"name": "retention.bytes", "value": "8192"}],
    }
    with WireClient(broker.port) as wire:
        answer = wire.request(
            ApiKey.ALTER_CONFIGS, 1, {"resources": [resource], "validate_only": False}
        )
    assert answer["responses"][0]["error_code"] == 0
    assert _overrides(admin, "legacy") == {"retention.bytes": "8192"}


def test_deprecated_message_format_version_is_accepted_and_described(broker, admin):
    """librdkafka's test 0092 creates a topic with message.format.version=0.10.0:
    Kafka 3.9 takes it (deprecated since 3.0, no effect: batches stay v2), checks it is
    a version, keeps it as given and describes it, default 3.0-IV1 from
    log.message.format.version. message.downconversion.enable=false refuses a legacy
    consumer (Fetch v0-3) its down-converted answer."""
    topic = "mfv"
    create_topic(broker.bootstrap, topic, config={"message.format.version": "0.10.0"})
    resource = ConfigResource("TOPIC", topic)
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT)
    mfv = entries["message.format.version"]
    assert (mfv.value, mfv.source) == ("0.10.0", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert [(s.name, s.value) for s in mfv.synonyms.values()] == [
        ("message.format.version", "0.10.0"),
        ("log.message.format.version", "3.0-IV1"),
    ]
    down = entries["message.downconversion.enable"]
    assert (down.value, down.source) == ("true", ConfigSource.DEFAULT_CONFIG.value)
    produce(broker.bootstrap, topic, [b"still-v2"], headers=[("h", b"1")])  # headers: v2 only
    assert [m.headers() for m in consume_all(broker.bootstrap, topic)] == [[("h", b"1")]]

    changes = [
        ("SET", "message.format.version", "2.8-IV1"),
        ("SET", "message.downconversion.enable", "false"),
    ]
    assert _incremental(admin, topic, *changes) is None
    assert _overrides(admin, topic) == {
        "message.format.version": "2.8-IV1",
        "message.downconversion.enable": "false",
    }
    with WireClient(broker.port) as wire:
        legacy = wire.request(ApiKey.FETCH, 3, fetch_body(topic))
        current = wire.request(ApiKey.FETCH, 4, fetch_body(topic))
    assert legacy["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert current["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    assert len(current["responses"][0]["partitions"][0]["records"]) > 0

    bad = _incremental(admin, topic, ("SET", "message.format.version", "0.10"))
    assert bad.code() == KafkaError.INVALID_CONFIG and "message.format.version" in bad.str()
    resource = {
        "resource_type": 2,
        "resource_name": topic,
        "configs": [{"name": "message.format.version", "value": "0.11.0"}],
    }
    with WireClient(broker.port) as wire:
        altered = wire.request(
            ApiKey.ALTER_CONFIGS, 1, {"resources": [resource], "validate_only": False}
        )
        legacy = wire.request(ApiKey.FETCH, 3, fetch_body(topic))
    assert altered["responses"][0]["error_code"] == 0
    assert _overrides(admin, topic) == {"message.format.version": "0.11.0"}
    assert legacy["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


def test_create_partitions(broker, admin):
    create_topic(broker.bootstrap, "grow", 1)
    checked = admin.create_partitions([NewPartitions("grow", 3)], validate_only=True)
    assert _error(checked["grow"]) is None
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 1
    assert _error(admin.create_partitions([NewPartitions("grow", 3)])["grow"]) is None
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 3
    produce(broker.bootstrap, "grow", [b"in two"], partition=2)
    assert [m.value() for m in consume_all(broker.bootstrap, "grow", 3)] == [b"in two"]

    for count, message in ((2, "higher than the requested 2"), (3, "already has 3")):
        err = _error(admin.create_partitions([NewPartitions("grow", count)])["grow"])
        assert err.code() == KafkaError.INVALID_PARTITIONS and message in err.str()
    err = _error(admin.create_partitions([NewPartitions("grow", 4, [[7]])])["grow"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT and "7" in err.str()
    err = _error(admin.create_partitions([NewPartitions("nothing", 2)])["nothing"])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_topics_with_a_replica_assignment(broker, admin):
    """A single node takes replica lists naming itself (its id is 0), and refuses a
    broker it does not know or a count given with the lists, as Kafka does."""
    made = admin.create_topics([NewTopic("placed", 2, replica_assignment=[[0], [0]])])
    assert _error(made["placed"]) is None
    partitions = admin.list_topics("placed", timeout=10).topics["placed"].partitions
    assert sorted(partitions) == [0, 1]
    assert all(p.replicas == [0] and p.leader == 0 for p in partitions.values())

    refused = admin.create_topics([NewTopic("misplaced", 2, replica_assignment=[[0], [5]])])
    err = _error(refused["misplaced"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "Unknown broker(s) in replica assignment: 5." in err.str()
    topic = {
        "name": "counted",
        "num_partitions": 1,
        "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [0]}],
        "configs": [],
    }
    with WireClient(broker.port) as wire:
        answer = wire.request(
            ApiKey.CREATE_TOPICS, 4, {"topics": [topic], "timeout_ms": 5000, "validate_only": False}
        )
    assert answer["topics"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert set(admin.list_topics(timeout=10).topics) >= {"placed"}
    assert not {"misplaced", "counted"} & set(admin.list_topics(timeout=10).topics)


def _earliest(admin, topic: str, partition: int = 0) -> int:
    tp = TopicPartition(topic, partition)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(TIMEOUT).offset


def test_delete_records_moves_the_log_start_and_survives_a_restart(broker, admin):
    create_topic(broker.bootstrap, "trim")
    produce(broker.bootstrap, "trim", [b"r%d" % i for i in range(10)])
    tp = TopicPartition("trim", 0, 4)
    low = admin.delete_records([tp])[tp].result(TIMEOUT)
    assert low.low_watermark == 4
    assert _earliest(admin, "trim") == 4
    assert [m.value() for m in consume_all(broker.bootstrap, "trim")] == [
        b"r%d" % i for i in range(4, 10)
    ]
    beyond = TopicPartition("trim", 0, 11)
    assert _error(admin.delete_records([beyond])[beyond]).code() == KafkaError.OFFSET_OUT_OF_RANGE

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _earliest(admin, "trim") == 4
    everything = TopicPartition("trim", 0, -1)  # -1: up to the high watermark
    assert admin.delete_records([everything])[everything].result(TIMEOUT).low_watermark == 10
    assert _earliest(admin, "trim") == 10


def test_delete_records_refused_on_a_compacted_topic(broker, admin):
    create_topic(broker.bootstrap, "kept", config={"cleanup.policy": "compact"})
    produce(broker.bootstrap, "kept", [b"v"], key=b"k")
    tp = TopicPartition("kept", 0, 1)
    err = _error(admin.delete_records([tp])[tp])
    assert err.code() == KafkaError.POLICY_VIOLATION


def test_delete_groups_and_offsets(broker, admin):
    create_topic(broker.bootstrap, "g1")
    create_topic(broker.bootstrap, "g2")
    produce(broker.bootstrap, "g1", [b"a"])
    produce(broker.bootstrap, "g2", [b"b"])
    idle = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "idle"})
    idle.commit(
        offsets=[TopicPartition("g1", 0, 1), TopicPartition("g2", 0, 1)], asynchronous=False
    )
    idle.close()
    live = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "live", "auto.offset.reset": "earliest"}
    )
    live.subscribe(["g1"])
    try:
        while live.poll(1) is None or not live.assignment():
            pass
        live.commit(offsets=[TopicPartition("g1", 0, 1)], asynchronous=False)
        live.commit(offsets=[TopicPartition("g2", 0, 1)], asynchronous=False)

        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            result = client.delete_group_offsets(
                "live", [KTopicPartition("g1", 0), KTopicPartition("g2", 0)]
            )
        finally:
            client.close()
        codes = {tp.topic: err.errno for tp, err in result.items()}
        assert codes == {"g1": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "g2": ErrorCode.NONE}

        futures = admin.delete_consumer_groups(["idle", "live", "never"])
        assert _error(futures["idle"]) is None
        assert _error(futures["live"]).code() == KafkaError.NON_EMPTY_GROUP
        assert _error(futures["never"]).code() == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        live.close()
    listed = admin.list_consumer_groups().result(TIMEOUT).valid
    assert {g.group_id: g.state for g in listed} == {"live": ConsumerGroupState.EMPTY}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("live")])
    offsets = offsets["live"].result(TIMEOUT)
    assert [(tp.topic, tp.offset) for tp in offsets.topic_partitions] == [("g1", 1)]


def test_elect_leaders_on_one_node_is_never_needed(broker, admin):
    create_topic(broker.bootstrap, "led", 2)
    result = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition("led", 0), TopicPartition("led", 9)]
    ).result(TIMEOUT)
    codes = {(tp.topic, tp.partition): (e.code() if e else None) for tp, e in result.items()}
    assert codes == {
        ("led", 0): KafkaError.ELECTION_NOT_NEEDED,
        ("led", 9): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }


def test_describe_log_dirs(broker):
    create_topic(broker.bootstrap, "sized", 2)
    produce(broker.bootstrap, "sized", [b"x" * 1000] * 5, partition=1)
    with WireClient(broker.port) as client:
        answer = client.request(
            ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": "sized", "partitions": [0, 1]}]}
        )
    (result,) = answer["results"]
    assert result["error_code"] == 0 and result["log_dir"] == str(broker.data_dir.resolve())
    assert result["total_bytes"] > result["usable_bytes"] > 0
    (topic,) = result["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 5000
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = client.describe_log_dirs()
    finally:
        client.close()
    assert "sized" in str(described)
