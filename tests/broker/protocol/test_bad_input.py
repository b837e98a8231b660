"""Hostile input: only the documented exceptions come out, with useful context."""

from __future__ import annotations

import struct

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from broker.protocol import (
    DEFAULT_MAX_REQUEST_SIZE,
    SUPPORTED_VERSIONS,
    ApiKey,
    FrameTooLarge,
    InvalidRequest,
    InvalidResponse,
    RequestHeader,
    UnsupportedVersion,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_frame_size,
)
from broker.protocol.registry import SCHEMAS, is_flexible
from tests.broker.protocol.strategies import body, plain


def decode_strict(frame):
    """The codec's own check: every byte of the frame belongs to the request."""
    return decode_request(frame, strict=True)


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


def _same_or_normalised(original: bytes, again: bytes, decode, flexible: bool) -> None:
    """`again` (decode then encode of `original`) must equal `original`.

    In non-flexible versions integers, strings (strict UTF-8, exact length), bytes,
    records, uuids, arrays and nulls (-1 only) have one encoding each. The one field
    with two valid encodings is BOOL: Kafka (`readByte() != 0`) and this codec read
    any non-zero byte as true, and encoding writes 1. So where the bytes differ,
    compare after one normalising round trip instead: only bytes that were non-zero
    may differ, they must have become 1, the length must not change, and the
    normalised bytes must decode to the same value and re-encode to themselves.

    Flexible versions have many second encodings (varints with redundant bytes,
    unknown tagged fields, which are skipped, tagged fields sent with their default
    value, which are not written): there the normalised bytes must decode to the
    same value.
    """
    if again == original:
        return
    if flexible:
        assert decode(original) == decode(again)
        return
    assert len(again) == len(original), (original, again)
    for i, (a, b) in enumerate(zip(original, again, strict=True)):
        assert a == b or (a != 0 and b == 1), f"byte {i}: {a} re-encoded as {b}"
    first, second = decode(original), decode(again)
    assert first == second


def _request_reencodes(frame: bytes) -> None:
    """A request frame that decoded re-encodes to the same bytes (see above)."""
    header, body = decode_strict(frame)
    again = encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, body
    )[4:]

    def decode(data):
        h, b = decode_strict(data)
        return h, plain(b)

    flexible = is_flexible(header.api_key, header.api_version)
    _same_or_normalised(bytes(frame), again, decode, flexible)
    h2, b2 = decode_strict(again)
    assert (
        encode_request(h2.api_key, h2.api_version, h2.correlation_id, h2.client_id, b2)[4:] == again
    )


def _response_reencodes(key: int, version: int, frame: bytes) -> None:
    correlation_id, body = decode_response(key, version, frame)
    parts = encode_response(RequestHeader(key, version, correlation_id, None), body)
    again = b"".join(parts)[4:]

    def decode(data):
        c, b = decode_response(key, version, data)
        return c, plain(b)

    _same_or_normalised(bytes(frame), again, decode, is_flexible(key, version))


def test_bool_is_the_one_field_with_two_encodings():
    frame = encode_request(
        ApiKey.METADATA, 4, 1, "c", {"topics": None, "allow_auto_topic_creation": True}
    )[4:]
    assert frame[-1] == 1
    odd = frame[:-1] + b"\x07"  # also true
    _request_reencodes(odd)
    with pytest.raises(AssertionError):
        _same_or_normalised(frame, frame[:-1] + b"\x00", lambda d: decode_strict(d)[1], False)


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
            decode_strict(PRODUCE[:cut])
        assert not isinstance(info.value, UnsupportedVersion)
        if cut >= 20:  # header complete: the message names the API and version
            assert "PRODUCE v8" in str(info.value)
            assert info.value.header.correlation_id == 77


def test_trailing_bytes_are_ignored_as_kafka_does_unless_strict():
    with pytest.raises(InvalidRequest, match="1 trailing bytes"):
        decode_strict(PRODUCE + b"\x00")
    assert decode_request(PRODUCE + b"\x00") == decode_request(PRODUCE)
    # librdkafka 2.x's Metadata v12 "all topics": the 4 bytes it reserved for the topic
    # count hold a 1-byte null, then the fields, then 3 bytes it never wrote over.
    librdkafka = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, body = decode_request(librdkafka)
    assert header.api_version == 12 and body["topics"] is None


def test_unknown_api_key_and_unsupported_versions():
    frame = struct.pack(">hhih", 99, 0, 1234, -1)
    with pytest.raises(UnsupportedVersion) as info:
        decode_strict(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (99, 0, 1234)
    assert info.value.header.client_id is None
    for key, (_, hi) in SUPPORTED_VERSIONS.items():
        frame = struct.pack(">hhih", key, hi + 1, 5, 1) + b"c" + b"\x00" * 64
        with pytest.raises(UnsupportedVersion) as info:
            decode_strict(frame)
        assert info.value.header.api_key == key and info.value.correlation_id == 5
    with pytest.raises(UnsupportedVersion):
        decode_strict(struct.pack(">hhih", ApiKey.FETCH, -1, 5, -1))


def test_negative_and_absurd_array_counts():
    header = struct.pack(">hhih", ApiKey.DELETE_TOPICS, 0, 1, -1)
    with pytest.raises(InvalidRequest, match="invalid count -2"):
        decode_strict(header + struct.pack(">ii", -2, 0))
    with pytest.raises(InvalidRequest, match="invalid count -1"):  # not nullable
        decode_strict(header + struct.pack(">ii", -1, 0))
    with pytest.raises(InvalidRequest, match="exceeds the remaining bytes"):
        decode_strict(header + struct.pack(">ii", 2**31 - 1, 0))
    fetch = struct.pack(">hhih", ApiKey.FETCH, 4, 1, -1) + struct.pack(">iiiib", -1, 0, 0, 0, 0)
    with pytest.raises(InvalidRequest, match="exceeds the remaining bytes"):
        decode_strict(fetch + struct.pack(">i", 2**31 - 1))


def test_negative_string_and_bytes_lengths():
    header = struct.pack(">hhih", ApiKey.SASL_HANDSHAKE, 0, 1, -1)
    with pytest.raises(InvalidRequest, match="non-nullable string"):
        decode_strict(header + struct.pack(">h", -1))
    with pytest.raises(InvalidRequest, match="runs past the end"):
        decode_strict(header + struct.pack(">h", 100) + b"abc")
    auth = struct.pack(">hhih", ApiKey.SASL_AUTHENTICATE, 0, 1, -1)
    with pytest.raises(InvalidRequest, match="non-nullable bytes"):
        decode_strict(auth + struct.pack(">i", -5))
    produce = struct.pack(">hhih", ApiKey.PRODUCE, 0, 1, -1) + struct.pack(">hii", 1, 0, 1)
    produce += struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 0)
    with pytest.raises(InvalidRequest, match="records of length -2"):
        decode_strict(produce + struct.pack(">i", -2))
    with pytest.raises(InvalidRequest):
        decode_strict(header + struct.pack(">h", 2) + b"\xff\xfe")  # not UTF-8


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_invalid_request(data):
    try:
        decode_strict(data)
    except InvalidRequest:
        return
    _request_reencodes(data)


def _request_body(key, version):
    return lambda b: encode_request(key, version, 1, "id", b)[16:]


def _response_body(key, version):
    return lambda b: b"".join(encode_response(RequestHeader(key, version, 1, None), b))[8:]


def _body_bytes(data, fields, version, encode) -> bytes:
    """Random bytes, or a valid body's encoding with up to 3 bytes overwritten (so
    that some of what the decoder sees decodes and the re-encoding check bites)."""
    if data.draw(st.booleans(), label="random"):
        return data.draw(st.binary(max_size=120))
    raw = bytearray(encode(data.draw(body(fields, version))))
    for _ in range(data.draw(st.integers(0, 3)) if raw else 0):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    return bytes(raw)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(sorted(SUPPORTED_VERSIONS)),
    data=st.data(),
)
def test_random_bodies_behind_a_valid_header(key, data):
    version = data.draw(st.integers(*SUPPORTED_VERSIONS[key]))
    tail = _body_bytes(data, SCHEMAS[key].request, version, _request_body(key, version))
    request = struct.pack(">hhih", key, version, 1, 2) + b"id" + tail
    try:
        decode_strict(request)
    except InvalidRequest as exc:
        assert not isinstance(exc, UnsupportedVersion)
    else:
        event("request decoded")
        _request_reencodes(request)
    tail = _body_bytes(data, SCHEMAS[key].response, version, _response_body(key, version))
    response = struct.pack(">i", 1) + tail
    try:
        decode_response(key, version, response)
    except InvalidResponse:
        pass
    else:
        event("response decoded")
        _response_reencodes(key, version, response)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_produce_frames(data):
    frame = bytearray(PRODUCE)
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_strict(bytes(frame))
    except InvalidRequest:
        return
    event("decoded")
    _request_reencodes(bytes(frame))


def test_decode_response_rejects_garbage():
    with pytest.raises(InvalidResponse):
        decode_response(ApiKey.METADATA, 1, b"\x00\x00")
    with pytest.raises(InvalidResponse):
        decode_response(ApiKey.METADATA, 99, b"\x00\x00\x00\x00")
    with pytest.raises(InvalidResponse, match="trailing"):
        decode_response(ApiKey.HEARTBEAT, 0, b"\x00\x00\x00\x01\x00\x00\x00")
