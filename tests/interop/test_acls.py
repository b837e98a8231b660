"""ACLs with real clients, on the broker of tests/interop/acl_env.py. ACLs are made
with confluent-kafka's AdminClient; what each user may do is checked with
confluent-kafka and, where the exact error code matters, with the broker's own wire
client."""

import json

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from common.ports import wait_for_port
from tests.broker.server.wire import MATCH_ALL_ACLS, WireClient, batch, fetch_body, produce_body
from tests.interop.acl_env import conf, end_offset, produce_errors, wire
from tests.logflume.test_commands_clients import lf


def test_agent_writes_its_topic_only(acl):
    before = end_offset(acl, "web")
    assert produce_errors(acl, "agent", "web") == [None] * 3
    assert end_offset(acl, "web") == before + 3
    other = end_offset(acl, "other")
    errors = produce_errors(acl, "agent", "other")
    assert {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert end_offset(acl, "other") == other  # a denied produce writes nothing
    with wire(acl, "agent") as c:  # also when the request reaches the broker
        r = c.request(ApiKey.PRODUCE, 9, produce_body("other", batch(b"x")))
    assert r["responses"][0]["partition_responses"][0]["error_code"] == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    assert end_offset(acl, "other") == other


def test_agent_cannot_read_create_or_join(acl):
    with wire(acl, "agent") as c:
        r = c.request(ApiKey.FETCH, 11, fetch_body("web"))
        assert r["responses"][0]["partitions"][0]["error_code"] == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        assert r["responses"][0]["partitions"][0]["records"] == b""
        join = {
            "group_id": "spark-etl",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
            "reason": None,
        }
        r = c.request(ApiKey.JOIN_GROUP, 5, join)
        assert r["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    admin = AdminClient(conf(acl, "agent"))
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic("agent-made", 1, 1)])["agent-made"].result(10)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_spark_reads_with_its_group(acl):
    assert produce_errors(acl, "admin", "web", 2) == [None] * 2
    consumer = Consumer(
        {**conf(acl, "spark"), "group.id": "spark-etl", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["web"])
        got = []
        deadline = 40
        while len(got) < 2 and deadline:
            msg = consumer.poll(0.5)
            deadline -= 1
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        assert len(got) >= 2
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("web", 0)], timeout=10)
        assert committed[0].offset > 0
    finally:
        consumer.close()


def test_broker_requests_need_cluster_rights(acl):
    """Replica fetches, cluster admin and SCRAM credentials from a client that is no
    broker and no super user. OffsetForLeaderEpoch is answered for a topic the client
    may DESCRIBE whatever replica id it gives (Kafka allows CLUSTER_ACTION or DESCRIBE,
    KIP-320 consumers ask too); DescribeCluster needs nothing."""
    epoch = {
        "replica_id": 1,
        "topics": [{"topic": "web", "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    }
    with wire(acl, "agent") as c:
        follower = c.request(ApiKey.FETCH, 11, fetch_body("web") | {"replica_id": 1})
        epochs = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, epoch)
        cluster = c.request(
            ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}
        )
        elect = c.request(
            ApiKey.ELECT_LEADERS, 1,
            {"election_type": 0, "topic_partitions": None, "timeout_ms": 1000},
        )  # fmt: skip
        scram = c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
        upsert = {"name": "eve", "mechanism": 2, "iterations": 4096, "salt": b"s" * 16,
                  "salted_password": b"p" * 64}  # fmt: skip
        alter = c.request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsert]}
        )
    with wire(acl, "nobody") as c:
        epochs_unseen = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, epoch)
    with wire(acl, "admin") as c:
        scram_by_admin = c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert follower["responses"][0]["partitions"][0]["error_code"] == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    assert epochs["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    assert epochs_unseen["topics"][0]["partitions"][0]["error_code"] == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    assert cluster["error_code"] == ErrorCode.NONE and cluster["brokers"]
    assert elect["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert scram["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert alter["results"] == [
        {"user": "eve", "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
    ]
    assert scram_by_admin["error_code"] == ErrorCode.NONE


def test_metadata_reveals_no_topic_names_without_describe(acl):
    with wire(acl, "nobody") as c:
        everything = c.request(ApiKey.METADATA, 12, {"topics": None})
        named = c.request(
            ApiKey.METADATA,
            12,
            {"topics": [{"name": "web", "topic_id": None}, {"name": "nope", "topic_id": None}]},
        )
    assert everything["topics"] == []
    assert [(t["name"], t["error_code"]) for t in named["topics"]] == [
        ("web", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("nope", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # existing or not: same answer
    ]
    with wire(acl, "spark") as c:
        mine = c.request(ApiKey.METADATA, 12, {"topics": None})
        # spark may DESCRIBE we* but not CREATE: no auto-creation
        auto = {"topics": [{"name": "we-new", "topic_id": None}], "allow_auto_topic_creation": True}
        created = c.request(ApiKey.METADATA, 12, auto)
    assert [t["name"] for t in mine["topics"]] == ["web"]
    assert created["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with wire(acl, "admin") as c:
        listed = c.request(ApiKey.METADATA, 12, {"topics": None})
    assert "we-new" not in {t["name"] for t in listed["topics"]}


def test_super_user_does_everything(acl):
    admin = AdminClient(conf(acl, "admin"))
    admin.create_topics([NewTopic("admin-made", 1, 1)])["admin-made"].result(10)
    assert produce_errors(acl, "admin", "admin-made", 1) == [None]
    with wire(acl, "admin") as c:
        r = c.request(ApiKey.FETCH, 11, fetch_body("admin-made"))
    assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    admin.delete_topics(["admin-made"])["admin-made"].result(10)


def test_acl_apis_round_trip_and_refusals(acl):
    admin = AdminClient(conf(acl, "admin"))
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    found = admin.describe_acls(everything).result(10)
    assert {(b.name, b.principal, b.operation) for b in found} >= {
        ("web", "User:agent", AclOperation.WRITE),
        ("we", "User:spark", AclOperation.READ),
        ("spark-", "User:spark", AclOperation.READ),
    }
    matching = AclBindingFilter(
        ResourceType.TOPIC, "web", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert {b.principal for b in admin.describe_acls(matching).result(10)} == {
        "User:agent",
        "User:spark",
    }
    temp = AclBinding(ResourceType.TOPIC, "tmp", ResourcePatternType.LITERAL, "User:x", "*",
                      AclOperation.READ, AclPermissionType.DENY)  # fmt: skip
    admin.create_acls([temp])[temp].result(10)
    only = AclBindingFilter(
        ResourceType.TOPIC, "tmp", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    deleted = list(admin.delete_acls([only]).values())[0].result(10)
    assert deleted == [temp]
    assert admin.describe_acls(only).result(10) == []
    anonymous = AdminClient({"bootstrap.servers": f"127.0.0.1:{acl.plain}"})  # PLAINTEXT
    with pytest.raises(KafkaException) as e:
        anonymous.create_acls([temp])[temp].result(10)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error (an empty list comes back): the
    # refusal is checked on the wire.
    with WireClient(acl.plain) as c:
        r = c.request(ApiKey.DESCRIBE_ACLS, 1, MATCH_ALL_ACLS)
    assert (r["error_code"], r["resources"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    with WireClient(acl.plain) as c:
        r = c.request(ApiKey.DESCRIBE_ACLS, 1, MATCH_ALL_ACLS | {"operation": 0})
    assert r["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # authorization first
    with wire(acl, "admin") as c:
        r = c.request(ApiKey.DESCRIBE_ACLS, 1, MATCH_ALL_ACLS | {"operation": 0})
    assert r["error_code"] == ErrorCode.INVALID_REQUEST


def test_acls_survive_a_restart(acl):
    acl.broker.restart()
    wait_for_port(acl.mutual, proc=acl.broker.proc)
    assert produce_errors(acl, "agent", "web", 1) == [None]
    errors = produce_errors(acl, "agent", "other", 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def _keystore_properties(acl, form: str, tmp_path) -> str:
    """Java client properties presenting admin's certificate from a PEM file, a
    PKCS12 key store (with a password) or inline PEM (line breaks lost)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    if form == "PEM file":
        return f"ssl.keystore.type=PEM\nssl.keystore.location={acl.dir / 'admin.pem'}\n"
    key_pem, cert_pem = (acl.dir / "admin.key").read_bytes(), (acl.dir / "admin.crt").read_bytes()
    if form == "inline PEM":
        key, chain = (" ".join(pem.decode().splitlines()) for pem in (key_pem, cert_pem))
        return (
            "ssl.keystore.type=PEM\n"
            f"ssl.keystore.key={key}\nssl.keystore.certificate.chain={chain}\n"
        )
    p12 = tmp_path / "admin.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"admin",
            load_pem_private_key(key_pem, None),
            x509.load_pem_x509_certificate(cert_pem),
            None,
            BestAvailableEncryption(b"p12-secret"),
        )
    )
    return (
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={p12}\nssl.keystore.password=p12-secret\n"
    )


@pytest.mark.parametrize("form", ["PEM file", "PKCS12", "inline PEM"])
def test_transactions_cli_presents_a_client_certificate(acl, form, tmp_path):
    """`logflume transactions` (the broker's own codec, not librdkafka) on the
    mutual-TLS listener, as admin by its certificate; without one the handshake
    fails, reported in one line."""
    trust = f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={acl.ca}\n"
    props, anonymous = tmp_path / "admin.properties", tmp_path / "none.properties"
    props.write_text(trust + _keystore_properties(acl, form, tmp_path))
    anonymous.write_text(trust)
    b = ["--bootstrap-server", f"127.0.0.1:{acl.mutual}", "--command-config"]
    r = lf("transactions", *b, str(props), "list")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split()[:2] == ["TransactionalId", "Coordinator"]
    r = lf("transactions", *b, str(anonymous), "list")
    assert r.returncode == 1 and r.stderr.startswith(b"Error: ")
    assert b"Traceback" not in r.stderr


def test_logflume_acls_cli(acl, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={acl.ca}\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={acl.dir / 'admin.pem'}\n"
    )
    b = ["--bootstrap-server", f"127.0.0.1:{acl.mutual}", "--command-config", str(props)]
    r = lf("acls", *b, "--add", "--allow-principal", "User:etl", "--consumer",
           "--topic", "cli-", "--group", "etl", "--resource-pattern-type", "prefixed")  # fmt: skip
    assert r.returncode == 0, r.stderr
    listed = lf("acls", *b, "--list", "--topic", "cli-", "--resource-pattern-type", "prefixed")
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout.decode()
    assert (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-, "
        "patternType=PREFIXED)`:"
    ) in text
    assert "(principal=User:etl, host=*, operation=READ, permissionType=ALLOW)" in text
    assert "(principal=User:etl, host=*, operation=DESCRIBE, permissionType=ALLOW)" in text
    as_json = lf("acls", *b, "--list", "--topic", "cli-", "--resource-pattern-type", "prefixed",
                 "--output", "json")  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [
        {"resource_type": "TOPIC", "resource_name": "cli-", "pattern_type": "PREFIXED",
         "principal": "User:etl", "host": "*", "operation": op, "permission_type": "ALLOW"}
        for op in ("DESCRIBE", "READ")
    ]  # fmt: skip
    everything = lf("acls", *b, "--list", "--principal", "User:etl").stdout.decode()
    assert "name=etl, patternType=PREFIXED" in everything and "name=web" not in everything
    kept = lf("acls", *b, "--remove", "--topic", "cli-", "--resource-pattern-type", "prefixed",
              input=b"n\n")  # fmt: skip
    assert kept.returncode == 0
    assert "User:etl" in lf("acls", *b, "--list", "--topic", "cli-",
                            "--resource-pattern-type", "prefixed").stdout.decode()  # fmt: skip
    r = lf("acls", *b, "--remove", "--force", "--topic", "cli-", "--group", "etl",
           "--resource-pattern-type", "prefixed")  # fmt: skip
    assert r.returncode == 0 and b"operation=READ" in r.stdout, r.stderr
    assert "User:etl" not in lf("acls", *b, "--list").stdout.decode()
    r = lf("acls", *b, "--add", "--allow-principal", "User:etl", "--producer", "--idempotent",
           "--topic", "cli-out")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = lf("acls", *b, "--add", "--allow-principal", "User:etl", "--operation", "Describe",
           "--cluster")  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = lf("acls", *b, "--list", "--cluster").stdout.decode()
    assert "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)" in text
    assert "(principal=User:etl, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)" in text
    assert "(principal=User:etl, host=*, operation=DESCRIBE, permissionType=ALLOW)" in text
    r = lf("acls", *b, "--remove", "--force", "--cluster", "--topic", "cli-out")
    assert r.returncode == 0, r.stderr
    denied = lf("acls", "--bootstrap-server", f"127.0.0.1:{acl.plain}", "--add",
                "--allow-principal", "User:x", "--topic", "t")  # fmt: skip
    assert denied.returncode == 1 and b"uthoriz" in denied.stderr


def test_transactions_need_their_acls(acl):
    """TRANSACTIONAL_ID WRITE for the coordinator requests, topic WRITE for the
    partitions added, group READ for offsets, CLUSTER_ACTION for broker requests."""
    init = {"transactional_id": "agent-tx", "transaction_timeout_ms": 60000}
    markers = {
        "markers": [
            {
                "producer_id": 1,
                "producer_epoch": 0,
                "transaction_result": True,
                "topics": [{"name": "web", "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ]
    }
    verify = {
        "transactions": [
            {
                "transactional_id": "agent-tx",
                "producer_id": 1,
                "producer_epoch": 0,
                "verify_only": True,
                "topics": [{"name": "web", "partitions": [0]}],
            }
        ]
    }
    with wire(acl, "agent") as c:
        denied_init = c.request(ApiKey.INIT_PRODUCER_ID, 4, init)
        denied_find = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "agent-tx", "key_type": 1})
        denied_markers = c.request(ApiKey.WRITE_TXN_MARKERS, 1, markers)
        denied_verify = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, verify)
    assert denied_init["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert denied_find["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    result = denied_markers["markers"][0]["topics"][0]["partitions"][0]
    assert result["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert denied_verify["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    admin = AdminClient(conf(acl, "admin"))
    grant = AclBinding(
        ResourceType.TRANSACTIONAL_ID, "agent-tx", ResourcePatternType.LITERAL, "User:agent",
        "*", AclOperation.WRITE, AclPermissionType.ALLOW,
    )  # fmt: skip
    for f in admin.create_acls([grant]).values():
        f.result(10)
    try:
        with wire(acl, "agent") as c:
            found = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "agent-tx", "key_type": 1})
            ids = c.request(ApiKey.INIT_PRODUCER_ID, 4, init)
            pid, epoch = ids["producer_id"], ids["producer_epoch"]
            add = {
                "v3_and_below_transactional_id": "agent-tx",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [
                    {"name": "web", "partitions": [0]},
                    {"name": "other", "partitions": [0]},
                ],
            }
            added = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
            offsets = c.request(
                ApiKey.ADD_OFFSETS_TO_TXN,
                3,
                {
                    "transactional_id": "agent-tx",
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "group_id": "not-agents",
                },
            )
        assert found["error_code"] == ErrorCode.NONE
        assert ids["error_code"] == ErrorCode.NONE
        codes = {
            t["name"]: t["results_by_partition"][0]["partition_error_code"]
            for t in added["results_by_topic_v3_and_below"]
        }
        assert codes == {
            "web": ErrorCode.OPERATION_NOT_ATTEMPTED,
            "other": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        }
        assert offsets["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        with wire(acl, "agent") as c:
            described = c.request(
                ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["agent-tx", "not-its"]}
            )
            listed = c.request(
                ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []}
            )
        assert [s["error_code"] for s in described["transaction_states"]] == [
            ErrorCode.NONE,  # WRITE implies DESCRIBE
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ]
        assert {t["transactional_id"] for t in listed["transaction_states"]} == {"agent-tx"}
        producer = Producer({**conf(acl, "agent"), "transactional.id": "agent-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("web", b"in-a-transaction")
        producer.commit_transaction(30)
    finally:
        remove = AclBindingFilter(
            ResourceType.TRANSACTIONAL_ID, "agent-tx", ResourcePatternType.LITERAL, "User:agent",
            "*", AclOperation.WRITE, AclPermissionType.ALLOW,
        )  # fmt: skip
        for f in admin.delete_acls([remove]).values():
            f.result(10)


def test_describe_producers_needs_read_on_the_topic(acl):
    body = {"topics": [{"name": "web", "partition_indexes": [0]}]}
    with wire(acl, "agent") as c:  # WRITE on web only
        denied = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
    with wire(acl, "spark") as c:  # READ on we*
        answered = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
    refused = denied["topics"][0]["partitions"][0]
    assert refused["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert refused["active_producers"] == []
    assert answered["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
