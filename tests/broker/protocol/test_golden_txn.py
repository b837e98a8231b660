"""Transaction APIs byte for byte: frames written by hand from Kafka's message JSON,
checked in both directions against the codec (classic and flexible versions)."""

from __future__ import annotations

from broker.protocol import (
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


def frame(hexdump: str) -> bytes:
    payload = bytes.fromhex(hexdump)
    return len(payload).to_bytes(4, "big") + payload


def check_request(key, version, body: dict, wire: bytes):
    assert encode_request(key, version, 7, None, body) == wire
    header, decoded = decode_request(wire[4:])
    assert header == RequestHeader(key, version, 7, None)
    return decoded


def check_response(key, version, body: dict, wire: bytes):
    assert b"".join(encode_response(RequestHeader(key, version, 7, None), body)) == wire
    corr, decoded = decode_response(key, version, wire[4:])
    assert corr == 7
    return decoded


def test_end_txn_v1_request_classic():
    body = {"transactional_id": "t", "producer_id": 5, "producer_epoch": 2, "committed": True}
    wire = frame("001a 0001 00000007 ffff0001" + b"t".hex() + "0000000000000005 0002 01")
    assert check_request(ApiKey.END_TXN, 1, body, wire) == body


def test_end_txn_v3_request_flexible():
    body = {"transactional_id": "t", "producer_id": 5, "producer_epoch": 2, "committed": False}
    wire = frame("001a 0003 00000007 ffff 0002" + b"t".hex() + "0000000000000005 0002 00 00")
    assert check_request(ApiKey.END_TXN, 3, body, wire) == body


def test_add_partitions_to_txn_v3_request():
    body = {
        "v3_and_below_transactional_id": "t",
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "a", "partitions": [0, 2]}],
    }
    wire = frame(
        "0018 0003 00000007 ffff 00"
        "02" + b"t".hex() + "0000000000000001 0000"
        "02 02" + b"a".hex() + "03 00000000 00000002 00"  # one topic, two partitions
        "00"
    )
    decoded = check_request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body, wire)
    assert decoded["v3_and_below_topics"] == [{"name": "a", "partitions": [0, 2]}]


def test_add_partitions_to_txn_v4_verify_only_request_and_response():
    request = {
        "transactions": [
            {
                "transactional_id": "t",
                "producer_id": 9,
                "producer_epoch": 1,
                "verify_only": True,
                "topics": [{"name": "a", "partitions": [3]}],
            }
        ]
    }
    wire = frame(
        "0018 0004 00000007 ffff 00"
        "02"  # one transaction
        "02" + b"t".hex() + "0000000000000009 0001 01"
        "02 02" + b"a".hex() + "02 00000003 00"
        "00"  # transaction's tagged fields
        "00"
    )
    decoded = check_request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, request, wire)
    assert decoded["transactions"] == request["transactions"]
    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results_by_transaction": [
            {
                "transactional_id": "t",
                "topic_results": [
                    {
                        "name": "a",
                        "results_by_partition": [
                            {"partition_index": 3, "partition_error_code": 48}
                        ],
                    }
                ],
            }
        ],
    }
    wire = frame(
        "00000007 00"
        "00000000 0000"
        "02 02" + b"t".hex() + "02 02" + b"a".hex() + "02 00000003 0030 00 00 00"
        "00"
    )
    decoded = check_response(ApiKey.ADD_PARTITIONS_TO_TXN, 4, response, wire)
    assert decoded["results_by_transaction"] == response["results_by_transaction"]


def test_write_txn_markers_v0_request():
    body = {
        "markers": [
            {
                "producer_id": 3,
                "producer_epoch": 4,
                "transaction_result": True,
                "topics": [{"name": "a", "partition_indexes": [1]}],
                "coordinator_epoch": 6,
            }
        ]
    }
    wire = frame(
        "001b 0000 00000007 ffff"
        "00000001 0000000000000003 0004 01"
        "00000001 0001" + b"a".hex() + "00000001 00000001"
        "00000006"
    )
    assert check_request(ApiKey.WRITE_TXN_MARKERS, 0, body, wire) == body


def test_add_partitions_to_txn_v5_add_from_a_leader_and_transaction_abortable():
    """Transactions v2: a partition leader adds a Produce v12's partition
    (`verify_only` false); v5 answers TRANSACTION_ABORTABLE (120) where it applies."""
    request = {
        "transactions": [
            {
                "transactional_id": "t",
                "producer_id": 9,
                "producer_epoch": 2,
                "verify_only": False,
                "topics": [{"name": "a", "partitions": [3]}],
            }
        ]
    }
    wire = frame(
        "0018 0005 00000007 ffff 00"
        "02 02" + b"t".hex() + "0000000000000009 0002 00"
        "02 02" + b"a".hex() + "02 00000003 00 00 00"
    )
    decoded = check_request(ApiKey.ADD_PARTITIONS_TO_TXN, 5, request, wire)
    assert decoded["transactions"] == request["transactions"]
    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results_by_transaction": [
            {
                "transactional_id": "t",
                "topic_results": [
                    {
                        "name": "a",
                        "results_by_partition": [
                            {"partition_index": 3, "partition_error_code": 120}
                        ],
                    }
                ],
            }
        ],
    }
    wire = frame(
        "00000007 00 00000000 0000"
        "02 02" + b"t".hex() + "02 02" + b"a".hex() + "02 00000003 0078 00 00 00 00"
    )
    decoded = check_response(ApiKey.ADD_PARTITIONS_TO_TXN, 5, response, wire)
    assert decoded["results_by_transaction"] == response["results_by_transaction"]


def test_txn_offset_commit_v5_is_v4s_bytes():
    """v5 only tells the broker that the client runs transactions v2 (no
    AddOffsetsToTxn before it): the same fields as v3 and v4."""
    body = {
        "transactional_id": "t",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 3,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": "a",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 10,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    for version in (4, 5):
        wire = frame(
            f"001c 000{version} 00000007 ffff 00"
            + "02"
            + b"t".hex()
            + "02"
            + b"g".hex()
            + "0000000000000001 0003 ffffffff"
            "01 00"  # empty member id, null instance id
            "02 02" + b"a".hex() + "02 00000000 000000000000000a ffffffff 01 00 00"
            "00"
        )
        assert check_request(ApiKey.TXN_OFFSET_COMMIT, version, body, wire) == body
    response = {
        "throttle_time_ms": 0,
        "topics": [{"name": "a", "partitions": [{"partition_index": 0, "error_code": 120}]}],
    }
    wire = frame("00000007 00 00000000 02 02" + b"a".hex() + "02 00000000 0078 00 00 00")
    assert check_response(ApiKey.TXN_OFFSET_COMMIT, 5, response, wire) == response


def test_txn_offset_commit_v3_request_has_group_member_fields():
    body = {
        "transactional_id": "t",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 0,
        "generation_id": 2,
        "member_id": "m",
        "group_instance_id": None,
        "topics": [
            {
                "name": "a",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 10,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    }
    wire = frame(
        "001c 0003 00000007 ffff 00"
        "02" + b"t".hex() + "02" + b"g".hex() + "0000000000000001 0000 00000002"
        "02" + b"m".hex() + "00"  # member id, null instance id
        "02 02" + b"a".hex() + "02 00000000 000000000000000a ffffffff 00 00 00"
        "00"
    )
    assert check_request(ApiKey.TXN_OFFSET_COMMIT, 3, body, wire) == body


def test_list_transactions_v1_request_and_describe_v0_response():
    body = {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": 1000}
    wire = frame("0042 0001 00000007 ffff 0002 08" + b"Ongoing".hex() + "01 00000000000003e8 00")
    assert check_request(ApiKey.LIST_TRANSACTIONS, 1, body, wire) == body
    response = {
        "throttle_time_ms": 0,
        "transaction_states": [
            {
                "error_code": 0,
                "transactional_id": "t",
                "transaction_state": "Empty",
                "transaction_timeout_ms": 60000,
                "transaction_start_time_ms": -1,
                "producer_id": 1,
                "producer_epoch": 0,
                "topics": [],
            }
        ],
    }
    wire = frame(
        "00000007 00 00000000 02 0000"
        "02" + b"t".hex() + "06" + b"Empty".hex() + "0000ea60 ffffffffffffffff"
        "0000000000000001 0000 01 00 00"
    )
    assert check_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, response, wire) == response
