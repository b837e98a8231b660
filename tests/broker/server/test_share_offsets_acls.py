"""The share-group offsets admin APIs under ACLs, as Kafka checks them: the group's
ACL (DESCRIBE, READ, DELETE) refuses the whole request, a topic's (DESCRIBE to
describe, READ to alter or delete) only that topic; a describe naming no topics
leaves out those the principal may not describe.
"""

from __future__ import annotations

import time

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.security.acl import Operation, PatternType, Permission, ResourceType
from tests.broker.server.inprocess import InProcessBroker
from tests.broker.server.wire import WireClient

ANONYMOUS = "User:ANONYMOUS"
GROUP, OTHER_GROUP, OPEN, SECRET = "sg-acl", "sg-closed", "open-t", "secret-t"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = InProcessBroker(
        tmp_path_factory.mktemp("share-acl") / "data",
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
        },
    )
    yield b
    b.stop()


def _allow(resource: ResourceType, name: str, *operations: Operation) -> list[dict]:
    return [
        {
            "resource_type": resource,
            "resource_name": name,
            "resource_pattern_type": PatternType.LITERAL,
            "principal": ANONYMOUS,
            "host": "*",
            "operation": op,
            "permission_type": Permission.ALLOW,
        }
        for op in operations
    ]


def _set_up(broker) -> None:
    broker.on_loop(lambda: setattr(broker.core.authorizer, "super_users", frozenset({ANONYMOUS})))
    try:
        with WireClient(broker.port) as client:
            for topic in (OPEN, SECRET):
                created = client.request(
                    ApiKey.CREATE_TOPICS,
                    7,
                    {
                        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                        "timeout_ms": 5000,
                    },
                )
                assert created["topics"][0]["error_code"] == ErrorCode.NONE
            deadline = time.monotonic() + 30
            while True:  # __consumer_offsets created and loaded: this broker coordinates
                found = client.request(
                    ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]}
                )
                if found["coordinators"][0]["error_code"] == ErrorCode.NONE:
                    break
                assert time.monotonic() < deadline, found
                time.sleep(0.1)
            creations = _allow(
                ResourceType.GROUP, GROUP, Operation.READ, Operation.DESCRIBE, Operation.DELETE
            ) + _allow(ResourceType.TOPIC, OPEN, Operation.READ, Operation.DESCRIBE)
            made = client.request(ApiKey.CREATE_ACLS, 3, {"creations": creations})
            assert {r["error_code"] for r in made["results"]} == {ErrorCode.NONE}
    finally:
        broker.on_loop(lambda: setattr(broker.core.authorizer, "super_users", frozenset()))


def _alter(client, group: str) -> dict:
    return client.request(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        0,
        {
            "group_id": group,
            "topics": [
                {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]}
                for t in (OPEN, SECRET)
            ],
        },
    )


def _describe(client, group: str, topics) -> dict:
    (answer,) = client.request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": group, "topics": topics}]}
    )["groups"]
    return answer


def test_group_and_topic_acls(broker):
    _set_up(broker)
    with WireClient(broker.port) as client:
        altered = _alter(client, GROUP)
        assert altered["error_code"] == ErrorCode.NONE
        assert {
            t["topic_name"]: t["partitions"][0]["error_code"] for t in altered["responses"]
        } == {OPEN: ErrorCode.NONE, SECRET: ErrorCode.TOPIC_AUTHORIZATION_FAILED}

        both = [{"topic_name": t, "partitions": [0]} for t in (OPEN, SECRET)]
        described = _describe(client, GROUP, both)
        assert described["error_code"] == ErrorCode.NONE
        assert {
            t["topic_name"]: (p["start_offset"], p["error_code"])
            for t in described["topics"]
            for p in t["partitions"]
        } == {OPEN: (0, ErrorCode.NONE), SECRET: (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        every = _describe(client, GROUP, None)
        assert [t["topic_name"] for t in every["topics"]] == [OPEN]

        deleted = client.request(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            0,
            {"group_id": GROUP, "topics": [{"topic_name": OPEN}, {"topic_name": SECRET}]},
        )
        assert deleted["error_code"] == ErrorCode.NONE
        assert {t["topic_name"]: t["error_code"] for t in deleted["responses"]} == {
            OPEN: ErrorCode.NONE,
            SECRET: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        }
        assert _describe(client, GROUP, None)["topics"] == []

        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert _alter(client, OTHER_GROUP)["error_code"] == refused
        assert _describe(client, OTHER_GROUP, both)["error_code"] == refused
        deleted = client.request(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            0,
            {"group_id": OTHER_GROUP, "topics": [{"topic_name": OPEN}]},
        )
        assert deleted["error_code"] == refused
