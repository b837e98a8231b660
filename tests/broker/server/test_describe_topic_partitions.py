"""DescribeTopicPartitions (KIP-966) against a real broker process: the cursor walks
every partition once and in order, the limits, the errors Kafka 3.9 answers, and
what a principal without DESCRIBE sees on a broker with ACLs and SASL."""

from __future__ import annotations

import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient, SaslLogin, Security
from broker.security.acl import SUPPORTED_OPERATIONS, Operation, ResourceType
from testkit.procs import BrokerProcess
from testkit.secured import start_secured_broker
from tests.broker.server.test_requests import create
from tests.broker.server.wire import WireClient

DTP = ApiKey.DESCRIBE_TOPIC_PARTITIONS
CAP = 400  # the broker's max.request.partition.size.limit in this module
NO_ID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("dtp") / "data",
        settings={"max.request.partition.size.limit": CAP},
    ).start()
    yield b
    b.stop()


def describe(c, names, limit=2000, cursor=None) -> dict:
    body = {"topics": [{"name": n} for n in names], "response_partition_limit": limit}
    return c.request(DTP, 0, body | {"cursor": cursor})


def walk(c, names, limit) -> tuple[list[tuple[str, int]], list[int]]:
    """Every (topic, partition) the pages list, following next_cursor; and the size
    of each page."""
    seen: list[tuple[str, int]] = []
    sizes: list[int] = []
    cursor = None
    while True:
        answer = describe(c, names, limit, cursor)
        page = [
            (t["name"], p["partition_index"]) for t in answer["topics"] for p in t["partitions"]
        ]
        assert all(t["error_code"] == ErrorCode.NONE for t in answer["topics"]), answer
        seen += page
        sizes.append(len(page))
        cursor = answer["next_cursor"]
        if cursor is None:
            return seen, sizes
        assert len(sizes) < 20, "the cursor does not move on"


def test_the_cursor_walks_1000_partitions_once_in_order(capped):
    with WireClient(capped.port) as c:
        assert create(c, "walk-a", 1000)["error_code"] == ErrorCode.NONE
        assert create(c, "walk-b", 3)["error_code"] == ErrorCode.NONE
    with BlockingClient("127.0.0.1", capped.port) as c:
        seen, sizes = walk(c, ["walk-b", "walk-a"], 300)
        first = describe(c, ["walk-a"], 300)
    assert seen == [("walk-a", i) for i in range(1000)] + [("walk-b", i) for i in range(3)]
    assert sizes == [300, 300, 300, 103]  # the last page: walk-a's 100 and walk-b's 3
    assert first["next_cursor"] == {"topic_name": "walk-a", "partition_index": 300}


def test_partitions_match_metadata_and_carry_no_elr(capped):
    with WireClient(capped.port) as c:
        assert create(c, "fields", 3)["error_code"] == ErrorCode.NONE
        meta = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "fields", "topic_id": None}]})
        (topic,) = describe(c, ["fields"])["topics"]
    (expected,) = meta["topics"]
    assert (topic["name"], topic["topic_id"], topic["is_internal"]) == (
        "fields",
        expected["topic_id"],
        False,
    )
    assert topic["topic_id"] != NO_ID
    for mine, theirs in zip(topic["partitions"], expected["partitions"], strict=True):
        assert mine == theirs | {"eligible_leader_replicas": [], "last_known_elr": []}
    everything = sum(1 << op for op in SUPPORTED_OPERATIONS[ResourceType.TOPIC])
    assert topic["topic_authorized_operations"] == everything  # no authorizer: all of them


def test_limits_the_broker_cap_a_floor_of_one_and_an_exactly_full_page(capped):
    with WireClient(capped.port) as c:
        assert create(c, "cap-a", 450)["error_code"] == ErrorCode.NONE
        assert create(c, "cap-b", 2)["error_code"] == ErrorCode.NONE
        assert create(c, "cap-c", 1)["error_code"] == ErrorCode.NONE
        capped_page = describe(c, ["cap-a"], 5000)
        assert len(capped_page["topics"][0]["partitions"]) == CAP
        assert capped_page["next_cursor"] == {"topic_name": "cap-a", "partition_index": CAP}
        one = describe(c, ["cap-b"], 0)
        assert [p["partition_index"] for p in one["topics"][0]["partitions"]] == [0]
        assert one["next_cursor"] == {"topic_name": "cap-b", "partition_index": 1}
        full = describe(c, ["cap-c", "cap-b"], 2)  # cap-b fills the page exactly
        assert [t["name"] for t in full["topics"]] == ["cap-b"]
        assert full["next_cursor"] == {"topic_name": "cap-c", "partition_index": 0}
        rest = describe(c, ["cap-c", "cap-b"], 2, full["next_cursor"])
        assert [t["name"] for t in rest["topics"]] == ["cap-c"]
        assert rest["next_cursor"] is None
        beyond = describe(c, ["cap-b"], 10, {"topic_name": "cap-b", "partition_index": 7})
        assert beyond["topics"][0]["partitions"] == [] and beyond["next_cursor"] is None


def test_all_topics_sorted_from_the_cursor(capped):
    with WireClient(capped.port) as c:
        for name in ("all-y", "all-x"):
            assert create(c, name, 2)["error_code"] == ErrorCode.NONE
        names = [t["name"] for t in describe(c, [])["topics"]]
        assert names == sorted(names) and {"all-x", "all-y"} <= set(names)
        cursor = {"topic_name": "all-x", "partition_index": 1}
        answer = describe(c, [], 2, cursor)
        listed = [
            (t["name"], p["partition_index"]) for t in answer["topics"] for p in t["partitions"]
        ]
        assert listed == [("all-x", 1), ("all-y", 0)]
        assert answer["next_cursor"] == {"topic_name": "all-y", "partition_index": 1}


def test_missing_and_illegal_topics_and_invalid_cursors(capped):
    with WireClient(capped.port) as c:
        assert create(c, "err-t", 2)["error_code"] == ErrorCode.NONE
        answer = describe(c, ["no-such-topic", "err-t", "bad/name", "err-t"], 3)
        codes = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert codes == {
            "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
            "err-t": ErrorCode.NONE,
            "no-such-topic": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert [t["name"] for t in answer["topics"]] == ["bad/name", "err-t", "no-such-topic"]
        assert answer["next_cursor"] is None  # bad/name took nothing: 1 left for no-such-topic
        missing = answer["topics"][2]
        assert missing["topic_id"] == NO_ID and missing["partitions"] == []
        assert missing["topic_authorized_operations"] != -(2**31)
        again = describe(c, ["no-such-topic"])["topics"]  # never created on the way
        assert [t["error_code"] for t in again] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        for cursor in (
            {"topic_name": "elsewhere", "partition_index": 0},
            {"topic_name": "err-t", "partition_index": -1},
        ):
            refused = describe(c, ["err-t", "other"], 10, cursor)
            assert [(t["name"], t["error_code"], t["partitions"]) for t in refused["topics"]] == [
                ("err-t", ErrorCode.INVALID_REQUEST, []),
                ("other", ErrorCode.INVALID_REQUEST, []),
            ]
            assert refused["next_cursor"] is None
        # With every topic asked for, a cursor may name any topic, existing or not.
        answer = describe(c, [], 1, {"topic_name": "err-s", "partition_index": 3})
        first = answer["topics"][0]
        assert (first["name"], [p["partition_index"] for p in first["partitions"]]) == (
            "err-t",
            [0],
        )


PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker with ACLs: ANONYMOUS (PLAINTEXT) is a super user and sets things up;
    User:alice logs in with SCRAM and may DESCRIBE acl-a, acl-b and the missing
    acl-ghost only."""
    settings = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    s = start_secured_broker(tmp_path_factory.mktemp("dtp-acl"), {"alice": PASSWORD}, settings)
    with WireClient(s.broker.port) as c:
        for name, partitions in (("acl-a", 2), ("acl-b", 1), ("acl-hidden", 1)):
            assert create(c, name, partitions)["error_code"] == ErrorCode.NONE
        creations = [
            {
                "resource_type": 2,  # TOPIC
                "resource_name": name,
                "resource_pattern_type": 3,  # LITERAL
                "principal": "User:alice",
                "host": "*",
                "operation": int(Operation.DESCRIBE),
                "permission_type": 3,  # ALLOW
            }
            for name in ("acl-a", "acl-b", "acl-ghost")
        ]
        created = c.request(ApiKey.CREATE_ACLS, 3, {"creations": creations})
        assert all(r["error_code"] == ErrorCode.NONE for r in created["results"])
    yield s
    s.stop()


def alice(secured) -> BlockingClient:
    port = int(secured.sasl_plaintext.rsplit(":", 1)[1])
    login = SaslLogin("SCRAM-SHA-512", "alice", PASSWORD)
    return BlockingClient("127.0.0.1", port, security=Security(sasl=login))


def test_all_topics_leaves_out_what_the_principal_may_not_describe(secured):
    with alice(secured) as c:
        answer = describe(c, [])
    assert [t["name"] for t in answer["topics"]] == ["acl-a", "acl-b"]
    assert {t["topic_authorized_operations"] for t in answer["topics"]} == {1 << Operation.DESCRIBE}


def test_named_topics_without_describe_are_refused_whether_they_exist_or_not(secured):
    with alice(secured) as c:
        answer = describe(c, ["acl-hidden", "acl-a", "acl-nowhere", "acl-ghost"])
    got = [(t["name"], t["error_code"]) for t in answer["topics"]]
    assert got == [
        ("acl-a", ErrorCode.NONE),
        ("acl-ghost", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),  # may describe: told it is missing
        ("acl-hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("acl-nowhere", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    for refused in answer["topics"][2:]:
        assert refused["topic_id"] == NO_ID and refused["partitions"] == []
        assert refused["topic_authorized_operations"] == -(2**31)


def test_a_refused_topic_is_reported_once_across_pages(secured):
    """Refusals are found as the walk reaches each topic: acl-an (between acl-a and
    acl-b) on the first page, acl-hidden on the second."""
    names = ["acl-b", "acl-hidden", "acl-an", "acl-a"]
    with alice(secured) as c:
        first = describe(c, names, 2)  # acl-a fills the page; acl-b starts the next
        second = describe(c, names, 2, first["next_cursor"])
    assert [(t["name"], t["error_code"]) for t in first["topics"]] == [
        ("acl-a", ErrorCode.NONE),
        ("acl-an", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert first["next_cursor"] == {"topic_name": "acl-b", "partition_index": 0}
    assert [(t["name"], t["error_code"]) for t in second["topics"]] == [
        ("acl-b", ErrorCode.NONE),
        ("acl-hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert second["next_cursor"] is None
