"""The share-group APIs (KIP-932) byte for byte: ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch and ShareAcknowledge v1, Read/Write/Initialize/DeleteShareGroupState v0,
Describe/Alter/DeleteShareGroupOffsets v0, written by hand from Kafka's message JSON and KIP-482's rules (compact lengths, a
tagged-field section ending every struct, a nullable struct behind an int8 -1/1),
checked in both directions against the codec."""

from __future__ import annotations

import uuid

from broker.protocol import ApiKey
from tests.broker.protocol.test_golden_flexible import check_request, check_response, frame

TID = uuid.UUID("0123456789abcdef0123456789abcdef")
T = TID.hex


def test_share_group_heartbeat_v1_join():
    body = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "rack_id": None,
        "subscribed_topic_names": ["t"],
    }
    wire = frame("004c 0001 00000001 ffff 000267 026d 00000000 00 02 0274 00")
    assert check_request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body, wire) == body


def test_share_group_heartbeat_v1_response_with_and_without_assignment():
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m",
        "member_epoch": 5,
        "heartbeat_interval_ms": 5000,
        "assignment": {"topic_partitions": [{"topic_id": TID, "partitions": [0, 1]}]},
    }
    wire = frame(
        "00000001 00"  # correlation id, header tags
        "00000000 0000 00 026d 00000005 00001388"
        "01"  # the assignment is there
        "02" + T + "03 00000000 00000001 00"  # one topic: id, partitions, tags
        "00"  # the assignment's tags
        "00"
    )
    decoded = check_response(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body, wire)
    assert decoded["assignment"]["topic_partitions"][0]["partitions"] == [0, 1]
    unchanged = body | {"assignment": None}
    wire = frame("00000001 00 00000000 0000 00 026d 00000005 00001388 ff 00")
    assert check_response(ApiKey.SHARE_GROUP_HEARTBEAT, 1, unchanged, wire)["assignment"] is None


def test_share_group_describe_v1():
    body = {"group_ids": ["g"], "include_authorized_operations": False}
    wire = frame("004d 0001 00000001 ffff 00 02 0267 00 00")
    assert check_request(ApiKey.SHARE_GROUP_DESCRIBE, 1, body, wire) == body
    answer = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 0,
                "error_message": None,
                "group_id": "g",
                "group_state": "Stable",
                "group_epoch": 3,
                "assignment_epoch": 3,
                "assignor_name": "simple",
                "members": [
                    {
                        "member_id": "m",
                        "rack_id": None,
                        "member_epoch": 3,
                        "client_id": "c",
                        "client_host": "/127.0.0.1",
                        "subscribed_topic_names": ["t"],
                        "assignment": {
                            "topic_partitions": [
                                {"topic_id": TID, "topic_name": "t", "partitions": [0]}
                            ]
                        },
                    }
                ],
                "authorized_operations": -(2**31),
            }
        ],
    }
    wire = frame(
        "00000001 00 00000000 02"
        "0000 00 0267" + b"\x07Stable".hex() + "00000003 00000003" + b"\x07simple".hex() + "02"
        "026d 00 00000003 0263" + b"\x0b/127.0.0.1".hex() + "02 0274"
        "02" + T + "0274 02 00000000 00"  # the assigned topic, its tags
        "00"  # the assignment's tags
        "00"  # the member's tags
        "80000000 00 00"
    )
    assert check_response(ApiKey.SHARE_GROUP_DESCRIBE, 1, answer, wire)["groups"][0]["members"][0][
        "client_host"
    ] == ("/127.0.0.1")


def test_share_fetch_v1_request_with_piggy_backed_acknowledgement():
    body = {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": 1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 0x7FFFFFFF,
        "max_records": 100,
        "batch_size": 50,
        "topics": [
            {
                "topic_id": TID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": 3, "last_offset": 4, "acknowledge_types": [1]}
                        ],
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    wire = frame(
        "004e 0001 00000001 ffff 00"
        "0267 026d 00000001 000001f4 00000001 7fffffff 00000064 00000032"
        "02" + T + "02 00000000"  # one topic, one partition (no PartitionMaxBytes in v1)
        "02 0000000000000003 0000000000000004 02 01 00"  # one acknowledgement batch
        "00 00"  # partition and topic tags
        "01 00"  # no forgotten topics, top-level tags
    )
    decoded = check_request(ApiKey.SHARE_FETCH, 1, body, wire)
    assert decoded["topics"][0]["partitions"][0]["acknowledgement_batches"][0][
        "acknowledge_types"
    ] == [1]


def test_share_fetch_v1_response_with_acquired_records():
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "acquisition_lock_timeout_ms": 30000,
        "responses": [
            {
                "topic_id": TID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "error_message": None,
                        "acknowledge_error_code": 0,
                        "acknowledge_error_message": None,
                        "current_leader": {"leader_id": 1, "leader_epoch": 2},
                        "records": b"\x01\x02",
                        "acquired_records": [
                            {"first_offset": 3, "last_offset": 4, "delivery_count": 1}
                        ],
                    }
                ],
            }
        ],
        "node_endpoints": [],
    }
    wire = frame(
        "00000001 00"
        "00000000 0000 00 00007530"
        "02" + T + "02 00000000 0000 00 0000 00"
        "00000001 00000002 00"  # current leader, its tags
        "03 0102"  # records: compact bytes
        "02 0000000000000003 0000000000000004 0001 00"
        "00 00"  # partition and topic tags
        "01 00"  # no node endpoints, top-level tags
    )
    decoded = check_response(ApiKey.SHARE_FETCH, 1, body, wire)
    assert bytes(decoded["responses"][0]["partitions"][0]["records"]) == b"\x01\x02"


def test_share_acknowledge_v1():
    body = {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": 2,
        "topics": [
            {
                "topic_id": TID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": 5, "last_offset": 5, "acknowledge_types": [3]}
                        ],
                    }
                ],
            }
        ],
    }
    wire = frame(
        "004f 0001 00000001 ffff 00"
        "0267 026d 00000002 02" + T + "02 00000000"
        "02 0000000000000005 0000000000000005 02 03 00"
        "00 00 00"
    )
    check_request(ApiKey.SHARE_ACKNOWLEDGE, 1, body, wire)
    answer = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [
            {
                "topic_id": TID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 121,
                        "error_message": None,
                        "current_leader": {"leader_id": -1, "leader_epoch": -1},
                    }
                ],
            }
        ],
        "node_endpoints": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
    }
    wire = frame(
        "00000001 00 00000000 0000 00"
        "02" + T + "02 00000000 0079 00 ffffffff ffffffff 00 00 00"
        "02 00000001 0268 00002384 00 00"  # one node endpoint, null rack
        "00"
    )
    assert (
        check_response(ApiKey.SHARE_ACKNOWLEDGE, 1, answer, wire)["node_endpoints"][0]["port"]
        == 9092
    )


def test_read_and_write_share_group_state_v0():
    read = {
        "group_id": "g",
        "topics": [{"topic_id": TID, "partitions": [{"partition": 0, "leader_epoch": 7}]}],
    }
    wire = frame("0054 0000 00000001 ffff 00 0267 02" + T + "02 00000000 00000007 00 00 00")
    check_request(ApiKey.READ_SHARE_GROUP_STATE, 0, read, wire)
    batch = {"first_offset": 10, "last_offset": 12, "delivery_state": 2, "delivery_count": 1}
    batch_hex = "02 000000000000000a 000000000000000c 02 0001 00"
    state = {
        "results": [
            {
                "topic_id": TID,
                "partitions": [
                    {
                        "partition": 0,
                        "error_code": 0,
                        "error_message": None,
                        "state_epoch": 1,
                        "start_offset": 10,
                        "state_batches": [batch],
                    }
                ],
            }
        ]
    }
    wire = frame(
        "00000001 00 02"
        + T
        + "02 00000000 0000 00 00000001 000000000000000a"
        + batch_hex
        + "00 00 00"
    )
    check_response(ApiKey.READ_SHARE_GROUP_STATE, 0, state, wire)
    write = {
        "group_id": "g",
        "topics": [
            {
                "topic_id": TID,
                "partitions": [
                    {
                        "partition": 0,
                        "state_epoch": 1,
                        "leader_epoch": 7,
                        "start_offset": 10,
                        "state_batches": [batch],
                    }
                ],
            }
        ],
    }
    wire = frame(
        "0055 0000 00000001 ffff 00 0267 02" + T + "02 00000000 00000001 00000007"
        "000000000000000a" + batch_hex + "00 00 00"
    )
    check_request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, write, wire)
    written = {
        "results": [
            {
                "topic_id": TID,
                "partitions": [{"partition": 0, "error_code": 0, "error_message": None}],
            }
        ]
    }
    wire = frame("00000001 00 02" + T + "02 00000000 0000 00 00 00 00")
    check_response(ApiKey.WRITE_SHARE_GROUP_STATE, 0, written, wire)


def test_initialize_and_delete_share_group_state_v0():
    init = {
        "group_id": "g",
        "topics": [
            {
                "topic_id": TID,
                "partitions": [{"partition": 0, "state_epoch": 2, "start_offset": 5}],
            }
        ],
    }
    partition = "00000000 00000002 0000000000000005 00"  # 0, state epoch 2, start 5
    wire = frame("0053 0000 00000001 ffff 00 0267 02" + T + "02" + partition + "00 00")
    check_request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, init, wire)
    done = {
        "results": [
            {
                "topic_id": TID,
                "partitions": [{"partition": 0, "error_code": 0, "error_message": None}],
            }
        ]
    }
    wire = frame("00000001 00 02" + T + "02 00000000 0000 00 00 00 00")
    check_response(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, done, wire)
    delete = {"group_id": "g", "topics": [{"topic_id": TID, "partitions": [{"partition": 0}]}]}
    wire = frame("0056 0000 00000001 ffff 00 0267 02" + T + "02 00000000 00 00 00")
    check_request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, delete, wire)
    refused = {
        "results": [
            {
                "topic_id": TID,
                "partitions": [{"partition": 0, "error_code": 16, "error_message": None}],
            }
        ]
    }
    wire = frame("00000001 00 02" + T + "02 00000000 0010 00 00 00 00")
    check_response(ApiKey.DELETE_SHARE_GROUP_STATE, 0, refused, wire)


def test_describe_share_group_offsets_v0():
    every = {"groups": [{"group_id": "g", "topics": None}]}  # null: the group's own
    wire = frame("005a 0000 00000001 ffff 00 02 0267 00 00 00")
    assert check_request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, every, wire) == every
    some = {"groups": [{"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0, 1]}]}]}
    wire = frame("005a 0000 00000001 ffff 00 02 0267 02 0274 03 00000000 00000001 00 00 00")
    check_request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, some, wire)
    partition = {
        "partition_index": 0,
        "start_offset": 7,
        "leader_epoch": 3,
        "error_code": 0,
        "error_message": None,
    }
    answer = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "group_id": "g",
                "topics": [{"topic_name": "t", "topic_id": TID, "partitions": [partition]}],
                "error_code": 0,
                "error_message": None,
            }
        ],
    }
    wire = frame(
        "00000001 00 00000000 02 0267 02 0274"
        + T
        + "02 00000000 0000000000000007 00000003 0000 00 00"  # one partition
        + "00"  # the topic's tagged fields
        + "0000 00 00"  # the group's error code, null message, tagged fields
        + "00"
    )
    check_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, answer, wire)


def test_alter_share_group_offsets_v0():
    body = {
        "group_id": "g",
        "topics": [{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}],
    }
    wire = frame("005b 0000 00000001 ffff 00 0267 02 0274 02 00000000 0000000000000000 00 00 00")
    check_request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body, wire)
    done = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [
            {
                "topic_name": "t",
                "topic_id": TID,
                "partitions": [{"partition_index": 0, "error_code": 0, "error_message": None}],
            }
        ],
    }
    wire = frame("00000001 00 00000000 0000 00 02 0274" + T + "02 00000000 0000 00 00 00 00")
    check_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, done, wire)
    refused = {"throttle_time_ms": 0, "error_code": 68, "error_message": "m", "responses": []}
    wire = frame("00000001 00 00000000 0044 026d 01 00")  # NON_EMPTY_GROUP
    check_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, refused, wire)


def test_delete_share_group_offsets_v0():
    body = {"group_id": "g", "topics": [{"topic_name": "t"}]}
    wire = frame("005c 0000 00000001 ffff 00 0267 02 0274 00 00")
    check_request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body, wire)
    answer = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [{"topic_name": "t", "topic_id": TID, "error_code": 3, "error_message": None}],
    }
    wire = frame("00000001 00 00000000 0000 00 02 0274" + T + "0003 00 00 00")
    check_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, answer, wire)
