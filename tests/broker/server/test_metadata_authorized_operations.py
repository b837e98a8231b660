"""Metadata v8-v12 with include_topic_authorized_operations (KIP-430), on a broker
with the authorizer on: each described topic, a missing one included, carries the
caller's bit field, as Kafka's KafkaApis fills it; refused entries and requests that
did not ask keep "not requested" (INT32_MIN). What `logflume agent test-output`
reads through confluent-kafka's describe_topics."""

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from broker.security.acl import SUPPORTED_OPERATIONS, Operation
from broker.security.acl import ResourceType as RT
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess
from tests.broker.server.wire import WireClient

NOT_REQUESTED = -(2**31)
EVERY = sum(1 << op for op in SUPPORTED_OPERATIONS[RT.TOPIC])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Everyone may do anything where no ACL names the resource; `locked` may be
    described, `hidden` neither described nor written, by User:ANONYMOUS."""
    settings = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "auto.create.topics.enable": "false",
    }
    b = BrokerProcess(tmp_path_factory.mktemp("kip430") / "data", settings=settings).start()
    for topic in ("open", "locked", "hidden"):
        create_topic(b.bootstrap, topic)
    allow, lit = AclPermissionType.ALLOW, ResourcePatternType.LITERAL
    bindings = [
        AclBinding(ResourceType.TOPIC, "locked", lit, "User:ANONYMOUS", "*", op, allow)
        for op in (AclOperation.DESCRIBE, AclOperation.READ)
    ]
    bindings.append(
        AclBinding(ResourceType.TOPIC, "hidden", lit, "User:other", "*", AclOperation.WRITE, allow)
    )
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_acls(bindings).values():
        f.result(10)
    yield b
    b.stop()


def metadata(broker, version: int, include: bool) -> dict:
    body = {
        "topics": [{"name": n, "topic_id": None} for n in ("open", "locked", "hidden", "nope")],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": include,
    }
    if version <= 10:
        body["include_cluster_authorized_operations"] = False
    with WireClient(broker.port) as c:
        answer = c.request(ApiKey.METADATA, version, body)
    return {t["name"]: t for t in answer["topics"]}


@pytest.mark.parametrize("version", [8, 9, 10, 11, 12])
def test_each_topic_carries_what_the_caller_may_do_with_it(broker, version):
    topics = metadata(broker, version, include=True)
    assert topics["open"]["error_code"] == ErrorCode.NONE
    assert topics["open"]["topic_authorized_operations"] == EVERY
    assert topics["locked"]["topic_authorized_operations"] == (
        1 << Operation.DESCRIBE | 1 << Operation.READ
    )
    assert topics["nope"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert topics["nope"]["topic_authorized_operations"] == EVERY
    assert topics["hidden"]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert topics["hidden"]["topic_authorized_operations"] == NOT_REQUESTED


def test_not_asked_is_not_requested(broker):
    topics = metadata(broker, 12, include=False)
    assert {t["topic_authorized_operations"] for t in topics.values()} == {NOT_REQUESTED}
