"""The consumer group protocol's frames (KIP-848) byte for byte, written by hand from
Kafka's JSON: ConsumerGroupHeartbeat v0/v1, ConsumerGroupDescribe v0/v1, ListGroups v5,
OffsetFetch v9, DescribeGroups v6."""

from __future__ import annotations

import pytest

from broker.protocol import ApiKey
from tests.broker.protocol.test_golden_flexible import (
    TOPIC_ID,
    check_request,
    check_response,
    frame,
)


def s(text: str) -> str:
    """A compact string: unsigned varint of length + 1, then the bytes."""
    return f"{len(text) + 1:02x}" + text.encode().hex()


def test_consumer_group_heartbeat_v1_request_and_response():
    body = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 300000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": "uniform",
        "topic_partitions": [],
    }
    wire = frame(
        "0044 0001 00000001 0001" + b"c".hex() + "00"  # header v2
        + s("g") + s("m") + "00000000"
        + "00 00"  # instance id, rack id: null
        + "000493e0"  # rebalance timeout
        + "02" + s("t")  # subscribed topic names
        + "00"  # regex: null
        + s("uniform")
        + "01"  # owned partitions: empty
        + "00"
    )  # fmt: skip
    assert check_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body, wire, "c") == body
    v0 = {k: v for k, v in body.items() if k != "subscribed_topic_regex"}
    wire0 = frame(
        "0044 0000 00000001 0001" + b"c".hex() + "00"
        + s("g") + s("m") + "00000000" + "00 00" + "000493e0" + "02" + s("t")
        + s("uniform") + "01" + "00"
    )  # fmt: skip
    assert check_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, v0, wire0, "c") == body

    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m",
        "member_epoch": 1,
        "heartbeat_interval_ms": 5000,
        "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 1]}]},
    }
    wire = frame(
        "00000001 00"  # response header v1
        + "00000000 0000 00" + s("m") + "00000001 00001388"
        + "01"  # the assignment is there
        + "02" + TOPIC_ID.hex + "03 00000000 00000001 00"  # one topic, partitions 0 and 1
        + "00"  # the assignment's tagged fields
        + "00"
    )  # fmt: skip
    assert check_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, response, wire) == response
    fenced = {
        "throttle_time_ms": 0,
        "error_code": 110,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }
    wire = frame("00000001 00 00000000 006e 00 00 00000000 00000000 ff 00")
    assert check_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, fenced, wire) == fenced


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe_request_and_response(version):
    """v1 (KIP-1099) adds each member's type after its target assignment: 1, a
    consumer-protocol member (0: a classic one); v0 decodes it as -1, unknown."""
    body = {"group_ids": ["g"], "include_authorized_operations": True}
    wire = frame(f"0045 000{version} 00000001 0001" + b"c".hex() + "00" + "02" + s("g") + "01 00")
    assert check_request(ApiKey.CONSUMER_GROUP_DESCRIBE, version, body, wire, "c") == body
    assignment = {
        "topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [0]}]
    }
    response = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 0,
                "error_message": None,
                "group_id": "g",
                "group_state": "Stable",
                "group_epoch": 2,
                "assignment_epoch": 2,
                "assignor_name": "uniform",
                "members": [
                    {
                        "member_id": "m",
                        "instance_id": None,
                        "rack_id": None,
                        "member_epoch": 2,
                        "client_id": "c",
                        "client_host": "/h",
                        "subscribed_topic_names": ["t"],
                        "subscribed_topic_regex": None,
                        "assignment": assignment,
                        "target_assignment": assignment,
                        "member_type": 1 if version else -1,
                    }
                ],
                "authorized_operations": -(2**31),
            }
        ],
    }
    described = "02" + TOPIC_ID.hex + s("t") + "02 00000000 00" + "00"
    wire = frame(
        "00000001 00" + "00000000"
        + "02" + "0000 00" + s("g") + s("Stable") + "00000002 00000002" + s("uniform")
        + "02" + s("m") + "00 00" + "00000002" + s("c") + s("/h") + "02" + s("t") + "00"
        + described + described
        + ("01" if version else "")  # member type
        + "00"  # the member's tagged fields
        + "80000000 00"  # authorized operations not asked; the group's tagged fields
        + "00"
    )  # fmt: skip
    assert check_response(ApiKey.CONSUMER_GROUP_DESCRIBE, version, response, wire) == response


def test_list_groups_v5_types_filter_and_group_type():
    body = {"states_filter": [], "types_filter": ["consumer"]}
    wire = frame("0010 0005 00000001 0001" + b"c".hex() + "00" + "01" + "02" + s("consumer") + "00")
    assert check_request(ApiKey.LIST_GROUPS, 5, body, wire, "c") == body
    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [
            {
                "group_id": "g",
                "protocol_type": "consumer",
                "group_state": "Stable",
                "group_type": "consumer",
            }
        ],
    }
    wire = frame(
        "00000001 00 00000000 0000"
        + "02" + s("g") + s("consumer") + s("Stable") + s("consumer") + "00"
        + "00"
    )  # fmt: skip
    assert check_response(ApiKey.LIST_GROUPS, 5, response, wire) == response


def test_offset_fetch_v9_request_carries_member_id_and_epoch():
    body = {
        "groups": [
            {
                "group_id": "g",
                "member_id": "m",
                "member_epoch": 3,
                "topics": [{"name": "t", "partition_indexes": [0]}],
            }
        ],
        "require_stable": False,
    }
    wire = frame(
        "0009 0009 00000001 0001" + b"c".hex() + "00"
        + "02" + s("g") + s("m") + "00000003" + "02" + s("t") + "02 00000000 00" + "00"
        + "00" + "00"
    )  # fmt: skip
    decoded = check_request(ApiKey.OFFSET_FETCH, 9, body, wire, "c")
    assert decoded["groups"] == body["groups"]


def test_describe_groups_v6_response_carries_an_error_message():
    """KIP-1043: v6 puts a nullable error message after each group's error code."""
    response = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 69,
                "error_message": "Group g not found.",
                "group_id": "g",
                "group_state": "Dead",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": -(2**31),
            }
        ],
    }
    wire = frame(
        "00000001 00" + "00000000"
        + "02" + "0045" + s("Group g not found.") + s("g") + s("Dead") + s("") + s("")
        + "01"  # no members
        + "80000000 00"  # authorized operations; the group's tagged fields
        + "00"
    )  # fmt: skip
    assert check_response(ApiKey.DESCRIBE_GROUPS, 6, response, wire) == response
