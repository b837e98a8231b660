"""Authorization decided exactly as Kafka's KafkaApis decides it, where the broker
once allowed what Kafka forbids (an OffsetCommit without READ, appends to internal
topics), refused what Kafka allows (DescribeCluster, OffsetForLeaderEpoch, an admin
writing markers, the brokers' AddPartitionsToTxn v4) or told more than Kafka tells
(DescribeTransactions, DeleteTopics, CreateTopics). On the broker of
tests/interop/acl_env.py, with confluent-kafka where it speaks the request and the
broker's own wire client where the exact answer matters."""

import uuid

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import batch, produce_body
from tests.interop.acl_env import conf, end_offset, grant, wire
from tests.logflume.test_commands_clients import lf

ALLOW = AclPermissionType.ALLOW
LITERAL = ResourcePatternType.LITERAL
NO_ID = uuid.UUID(int=0)


def _acl(rtype, name, user, op, pattern=LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, ALLOW)


def _committed(env, group: str, topic: str) -> int:
    admin = AdminClient(conf(env, "admin"))
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    answer = admin.list_consumer_group_offsets([request])[group].result(10)
    return answer.topic_partitions[0].offset


def test_offset_commit_without_read_on_the_group_stores_nothing(acl):
    """Kafka's answer to a caller with DESCRIBE only: GROUP_AUTHORIZATION_FAILED, and
    no offset stored (the broker once stored it and answered no error)."""
    grant(
        acl,
        _acl(ResourceType.GROUP, "audit-g", "nobody", AclOperation.DESCRIBE),
        _acl(ResourceType.TOPIC, "web", "nobody", AclOperation.DESCRIBE),
    )
    consumer = Consumer({**conf(acl, "nobody"), "group.id": "audit-g"})
    try:
        with pytest.raises(KafkaException) as e:
            consumer.commit(offsets=[TopicPartition("web", 0, 12345)], asynchronous=False)
        assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    assert _committed(acl, "audit-g", "web") < 0  # nothing: librdkafka's OFFSET_INVALID


def test_no_client_appends_to_the_internal_topics(acl, tmp_path):
    """Not even a super user: INVALID_TOPIC_EXCEPTION, nothing appended; records of
    internal topics are not deleted, a transaction cannot add them, and `logflume
    topics` neither deletes nor alters them."""
    with wire(acl, "admin") as c:  # both topics exist once a coordinator is asked for
        c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
    errors = []
    producer = Producer({**conf(acl, "admin"), "message.timeout.ms": 5000})
    before = {t: end_offset(acl, t) for t in ("__consumer_offsets", "__transaction_state")}
    for topic in before:
        producer.produce(topic, b"forged", partition=0, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION] * 2
    assert {t: end_offset(acl, t) for t in before} == before
    with wire(acl, "admin") as c:
        produced = c.request(ApiKey.PRODUCE, 9, produce_body("__consumer_offsets", batch(b"x")))
        deleted = c.request(
            ApiKey.DELETE_RECORDS,
            2,
            {
                "topics": [
                    {
                        "name": "__consumer_offsets",
                        "partitions": [{"partition_index": 0, "offset": -1}],
                    }
                ]
            },
        )
        ids = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "internal-tx",
                                                     "transaction_timeout_ms": 60000})  # fmt: skip
        added = c.request(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": "internal-tx",
                "v3_and_below_producer_id": ids["producer_id"],
                "v3_and_below_producer_epoch": ids["producer_epoch"],
                "v3_and_below_topics": [{"name": "__consumer_offsets", "partitions": [0]}],
            },
        )
    answer = produced["responses"][0]["partition_responses"][0]
    assert answer["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert answer["error_message"] == "Cannot append to internal topic __consumer_offsets"
    assert deleted["topics"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    result = added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]
    assert result["partition_error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={acl.ca}\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={acl.dir / 'admin.pem'}\n"
    )
    admin = ["--bootstrap-server", f"127.0.0.1:{acl.mutual}", "--command-config", str(props)]
    refused = lf("topics", *admin, "--delete", "--topic", "__consumer_offsets")
    assert refused.returncode == 1
    assert b"is a kafka internal topic and is not allowed to be marked for deletion" in (
        refused.stderr
    )
    refused = lf("topics", *admin, "--alter", "--topic", "__transaction_state", "--partitions", "9")
    assert refused.returncode == 1 and b"cannot be changed" in refused.stderr


def test_describe_transactions_shows_only_topics_the_caller_may_describe(acl):
    producer = Producer({**conf(acl, "admin"), "transactional.id": "shared-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("web", b"1")
    producer.produce("other", b"2")
    producer.flush(10)
    try:
        grant(acl, _acl(ResourceType.TRANSACTIONAL_ID, "shared-tx", "agent", AclOperation.DESCRIBE))
        body = {"transactional_ids": ["shared-tx"]}
        with wire(acl, "agent") as c:  # DESCRIBE on web (WRITE implies it), not on other
            seen = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, body)["transaction_states"][0]
        with wire(acl, "admin") as c:
            everything = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, body)["transaction_states"][0]
    finally:
        producer.abort_transaction(30)
    assert seen["error_code"] == ErrorCode.NONE
    assert [t["topic"] for t in seen["topics"]] == ["web"]
    assert sorted(t["topic"] for t in everything["topics"]) == ["other", "web"]


def test_a_refused_delete_topics_discloses_neither_id_nor_name(acl):
    with wire(acl, "admin") as c:
        meta = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "other", "topic_id": None}]})
    other_id = meta["topics"][0]["topic_id"]
    assert other_id != NO_ID
    by_name = {"topics": [{"name": "other", "topic_id": NO_ID}], "timeout_ms": 5000}
    by_id = {"topics": [{"name": None, "topic_id": other_id}], "timeout_ms": 5000}
    with wire(acl, "agent") as c:  # no DESCRIBE on other, no DELETE
        named = c.request(ApiKey.DELETE_TOPICS, 6, by_name)["responses"][0]
        numbered = c.request(ApiKey.DELETE_TOPICS, 6, by_id)["responses"][0]
    assert (named["name"], named["topic_id"], named["error_code"]) == (
        "other",
        NO_ID,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )
    assert (numbered["name"], numbered["topic_id"], numbered["error_code"]) == (
        None,
        other_id,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )


def test_create_topics_describes_the_topic_only_with_describe_configs(acl):
    grant(
        acl,
        _acl(ResourceType.TOPIC, "made-", "operator", AclOperation.CREATE, ResourcePatternType.PREFIXED),
        _acl(ResourceType.TOPIC, "made-seen", "operator", AclOperation.DESCRIBE_CONFIGS),
    )  # fmt: skip

    def create(name: str) -> dict:
        body = {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}],
                "timeout_ms": 5000}  # fmt: skip
        with wire(acl, "operator") as c:
            return c.request(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]

    unseen, seen, refused = create("made-unseen"), create("made-seen"), create("elsewhere")
    assert unseen["error_code"] == ErrorCode.NONE
    assert unseen["topic_config_error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert (unseen["num_partitions"], unseen["replication_factor"], unseen["configs"]) == (
        -1,
        -1,
        [],
    )
    assert seen["topic_config_error_code"] == ErrorCode.NONE
    assert (seen["num_partitions"], seen["replication_factor"]) == (2, 1) and seen["configs"]
    assert refused["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert refused["topic_config_error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_brokers_and_admins_get_what_kafka_gives_them(acl):
    """ALTER on the cluster writes markers (an admin aborting a hanging transaction,
    KIP-664); CLUSTER_ACTION alone answers AddPartitionsToTxn v4 (the brokers'
    verification), without WRITE on the transactional id or its topics."""
    marker = {
        "producer_id": 987654,
        "producer_epoch": 0,
        "transaction_result": False,
        "topics": [{"name": "web", "partition_indexes": [0]}],
        "coordinator_epoch": 0,
    }
    verify = {
        "transactions": [
            {
                "transactional_id": "nobodys-tx",
                "producer_id": 987654,
                "producer_epoch": 0,
                "verify_only": True,
                "topics": [{"name": "web", "partitions": [0]}],
            }
        ]
    }
    grant(acl, _acl(ResourceType.BROKER, "kafka-cluster", "operator", AclOperation.ALTER))
    with wire(acl, "operator") as c:
        aborted = c.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [marker]})
        refused = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, verify)
    code = aborted["markers"][0]["topics"][0]["partitions"][0]["error_code"]
    assert code == ErrorCode.NONE
    assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(acl, _acl(ResourceType.BROKER, "kafka-cluster", "operator", AclOperation.CLUSTER_ACTION))
    with wire(acl, "operator") as c:
        verified = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, verify)
    assert verified["error_code"] == ErrorCode.NONE
    result = verified["results_by_transaction"][0]["topic_results"][0]["results_by_partition"][0]
    assert result["partition_error_code"] != ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_transactional_id_is_checked_only_for_transactional_batches(acl):
    body = produce_body("web", batch(b"plain")) | {"transactional_id": "not-agents"}
    before = end_offset(acl, "web")
    with wire(acl, "agent") as c:
        answer = c.request(ApiKey.PRODUCE, 9, body)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    assert end_offset(acl, "web") == before + 1


def test_elect_leaders_refusal_names_each_partition(acl):
    body = {"election_type": 0, "topic_partitions": [{"topic": "web", "partitions": [0]}],
            "timeout_ms": 1000}  # fmt: skip
    with wire(acl, "agent") as c:
        v0 = c.request(ApiKey.ELECT_LEADERS, 0, body)
        v2 = c.request(ApiKey.ELECT_LEADERS, 2, body)
    for answer in (v0, v2):
        results = answer["replica_election_results"]
        assert results == [
            {
                "topic": "web",
                "partition_result": [
                    {
                        "partition_id": 0,
                        "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "error_message": None,
                    }
                ],
            }
        ]
    assert v2["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_authorized_operations_as_admin_clients_read_them(acl):
    """KIP-430 through confluent-kafka: describe_cluster for any principal (its
    operations need DESCRIBE on the cluster), describe_topics and
    describe_consumer_groups with what the principal may do."""
    from confluent_kafka import TopicCollection

    op = AclOperation
    spark = AdminClient(conf(acl, "spark"))
    cluster = spark.describe_cluster(include_authorized_operations=True).result(10)
    assert cluster.nodes and not cluster.authorized_operations
    admin = AdminClient(conf(acl, "admin"))
    everything = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(everything.authorized_operations) == {
        op.CREATE, op.CLUSTER_ACTION, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS,
        op.IDEMPOTENT_WRITE, op.ALTER, op.DESCRIBE,
    }  # fmt: skip
    topics = spark.describe_topics(TopicCollection(["web"]), include_authorized_operations=True)
    assert set(topics["web"].result(10).authorized_operations) == {op.READ, op.DESCRIBE}
    groups = spark.describe_consumer_groups(["spark-etl"], include_authorized_operations=True)
    assert set(groups["spark-etl"].result(10).authorized_operations) == {op.READ, op.DESCRIBE}
