"""Byte-exact checks against frames written out by hand from the protocol spec."""

from __future__ import annotations

import struct

import pytest

from broker.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    UnsupportedVersion,
    api_versions_body,
    api_versions_fallback,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_api_versions_v0_request():
    wire = frame(bytes.fromhex("0012 0000 00000001 0004") + b"kcat")
    assert encode_request(ApiKey.API_VERSIONS, 0, 1, "kcat", {}) == wire
    header, body = decode_request(wire[4:])
    assert header == RequestHeader(18, 0, 1, "kcat")
    assert body == {"client_software_name": "", "client_software_version": ""}  # v3+ only


def test_api_versions_v0_response():
    body = {
        "error_code": 0,
        "api_keys": [
            {"api_key": 0, "min_version": 0, "max_version": 8},
            {"api_key": 18, "min_version": 0, "max_version": 2},
        ],
    }
    wire = frame(bytes.fromhex("00000001 0000 00000002 0000 0000 0008 0012 0000 0002"))
    assert encode_response(RequestHeader(18, 0, 1, "kcat"), body) == [wire]
    defaults = {
        "throttle_time_ms": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }  # fields of later versions
    assert decode_response(18, 0, wire[4:]) == (1, body | defaults)


def test_api_versions_v1_response_has_throttle_after_keys():
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 5}
    wire = frame(bytes.fromhex("00000009 0000 00000000 00000005"))
    assert encode_response(RequestHeader(18, 1, 9, None), body) == [wire]


RANGES = [
    (0, 12), (1, 17), (2, 6), (3, 12), (8, 9), (9, 9), (10, 4), (11, 8), (12, 4), (13, 5),
    (14, 5), (15, 6), (16, 5), (17, 1), (18, 4), (19, 7), (20, 6), (21, 2), (22, 5),
    (23, 4), (24, 5), (25, 4), (26, 5), (27, 1), (28, 5), (29, 3), (30, 3), (31, 3), (32, 4),
    (33, 2), (35, 4), (36, 2), (37, 3), (42, 2), (43, 2), (44, 1), (45, 0), (46, 0),
    (47, 0), (48, 1), (49, 1), (50, 0), (51, 0), (60, 1), (61, 0), (65, 0), (66, 1),
    (68, 1), (69, 1), (71, 0), (72, 0), (74, 0), (75, 0), (76, 1), (77, 1), (78, 1), (79, 1),
    (83, 0), (84, 0), (85, 0), (86, 0), (90, 0), (91, 0), (92, 0),
]  # fmt: skip
# APIs whose version 0 Kafka removed (KIP-932's early access): advertised from 1
MIN_VERSIONS = {76: 1, 77: 1, 78: 1, 79: 1}


def test_api_versions_above_ours_fallback_bytes():
    # An ApiVersions v5 request, newer than the broker: header v2 (client id, empty
    # tagged fields), then a compact-string body the broker must not parse.
    request = (
        bytes.fromhex("0012 0005 0000002a 0007")
        + b"rdkafka"
        + b"\x00"  # header tagged fields
        + b"\x08librdkafka\x062.6.1\x00"  # compact strings + tagged fields
    )
    header, pos = decode_request_header(request, flexible=True)
    assert header == RequestHeader(18, 5, 42, "rdkafka") and pos == 18
    try:
        decode_request(request)
    except UnsupportedVersion as exc:
        assert exc.header == header and exc.correlation_id == 42
        answer = api_versions_fallback(exc.header)
    else:
        raise AssertionError("ApiVersions v5 must not be parsed")
    entries = b"".join(struct.pack(">hhh", key, MIN_VERSIONS.get(key, 0), hi) for key, hi in RANGES)
    expected = frame(struct.pack(">ihi", 42, 35, len(RANGES)) + entries)
    assert answer == [expected]
    assert b"".join(encode_response(header, api_versions_body(35))) == expected


def test_api_versions_body_lists_supported_ranges():
    body = api_versions_body()
    assert body["error_code"] == ErrorCode.NONE
    got = [(k["api_key"], k["min_version"], k["max_version"]) for k in body["api_keys"]]
    assert got == [(key, MIN_VERSIONS.get(key, 0), hi) for key, hi in RANGES]


def test_metadata_v1_request_null_topics():
    wire = frame(bytes.fromhex("0003 0001 00000005 ffff ffffffff"))
    assert encode_request(ApiKey.METADATA, 1, 5, None, {"topics": None}) == wire
    header, body = decode_request(wire[4:])
    assert header == RequestHeader(3, 1, 5, None)
    assert body["topics"] is None


def test_metadata_v0_empty_topics_and_absent_key():
    wire = frame(bytes.fromhex("0003 0000 00000005 ffff 00000000"))
    assert encode_request(ApiKey.METADATA, 0, 5, None, {}) == wire
    assert encode_request(ApiKey.METADATA, 0, 5, None, {"topics": None}) == wire


def test_produce_v3_request_by_hand():
    records = bytes(range(70))
    wire = frame(
        bytes.fromhex("0000 0003 00000063 0003")
        + b"cli"
        + bytes.fromhex("ffff")  # transactional_id: null
        + bytes.fromhex("ffff")  # acks: -1
        + bytes.fromhex("000005dc")  # timeout_ms: 1500
        + bytes.fromhex("00000001 0004")  # one topic, name length 4
        + b"logs"
        + bytes.fromhex("00000001 00000002")  # one partition: index 2
        + struct.pack(">i", len(records))
        + records
    )
    header, body = decode_request(wire[4:])
    assert header == RequestHeader(0, 3, 99, "cli")
    assert body["transactional_id"] is None
    assert body["acks"] == -1 and body["timeout_ms"] == 1500
    (topic,) = body["topic_data"]
    assert topic["name"] == "logs"
    (partition,) = topic["partition_data"]
    assert partition["index"] == 2
    assert isinstance(partition["records"], memoryview)
    assert partition["records"] == records
    assert partition["records"].obj is wire or bytes(partition["records"].obj) == wire[4:]
    assert encode_request(0, 3, 99, "cli", body) == wire


class SizedSlice:
    """A record set given as a sized object that is not bytes."""

    def __len__(self):
        return 1000


class FetchSliceLike:
    """Like broker.log's FetchSlice: file, position and length, no __len__."""

    file = None
    position = 4096
    length = 1000


@pytest.mark.parametrize("piece", [SizedSlice(), FetchSliceLike()], ids=["len", "length"])
def test_fetch_v11_response_with_file_slice(piece):
    body = {
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": 0, "high_watermark": 7, "records": piece},
                    {"partition_index": 1, "error_code": 1},
                ],
            }
        ]
    }
    parts = encode_response(RequestHeader(1, 11, 3, None), body)
    assert len(parts) == 3 and parts[1] is piece
    head, tail = parts[0], parts[2]
    assert int.from_bytes(head[:4], "big") == len(head) + 1000 + len(tail) - 4
    partition0 = struct.pack(">ihqqqiii", 0, 0, 7, -1, -1, -1, -1, 1000)
    assert head == (
        struct.pack(">iiihii", len(head) + 1000 + len(tail) - 4, 3, 0, 0, 0, 1)
        + bytes.fromhex("0001")
        + b"t"
        + struct.pack(">i", 2)
        + partition0
    )
    # second partition: defaults (lso/log start -1, null aborted txns, replica -1)
    # and an empty record set
    assert tail == struct.pack(">ihqqqiii", 1, 1, 0, -1, -1, -1, -1, 0)
