"""Flexible versions (KIP-482) byte for byte: bytes written by hand from the rules
(compact lengths = unsigned varint of length + 1, 0 = null; a tagged-field section
ending every struct; request header v2, response header v1 except ApiVersions'),
checked in both directions against the codec."""

from __future__ import annotations

import uuid

import pytest

from broker.protocol import (
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from broker.protocol.exceptions import InvalidRequest

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def frame(hexdump: str) -> bytes:
    payload = bytes.fromhex(hexdump)
    return len(payload).to_bytes(4, "big") + payload


def check_request(key, version, body: dict, wire: bytes, client_id=None, correlation_id=1):
    assert encode_request(key, version, correlation_id, client_id, body) == wire
    header, decoded = decode_request(wire[4:])
    assert header == RequestHeader(key, version, correlation_id, client_id)
    return decoded


def check_response(key, version, body: dict, wire: bytes, correlation_id=1):
    header = RequestHeader(key, version, correlation_id, None)
    assert b"".join(encode_response(header, body)) == wire
    corr, decoded = decode_response(key, version, wire[4:])
    assert corr == correlation_id
    return decoded


def test_api_versions_v3_request_compact_strings():
    wire = frame(
        "0012 0003 0000002a 0007" + b"rdkafka".hex() + "00"  # header v2: tagged fields
        "0b" + b"librdkafka".hex() + "06" + b"2.6.1".hex() + "00"
    )
    body = {"client_software_name": "librdkafka", "client_software_version": "2.6.1"}
    assert check_request(ApiKey.API_VERSIONS, 3, body, wire, "rdkafka", 42) == body


def test_api_versions_v3_response_keeps_header_v0_and_writes_a_tagged_field():
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
        "throttle_time_ms": 0,
        "finalized_features_epoch": 5,
    }
    wire = frame(
        "00000001"  # correlation id, no tagged fields: ApiVersions answers with header v0
        "0000"  # error code
        "02 0012 0000 0004 00"  # one api key, its empty tagged section
        "00000000"  # throttle
        "01 01 08 0000000000000005"  # one tagged field: tag 1, 8 bytes
    )
    decoded = check_response(ApiKey.API_VERSIONS, 3, body, wire)
    assert decoded["finalized_features_epoch"] == 5
    assert decoded["supported_features"] == [] and decoded["zk_migration_ready"] is False


def test_metadata_v12_request_by_topic_id():
    body = {
        "topics": [{"topic_id": TOPIC_ID, "name": None}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    wire = frame("0003 000c 00000001 ffff 0002" + TOPIC_ID.hex + "00 0001 00 00")
    decoded = check_request(ApiKey.METADATA, 12, body, wire)
    assert decoded == body | {"include_cluster_authorized_operations": False}  # v8-10 only


def test_metadata_v12_response():
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 0, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 0,
                        "leader_epoch": 3,
                        "replica_nodes": [0],
                        "isr_nodes": [0],
                        "offline_replicas": [],
                    }
                ],
                "topic_authorized_operations": -(2**31),
            }
        ],
    }
    wire = frame(
        "00000001 00"  # correlation id, header tagged fields
        "00000000"  # throttle
        "02 00000000 0268 00002384 00 00"  # one broker: id, "h", 9092, rack null, tags
        "0263 00000000"  # cluster id "c", controller 0
        "02 0000 0274" + TOPIC_ID.hex + "00"  # one topic: error, "t", id, not internal
        "02 0000 00000000 00000000 00000003 02 00000000 02 00000000 01 00"
        "80000000 00"  # authorized operations, topic tags
        "00"  # top-level tags
    )
    decoded = check_response(ApiKey.METADATA, 12, body, wire)
    assert decoded["topics"][0]["topic_id"] == TOPIC_ID


def test_produce_v9_request_and_response():
    request = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}],
    }
    wire = frame("0000 0009 00000001 ffff 0000 ffff 00007530 02 0274 02 00000000 04616263 00 00 00")
    decoded = check_request(ApiKey.PRODUCE, 9, request, wire)
    assert bytes(decoded["topic_data"][0]["partition_data"][0]["records"]) == b"abc"
    response = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 7,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                        "record_errors": [],
                        "error_message": None,
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    wire = frame(
        "00000001 00"
        "02 0274 02 00000000 0000 0000000000000007 ffffffffffffffff 0000000000000000"
        "01 00 00"  # no record errors, null message, partition tags
        "00"  # topic tags
        "00000000 00"
    )
    decoded = check_response(ApiKey.PRODUCE, 9, response, wire)
    assert decoded.pop("node_endpoints") == []  # v10+ only: the default
    assert decoded["responses"][0]["partition_responses"][0].pop("current_leader") == {
        "leader_id": -1,
        "leader_epoch": -1,
    }
    assert decoded == response


@pytest.mark.parametrize("version", [10, 11, 12])
def test_produce_v10_to_v12_response_names_the_leader_in_tagged_fields(version):
    """KIP-951: NOT_LEADER_OR_FOLLOWER with CurrentLeader (partition tag 0) and the
    leader's NodeEndpoints (top-level tag 0); v11 and v12 encode as v10."""
    response = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 6,
                        "base_offset": -1,
                        "log_append_time_ms": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": None,
                        "current_leader": {"leader_id": 2, "leader_epoch": 5},
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
        "node_endpoints": [{"node_id": 2, "host": "localhost", "port": 9092, "rack": None}],
    }
    wire = frame(
        "00000001 00"
        "02 0274 02 00000000 0006 ffffffffffffffff ffffffffffffffff ffffffffffffffff"
        "01 00"  # no record errors, null message
        "01 00 09 00000002 00000005 00"  # partition tag 0: CurrentLeader, its own tags
        "00"  # topic tags
        "00000000"
        "01 00 15 02 00000002 0a" + b"localhost".hex() + "00002384 00 00"  # NodeEndpoints
    )
    assert check_response(ApiKey.PRODUCE, version, response, wire) == response


def test_produce_v12_request_is_v9s():
    request = {
        "transactional_id": "tx",
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}],
    }
    wire = frame(
        "0000 000c 00000001 ffff 00 03 7478 ffff 00007530 02 0274 02 00000000 04616263 00 00 00"
    )
    check_request(ApiKey.PRODUCE, 12, request, wire)


def test_end_txn_v5_response_carries_the_bumped_producer_epoch():
    request = {
        "transactional_id": "tx",
        "producer_id": 1000,
        "producer_epoch": 3,
        "committed": True,
    }
    wire = frame("001a 0005 00000001 ffff 00 03 7478 00000000000003e8 0003 01 00")
    assert check_request(ApiKey.END_TXN, 5, request, wire) == request
    response = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 4}
    wire = frame("00000001 00 00000000 0000 00000000000003e8 0004 00")
    assert check_response(ApiKey.END_TXN, 5, response, wire) == response
    # v4 has neither: they are not written
    v4 = frame("00000001 00 00000000 0000 00")
    decoded = check_response(ApiKey.END_TXN, 4, {"throttle_time_ms": 0, "error_code": 0}, v4)
    assert (decoded["producer_id"], decoded["producer_epoch"]) == (-1, -1)


def test_api_versions_v3_and_v4_responses_report_the_transaction_version_feature():
    from broker.features import FinalizedFeatures

    features = FinalizedFeatures({"transaction.version": 2}, epoch=0)
    v4 = features.api_versions_fields(4)
    assert v4 == {
        "supported_features": [
            {"name": "group.version", "min_version": 0, "max_version": 1},
            {"name": "share.version", "min_version": 0, "max_version": 1},
            {"name": "transaction.version", "min_version": 0, "max_version": 2},
        ],
        "finalized_features_epoch": 0,
        "finalized_features": [
            {"name": "transaction.version", "max_version_level": 2, "min_version_level": 2}
        ],
    }
    # Before v4 a supported range from 0 is left out (KAFKA-17492); finalized stays.
    assert features.api_versions_fields(3)["supported_features"] == []
    assert features.api_versions_fields(2) == {}
    # Finalized at 0: not listed (Kafka's createFinalizedFeatureKeys).
    assert (
        FinalizedFeatures({"transaction.version": 0}).api_versions_fields(4)["finalized_features"]
        == []
    )
    # the frame of one supported feature, the codec's part
    tv_only = {
        "supported_features": [
            f for f in v4["supported_features"] if f["name"] == "transaction.version"
        ]
    }
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0} | v4 | tv_only
    name = "14" + b"transaction.version".hex()  # compact string: 19 chars, length + 1
    wire = frame(
        "00000001 0000 01 00000000"  # header v0; error, no api keys, throttle
        "03"  # three tagged fields
        "00 1a 02" + name + "0000 0002 00"  # 0: SupportedFeatures
        "01 08 0000000000000000"  # 1: FinalizedFeaturesEpoch
        "02 1a 02" + name + "0002 0002 00"  # 2: FinalizedFeatures (max, then min)
    )
    decoded = check_response(ApiKey.API_VERSIONS, 4, body, wire)
    assert decoded["finalized_features"] == v4["finalized_features"]


def test_fetch_v12_response_with_a_tagged_struct():
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 10,
        "last_stable_offset": 10,
        "log_start_offset": 0,
        "diverging_epoch": {"epoch": 3, "end_offset": 10},
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "t", "partitions": [partition]}],
    }
    wire = frame(
        "00000001 00"
        "00000000 0000 00000000"
        "02 0274 02 00000000 0000 000000000000000a 000000000000000a 0000000000000000"
        "00 ffffffff 01"  # aborted null, preferred replica, empty records
        "01 00 0d 00000003 000000000000000a 00"  # tag 0: diverging epoch (13 bytes)
        "00 00"  # topic and top-level tags
    )
    decoded = check_response(ApiKey.FETCH, 12, body, wire)
    got = decoded["responses"][0]["partitions"][0]
    assert got["diverging_epoch"] == {"epoch": 3, "end_offset": 10}
    assert got["current_leader"] == {"leader_id": -1, "leader_epoch": -1}


def test_fetch_v12_request_skips_an_unknown_tag_and_reads_cluster_id():
    body_hex = (
        "ffffffff 000001f4 00000001 7fffffff 00 00000000 ffffffff"  # replica..session epoch
        "02 0274 02 00000000 ffffffff 0000000000000005 ffffffff ffffffffffffffff 00100000 00 00"
        "01"  # no forgotten topics
        "01"  # rack id ""
        "02 00 02 0263 07 03 010203"  # tags: cluster_id "c" (tag 0), unknown tag 7
    )
    header, body = decode_request(bytes.fromhex("0001 000c 00000001 ffff 00" + body_hex))
    assert header.api_version == 12
    assert body["cluster_id"] == "c"
    assert body["topics"][0]["partitions"][0]["fetch_offset"] == 5


def test_find_coordinator_v4_batches_keys():
    request = {"key_type": 0, "coordinator_keys": ["g1", "g2"]}
    wire = frame("000a 0004 00000001 ffff 0000 03 03" + b"g1".hex() + "03" + b"g2".hex() + "00")
    decoded = check_request(ApiKey.FIND_COORDINATOR, 4, request, wire)
    assert decoded["coordinator_keys"] == ["g1", "g2"]


@pytest.mark.parametrize(
    "tail",
    [
        "05 01 02",  # tagged section announcing 5 fields, 1 present
        "01 00 ff 00",  # a tagged field longer than the request
        "01 00 01 ff",  # cluster id tag 0: a compact string of 254 bytes in 1 byte
    ],
)
def test_malformed_tagged_sections_are_invalid_requests(tail):
    body_hex = "ffffffff 000001f4 00000001 7fffffff 00 00000000 ffffffff 01 01 01" + tail
    with pytest.raises(InvalidRequest):
        decode_request(bytes.fromhex("0001 000c 00000001 ffff 00" + body_hex))


def test_incremental_alter_configs_v1_request():
    wire = frame(
        "002c 0001 00000001 0001" + b"c".hex() + "00"  # header v2
        "02"  # one resource
        "02"
        "02"
        + b"t".hex()  # TOPIC, "t"
        + "02"  # one config
        "0d" + b"retention.ms".hex() + "00"  # SET
        "05" + b"1000".hex() + "00"  # value, config's tagged fields
        "00"  # resource's tagged fields
        "00"
        "00"  # validate_only, tagged fields
    )
    body = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
            }
        ],
        "validate_only": False,
    }
    assert check_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, wire, "c") == body


def test_describe_cluster_v0_response():
    wire = frame(
        "00000001 00"  # response header v1
        "00000000 0000 00"  # throttle, error code, null error message
        "04" + b"abc".hex() + "00000000"  # cluster id, controller 0
        "02"
        "00000000"
        "02" + b"h".hex() + "00002384"
        "00"
        "00"  # broker 0 h:9092, no rack
        "80000000 00"  # authorized operations not computed, tagged fields
    )
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "cluster_id": "abc",
        "controller_id": 0,
        "brokers": [{"broker_id": 0, "host": "h", "port": 9092, "rack": None}],
        "cluster_authorized_operations": -(2**31),
    }
    decoded = check_response(ApiKey.DESCRIBE_CLUSTER, 0, body, wire)
    assert decoded["brokers"] == body["brokers"] and decoded["cluster_id"] == "abc"


def test_describe_topic_partitions_v0_request_with_a_cursor():
    body = {
        "topics": [{"name": "a"}, {"name": "b"}],
        "response_partition_limit": 300,
        "cursor": {"topic_name": "b", "partition_index": 5},
    }
    wire = frame(
        "004b 0000 00000001 ffff 00"  # header v2
        "03 0261 00 0262 00"  # two topics, each with its tagged fields
        "0000012c"  # response partition limit
        "01 0262 00000005 00"  # cursor present (int8 1), "b", 5, its tagged fields
        "00"
    )
    assert check_request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body, wire) == body


def test_describe_topic_partitions_v0_request_without_a_cursor():
    wire = frame("004b 0000 00000001 ffff 00 01 000007d0 ff 00")  # no topics, null cursor
    body = {"topics": [], "response_partition_limit": 2000, "cursor": None}
    assert check_request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body, wire) == body
    decoded = check_request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": []}, wire)
    assert decoded == body  # the limit's default is Kafka's 2000, the cursor's null


def test_describe_topic_partitions_v0_response():
    body = {
        "throttle_time_ms": 0,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 3,
                        "replica_nodes": [1, 2],
                        "isr_nodes": [1],
                        "eligible_leader_replicas": [],
                        "last_known_elr": None,
                        "offline_replicas": [2],
                    }
                ],
                "topic_authorized_operations": 0x100,
            },
            {
                "error_code": 29,
                "name": "x",
                "topic_id": uuid.UUID(int=0),
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": -(2**31),
            },
        ],
        "next_cursor": {"topic_name": "t", "partition_index": 1},
    }
    wire = frame(
        "00000001 00"  # response header v1
        "00000000"  # throttle
        "03"  # two topics
        "0000 0274" + TOPIC_ID.hex + "00"  # error, "t", id, not internal
        "02 0000 00000000 00000001 00000003"  # one partition: error, index, leader, epoch
        "03 00000001 00000002 02 00000001"  # replicas, isr
        "01 00"  # eligible leader replicas empty, last known ELR null
        "02 00000002 00"  # offline replicas, partition tags
        "00000100 00"  # authorized operations (DESCRIBE), topic tags
        "001d 0278" + "00" * 16 + "00 01 80000000 00"  # TOPIC_AUTHORIZATION_FAILED
        "01 0274 00000001 00"  # next cursor present: "t", 1, its tagged fields
        "00"
    )
    assert check_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body, wire) == body
    last = frame("00000001 00 00000000 01 ff 00")  # no topics, null next cursor
    decoded = check_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": []}, last)
    assert decoded == {"throttle_time_ms": 0, "topics": [], "next_cursor": None}


def test_describe_client_quotas_v1_request_and_response():
    wire = frame(
        "0030 0001 00000001 0001" + b"c".hex() + "00"  # header v2
        "02" + "05" + b"user".hex() + "00" + "06" + b"alice".hex() + "00"  # one component
        "01 00"  # strict, tagged fields
    )
    body = {
        "components": [{"entity_type": "user", "match_type": 0, "match": "alice"}],
        "strict": True,
    }
    assert check_request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body, wire, "c") == body

    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "entries": [
            {
                "entity": [{"entity_type": "user", "entity_name": None}],
                "values": [{"key": "producer_byte_rate", "value": 1048576.0}],
            }
        ],
    }
    wire = frame(
        "00000001 00"  # header v1
        "00000000 0000 00"  # throttle, error code, null message
        "02 02" + "05" + b"user".hex() + "00 00"  # one entry, its entity: the default user
        "02 13" + b"producer_byte_rate".hex() + "4130000000000000 00"  # 1048576.0
        "00 00"
    )
    assert check_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, response, wire) == response


def test_alter_client_quotas_v0_request_and_v1_response():
    wire = frame(
        "".join(
            [
                "0031 0000 00000001 0001" + b"c".hex(),  # header v1
                "00000001 00000002",  # one entry, an entity of two components
                "0004" + b"user".hex() + "0001" + b"u".hex(),
                "0009" + b"client-id".hex() + "ffff",  # the default client id
                "00000001 0012" + b"consumer_byte_rate".hex(),  # one op
                "4090000000000000 00",  # 1024.0, not removed
                "01",  # validate_only
            ]
        )
    )
    body = {
        "entries": [
            {
                "entity": [
                    {"entity_type": "user", "entity_name": "u"},
                    {"entity_type": "client-id", "entity_name": None},
                ],
                "ops": [{"key": "consumer_byte_rate", "value": 1024.0, "remove": False}],
            }
        ],
        "validate_only": True,
    }
    assert check_request(ApiKey.ALTER_CLIENT_QUOTAS, 0, body, wire, "c") == body

    response = {
        "throttle_time_ms": 0,
        "entries": [
            {
                "error_code": 42,
                "error_message": "bad",
                "entity": [{"entity_type": "user", "entity_name": "u"}],
            }
        ],
    }
    wire = frame(
        "00000001 00 00000000"
        "02 002a 04" + b"bad".hex() + "02 05" + b"user".hex() + "02" + b"u".hex() + "00 00"
        "00"
    )
    assert check_response(ApiKey.ALTER_CLIENT_QUOTAS, 1, response, wire) == response


def test_alter_partition_reassignments_v0_request_and_response():
    # Kafka's AlterPartitionReassignmentsRequest.json v0: timeout_ms, then topics of
    # partitions whose replicas are a nullable compact int32 array (null: cancel).
    wire = frame(
        "002d 0000 00000001 0001" + b"c".hex() + "00"  # header v2
        "00007530"  # timeout_ms 30000
        "02 02"
        + b"t".hex()  # one topic "t"
        + "03"  # two partitions
        "00000000 03 00000001 00000002 00"  # partition 0 -> [1, 2]
        "00000001 00 00"  # partition 1: null replicas (cancel)
        "00 00"  # the topic's, the request's tagged fields
    )
    body = {
        "timeout_ms": 30000,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "replicas": [1, 2]},
                    {"partition_index": 1, "replicas": None},
                ],
            }
        ],
    }
    assert check_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body, wire, "c") == body

    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "error_code": 0, "error_message": None},
                    {"partition_index": 1, "error_code": 85, "error_message": "no"},
                ],
            }
        ],
    }
    wire = frame(
        "00000001 00"  # header v1
        "00000000 0000 00"  # throttle, error code, null message
        "02 02" + b"t".hex() + "03"
        "00000000 0000 00 00"
        "00000001 0055 03" + b"no".hex() + "00"
        "00 00"
    )
    assert check_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, response, wire) == response


def test_list_partition_reassignments_v0_request_and_response():
    wire = frame(
        "002e 0000 00000001 0001" + b"c".hex() + "00"
        "0000ea60"  # timeout_ms 60000
        "02 02" + b"t".hex() + "02 00000000 00"  # topic t, partition indexes [0]
        "00"
    )
    body = {"timeout_ms": 60000, "topics": [{"name": "t", "partition_indexes": [0]}]}
    assert check_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body, wire, "c") == body
    everything = frame("002e 0000 00000001 0001" + b"c".hex() + "000000ea60 00 00")
    listed = {"timeout_ms": 60000, "topics": None}
    assert check_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listed, everything, "c") == listed

    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "replicas": [1, 2, 0],
                        "adding_replicas": [1, 2],
                        "removing_replicas": [0],
                    }
                ],
            }
        ],
    }
    wire = frame(
        "00000001 00"
        "00000000 0000 00"
        "02 02" + b"t".hex() + "02"
        "00000000 04 00000001 00000002 00000000"  # replicas
        "03 00000001 00000002"  # adding
        "02 00000000 00"  # removing, tagged fields
        "00 00"
    )
    assert check_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, response, wire) == response
    refused = {"throttle_time_ms": 0, "error_code": 41, "error_message": None, "topics": []}
    wire = frame("00000001 00 00000000 0029 00 01 00")
    assert check_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, refused, wire) == refused


INSTANCE = uuid.UUID("00112233445566778899aabbccddeeff")


def test_get_telemetry_subscriptions_v0_request_and_response():
    wire = frame("0047 0000 00000001 ffff 00" + INSTANCE.hex + "00")
    body = {"client_instance_id": INSTANCE}
    assert check_request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, body, wire) == body
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "client_instance_id": INSTANCE,
        "subscription_id": -2,
        "accepted_compression_types": [4, 3, 1, 2],
        "push_interval_ms": 1000,
        "telemetry_max_bytes": 1048576,
        "delta_temporality": False,
        "requested_metrics": ["org.apache.kafka.producer."],
    }
    prefix = b"org.apache.kafka.producer.".hex()
    wire = frame(
        "00000001 00"  # response header v1
        "00000000 0000" + INSTANCE.hex + "fffffffe"
        "05 04030102"  # compact array of int8: 4 items
        "000003e8 00100000 00"
        "02 1b" + prefix + "00"  # one compact string (26 bytes), the tagged section
    )
    assert check_response(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, body, wire) == body


def test_push_telemetry_v0_request_and_response():
    body = {
        "client_instance_id": INSTANCE,
        "subscription_id": 7,
        "terminating": True,
        "compression_type": 4,
        "metrics": b"\x0a\x00",
    }
    wire = frame("0048 0000 00000001 ffff 00" + INSTANCE.hex + "00000007 01 04 03 0a00 00")
    assert check_request(ApiKey.PUSH_TELEMETRY, 0, body, wire) == body
    body = {"throttle_time_ms": 0, "error_code": 118}  # TELEMETRY_TOO_LARGE
    wire = frame("00000001 00 00000000 0076 00")
    assert check_response(ApiKey.PUSH_TELEMETRY, 0, body, wire) == body


def test_list_client_metrics_resources_v0_request_and_response():
    wire = frame("004a 0000 00000001 ffff 00 00")
    assert check_request(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, {}, wire) == {}
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "client_metrics_resources": [{"name": "sub1"}, {"name": "all"}],
    }
    wire = frame(
        "00000001 00 00000000 0000 0305" + b"sub1".hex() + "00 04" + b"all".hex() + "00 00"
    )
    assert check_response(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, body, wire) == body
