"""Cross-check against kafka-python's protocol classes.

Generic checks: random bodies encoded by us are decoded by kafka-python and re-encoded
byte-for-byte, both by its hand-written classes (kafka.protocol.old) and by the classes
it generates from Kafka's JSON schemas (every API at every version). Targeted checks:
requests built with kafka-python decode to the values put in, and our responses decode
in kafka-python to what we meant.
"""

from __future__ import annotations

import importlib
from io import BytesIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

from broker.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    UnsupportedVersion,
    api_versions_body,
    api_versions_fallback,
    decode_request,
    encode_response,
)
from broker.protocol.registry import REQUEST_CODECS, RESPONSE_CODECS, SCHEMAS
from tests.broker.protocol.strategies import body

_MODULES = (
    "admin api_versions commit fetch find_coordinator group init_producer_id list_offsets "
    "metadata offset_for_leader_epoch produce sasl_authenticate sasl_handshake"
).split()


def _kafka_python_classes():
    classes = {}
    for name in _MODULES:
        module = importlib.import_module(f"kafka.protocol.old.{name}")
        for attr in dir(module):
            versions = getattr(module, attr)
            if isinstance(versions, list) and versions and hasattr(versions[0], "API_KEY"):
                for cls in versions:
                    if not cls.__name__.startswith(attr + "_"):
                        continue  # kafka-python lists AlterConfigsRequest_v1 as a response
                    is_request = attr.endswith("Request")
                    classes[(cls.API_KEY, cls.API_VERSION, is_request)] = cls
    return classes


# Hand-written classes that disagree with Kafka's JSON (the JSON classes are checked
# at these versions below): (api_key, version, is_request) -> why.
KAFKA_PYTHON_MISTAKES = {
    (ApiKey.DESCRIBE_LOG_DIRS, 0, True): "partitions is one int32, not an array",
    (ApiKey.DESCRIBE_ACLS, 2, True): "v2 is flexible; the class reuses v1's schema",
    (ApiKey.DESCRIBE_ACLS, 2, False): "v2 is flexible; the class reuses v1's schema",
}
KP = {k: v for k, v in _kafka_python_classes().items() if k not in KAFKA_PYTHON_MISTAKES}


def _our_body_bytes(api_key, version, is_request, value) -> bytes:
    if api_key == ApiKey.API_VERSIONS and not is_request:
        value["error_code"] = 0  # kafka-python reads any ApiVersions error as a v0 body
    codecs = REQUEST_CODECS if is_request else RESPONSE_CODECS
    parts: list = []
    codecs[(api_key, version)].encode(value, parts)
    return b"".join(parts)


CASES = [
    (key, is_request)
    for key in SCHEMAS
    for is_request in (True, False)
    if any((key, v, is_request) in KP for v in range(SCHEMAS[key].max_version + 1))
]


@pytest.mark.parametrize(
    ("api_key", "is_request"),
    CASES,
    ids=[f"{k.name}-{'req' if r else 'resp'}" for k, r in CASES],
)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_and_rewrites_our_bytes(api_key, is_request, data):
    versions = [
        v for v in range(SCHEMAS[api_key].max_version + 1) if (api_key, v, is_request) in KP
    ]
    version = data.draw(st.sampled_from(versions), label="version")
    fields = SCHEMAS[api_key].request if is_request else SCHEMAS[api_key].response
    ours = _our_body_bytes(api_key, version, is_request, data.draw(body(fields, version)))
    theirs = KP[(api_key, version, is_request)].decode(ours)
    assert theirs.encode() == ours


def _json_class(api_key, is_request):
    """kafka-python's message class generated from Kafka's own JSON schema (None:
    kafka-python has none)."""
    name = "".join(w.capitalize() for w in api_key.name.split("_"))
    name += "Request" if is_request else "Response"
    for module in ("admin", "consumer", "metadata", "producer", "sasl"):
        cls = getattr(importlib.import_module(f"kafka.protocol.{module}"), name, None)
        if cls is not None:
            return cls
    return None


# APIs kafka-python has no class (nor message JSON) for: their bytes are held to
# golden frames written by hand from Kafka's message definitions
# (test_golden_consumer_groups.py, test_golden_flexible.py's KIP-714 frames,
# test_golden_share.py) and to
# the clients that send them (confluent-kafka's group.protocol=consumer and its
# metrics push).
NOT_IN_KAFKA_PYTHON = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    ApiKey.PUSH_TELEMETRY,
    ApiKey.LIST_CLIENT_METRICS_RESOURCES,
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.READ_SHARE_GROUP_STATE,
    ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
}

ALL_CASES = [
    (key, is_request)
    for key in SCHEMAS
    if key not in NOT_IN_KAFKA_PYTHON
    for is_request in (True, False)
]


def test_apis_without_a_kafka_python_class_are_listed():
    missing = {key for key in SCHEMAS if _json_class(key, True) is None}
    assert missing == NOT_IN_KAFKA_PYTHON


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    ("api_key", "is_request"),
    ALL_CASES,
    ids=[f"{k.name}-{'req' if r else 'resp'}" for k, r in ALL_CASES],
)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_json_classes_agree_at_every_version(api_key, is_request, data):
    version = data.draw(st.integers(0, SCHEMAS[api_key].max_version), label="version")
    fields = SCHEMAS[api_key].request if is_request else SCHEMAS[api_key].response
    ours = _our_body_bytes(api_key, version, is_request, data.draw(body(fields, version)))
    theirs = _json_class(api_key, is_request)[version].decode(ours)
    # the base encode: DeleteTopicsRequest's override trips over a decoded object
    assert ApiMessage.encode(theirs) == ours


def _request_frame(request, correlation_id=11, client_id="kp"):
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return request.encode(header=True, framed=True)[4:]


def test_metadata_v1_request_from_kafka_python():
    cls = KP[(ApiKey.METADATA, 1, True)]
    header, decoded = decode_request(_request_frame(cls(topics=None)))
    assert header == RequestHeader(3, 1, 11, "kp")
    assert decoded["topics"] is None
    _, decoded = decode_request(_request_frame(cls(topics=["a", "b"])))
    assert [t["name"] for t in decoded["topics"]] == ["a", "b"]


def test_produce_v3_request_from_kafka_python():
    cls = KP[(ApiKey.PRODUCE, 3, True)]
    req = cls(
        transactional_id=None,
        required_acks=-1,
        timeout=1500,
        topics=[("logs", [(0, b"batch-zero"), (5, b"batch-five")])],
    )
    header, decoded = decode_request(_request_frame(req, correlation_id=3))
    assert header.api_version == 3 and header.correlation_id == 3
    assert decoded["acks"] == -1 and decoded["timeout_ms"] == 1500
    partitions = decoded["topic_data"][0]["partition_data"]
    assert [(p["index"], bytes(p["records"])) for p in partitions] == [
        (0, b"batch-zero"),
        (5, b"batch-five"),
    ]


@pytest.mark.parametrize("version", [4, 11])
def test_fetch_request_from_kafka_python(version):
    cls = KP[(ApiKey.FETCH, version, True)]
    partition = (2, 100, 1048576) if version == 4 else (2, 7, 100, -1, 1048576)
    args = [-1, 500, 1, 52428800, 0]
    if version == 11:
        args += [0, -1]
    args.append([("logs", [partition])])
    if version == 11:
        args += [[], "rack-a"]
    _, decoded = decode_request(_request_frame(cls(*args)))
    assert decoded["max_wait_ms"] == 500 and decoded["max_bytes"] == 52428800
    (p,) = decoded["topics"][0]["partitions"]
    assert (p["partition"], p["fetch_offset"], p["partition_max_bytes"]) == (2, 100, 1048576)
    if version == 11:
        assert p["current_leader_epoch"] == 7 and decoded["rack_id"] == "rack-a"
    else:
        assert p["current_leader_epoch"] == -1 and decoded["rack_id"] == ""


def test_api_versions_v0_request_from_kafka_python():
    cls = KP[(ApiKey.API_VERSIONS, 0, True)]
    header, decoded = decode_request(_request_frame(cls()))
    assert header == RequestHeader(18, 0, 11, "kp")
    assert decoded == {"client_software_name": "", "client_software_version": ""}


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_flexible_request_and_response_with_kafka_python(version):
    cls = KP[(ApiKey.API_VERSIONS, version, True)]
    request = cls(client_software_name="kafka-python", client_software_version="3.0", tags={})
    header, decoded = decode_request(_request_frame(request, correlation_id=99))
    assert header == RequestHeader(18, version, 99, "kp")
    assert decoded == {"client_software_name": "kafka-python", "client_software_version": "3.0"}
    (answer,) = encode_response(header, api_versions_body())
    stream = BytesIO(answer[4:])
    response_cls = KP[(ApiKey.API_VERSIONS, version, False)]
    assert response_cls.parse_header(stream).correlation_id == 99  # header v0, always
    response = response_cls.decode(stream)
    assert response.error_code == ErrorCode.NONE
    assert (18, 0, 4) in [tuple(k)[:3] for k in response.api_keys]


def test_api_versions_above_ours_gets_the_v0_fallback():
    request = bytes.fromhex("0012 0005 00000063 0002") + b"kp" + b"\x00\x01\x01\x00"
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(request)
    assert info.value.correlation_id == 99
    (answer,) = api_versions_fallback(info.value.header)
    stream = BytesIO(answer[4:])
    assert KP[(ApiKey.API_VERSIONS, 0, False)].parse_header(stream).correlation_id == 99
    response = KP[(ApiKey.API_VERSIONS, 0, False)].decode(stream)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert (18, 0, 4) in [tuple(k) for k in response.api_keys]


def test_our_fetch_v11_response_in_kafka_python():
    body = {
        "responses": [
            {
                "topic": "logs",
                "partitions": [
                    {"partition_index": 1, "high_watermark": 42, "records": b"RECORDS"},
                ],
            }
        ]
    }
    (frame,) = encode_response(RequestHeader(1, 11, 8, None), body)
    stream = BytesIO(frame[4:])
    cls = KP[(ApiKey.FETCH, 11, False)]
    assert cls.parse_header(stream).correlation_id == 8
    response = cls.decode(stream)
    (topic, partitions) = response.responses[0]
    (p,) = partitions
    assert topic == "logs"
    assert p[:7] == (1, 0, 42, -1, -1, None, -1) and p[7] == b"RECORDS"


def test_our_metadata_v1_response_in_kafka_python():
    body = {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092}],
        "controller_id": 1,
        "topics": [
            {
                "name": "logs",
                "partitions": [
                    {"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
                ],
            }
        ],
    }
    (frame,) = encode_response(RequestHeader(3, 1, 4, None), body)
    response = KP[(ApiKey.METADATA, 1, False)].decode(frame[8:])
    assert [tuple(b) for b in response.brokers] == [(1, "127.0.0.1", 9092, None)]
    assert response.controller_id == 1
    assert tuple(response.topics[0][:3]) == (0, "logs", False)
    assert tuple(response.topics[0][3][0]) == (0, 0, 1, [1], [1])
