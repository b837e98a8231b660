"""Hostile input: only the documented exceptions come out, with useful context."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import (
    DEFAULT_MAX_REQUEST_SIZE,
    SUPPORTED_VERSIONS,
    ApiKey,
    FrameTooLarge,
    InvalidRequest,
    InvalidResponse,
    UnsupportedVersion,
    decode_request,
    decode_response,
    encode_request,
    read_frame_size,
)

PRODUCE = encode_request(
    ApiKey.PRODUCE,
    8,
    77,
    "producer-1",
    {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "logs",
                "partition_data": [{"index": i, "records": b"x" * 30} for i in range(3)],
            }
        ],
    },
)[4:]


def test_frame_size_limits():
    assert read_frame_size(struct.pack(">i", 0)) == 0
    assert read_frame_size(struct.pack(">i", DEFAULT_MAX_REQUEST_SIZE)) == DEFAULT_MAX_REQUEST_SIZE
    with pytest.raises(FrameTooLarge):
        read_frame_size(struct.pack(">i", DEFAULT_MAX_REQUEST_SIZE + 1))
    with pytest.raises(FrameTooLarge):
        read_frame_size(struct.pack(">i", 1001), max_size=1000)
    with pytest.raises(FrameTooLarge):
        read_frame_size(struct.pack(">i", -1))
    with pytest.raises(FrameTooLarge) as info:
        read_frame_size(b"\xff\xff\xff\xff")
    assert info.value.size == -1
    with pytest.raises(InvalidRequest):
        read_frame_size(b"\x00\x00")


def test_every_truncation_of_a_produce_request_is_invalid():
    for cut in range(len(PRODUCE)):
        with pytest.raises(InvalidRequest) as info:
            decode_request(PRODUCE[:cut])
        assert not isinstance(info.value, UnsupportedVersion)
        if cut >= 20:  # header complete: the message names the API and version
            assert "PRODUCE v8" in str(info.value)
            assert info.value.header.correlation_id == 77


def test_trailing_bytes_are_invalid():
    with pytest.raises(InvalidRequest, match="1 trailing bytes"):
        decode_request(PRODUCE + b"\x00")


def test_unknown_api_key_and_unsupported_versions():
    frame = struct.pack(">hhih", 99, 0, 1234, -1)
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (99, 0, 1234)
    assert info.value.header.client_id is None
    for key, (_, hi) in SUPPORTED_VERSIONS.items():
        frame = struct.pack(">hhih", key, hi + 1, 5, 1) + b"c" + b"\x00" * 64
        with pytest.raises(UnsupportedVersion) as info:
            decode_request(frame)
        assert info.value.header.api_key == key and info.value.correlation_id == 5
    with pytest.raises(UnsupportedVersion):
        decode_request(struct.pack(">hhih", ApiKey.FETCH, -1, 5, -1))


def test_negative_and_absurd_array_counts():
    header = struct.pack(">hhih", ApiKey.DELETE_TOPICS, 0, 1, -1)
    with pytest.raises(InvalidRequest, match="invalid count -2"):
        decode_request(header + struct.pack(">ii", -2, 0))
    with pytest.raises(InvalidRequest, match="invalid count -1"):  # not nullable
        decode_request(header + struct.pack(">ii", -1, 0))
    with pytest.raises(InvalidRequest, match="exceeds the remaining bytes"):
        decode_request(header + struct.pack(">ii", 2**31 - 1, 0))
    fetch = struct.pack(">hhih", ApiKey.FETCH, 4, 1, -1) + struct.pack(">iiiib", -1, 0, 0, 0, 0)
    with pytest.raises(InvalidRequest, match="exceeds the remaining bytes"):
        decode_request(fetch + struct.pack(">i", 2**31 - 1))


def test_negative_string_and_bytes_lengths():
    header = struct.pack(">hhih", ApiKey.SASL_HANDSHAKE, 0, 1, -1)
    with pytest.raises(InvalidRequest, match="non-nullable string"):
        decode_request(header + struct.pack(">h", -1))
    with pytest.raises(InvalidRequest, match="runs past the end"):
        decode_request(header + struct.pack(">h", 100) + b"abc")
    auth = struct.pack(">hhih", ApiKey.SASL_AUTHENTICATE, 0, 1, -1)
    with pytest.raises(InvalidRequest, match="non-nullable bytes"):
        decode_request(auth + struct.pack(">i", -5))
    produce = struct.pack(">hhih", ApiKey.PRODUCE, 0, 1, -1) + struct.pack(">hii", 1, 0, 1)
    produce += struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 0)
    with pytest.raises(InvalidRequest, match="records of length -2"):
        decode_request(produce + struct.pack(">i", -2))
    with pytest.raises(InvalidRequest):
        decode_request(header + struct.pack(">h", 2) + b"\xff\xfe")  # not UTF-8


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_invalid_request(data):
    try:
        decode_request(data)
    except InvalidRequest:
        pass


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(sorted(SUPPORTED_VERSIONS)),
    data=st.data(),
)
def test_random_bodies_behind_a_valid_header(key, data):
    version = data.draw(st.integers(*SUPPORTED_VERSIONS[key]))
    tail = data.draw(st.binary(max_size=120))
    try:
        decode_request(struct.pack(">hhih", key, version, 1, 2) + b"id" + tail)
    except InvalidRequest as exc:
        assert not isinstance(exc, UnsupportedVersion)
    try:
        decode_response(key, version, struct.pack(">i", 1) + tail)
    except InvalidResponse:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_produce_frames(data):
    frame = bytearray(PRODUCE)
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_request(bytes(frame))
    except InvalidRequest:
        pass


def test_decode_response_rejects_garbage():
    with pytest.raises(InvalidResponse):
        decode_response(ApiKey.METADATA, 1, b"\x00\x00")
    with pytest.raises(InvalidResponse):
        decode_response(ApiKey.METADATA, 99, b"\x00\x00\x00\x00")
    with pytest.raises(InvalidResponse, match="trailing"):
        decode_response(ApiKey.HEARTBEAT, 0, b"\x00\x00\x00\x01\x00\x00\x00")
