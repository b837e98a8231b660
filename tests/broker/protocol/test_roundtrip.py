"""Every schema at every supported version round-trips through encode and decode."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from broker.protocol.registry import SCHEMAS
from tests.broker.protocol.strategies import body, expected, plain

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("api_key", list(SCHEMAS), ids=lambda k: k.name)
@FAST
@given(data=st.data())
def test_request_round_trip(api_key, data):
    lo, hi = SUPPORTED_VERSIONS[api_key]
    version = data.draw(st.integers(lo, hi), label="version")
    fields = SCHEMAS[api_key].request
    value = data.draw(body(fields, version), label="body")
    client_id = data.draw(st.none() | st.text(max_size=8), label="client_id")
    frame = encode_request(api_key, version, 123, client_id, value)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    header, decoded = decode_request(frame[4:])
    assert header == RequestHeader(api_key, version, 123, client_id)
    assert plain(decoded) == expected(fields, version, value)
    assert encode_request(api_key, version, 123, client_id, decoded) == frame


@pytest.mark.parametrize("api_key", list(SCHEMAS), ids=lambda k: k.name)
@FAST
@given(data=st.data())
def test_response_round_trip(api_key, data):
    lo, hi = SUPPORTED_VERSIONS[api_key]
    version = data.draw(st.integers(lo, hi), label="version")
    fields = SCHEMAS[api_key].response
    value = data.draw(body(fields, version), label="body")
    parts = encode_response(RequestHeader(api_key, version, -7, None), value)
    assert len(parts) == 1
    frame = parts[0]
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    correlation_id, decoded = decode_response(api_key, version, frame[4:])
    assert correlation_id == -7
    assert plain(decoded) == expected(fields, version, value)


def test_every_api_has_versions_zero_to_max():
    """But for the share-group APIs, whose v0 (Kafka 4.0's early access) Kafka removed."""
    share = {
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
    }
    assert set(SUPPORTED_VERSIONS) == set(ApiKey)
    assert all(lo == 0 for key, (lo, _) in SUPPORTED_VERSIONS.items() if key not in share)
    assert all(SUPPORTED_VERSIONS[key] == (1, 1) for key in share)
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE] == (0, 12)
    assert SUPPORTED_VERSIONS[ApiKey.FETCH] == (0, 17)
    assert SUPPORTED_VERSIONS[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (0, 4)


def test_every_version_of_every_api_compiles_on_both_sides():
    """Codecs compile on first use (registry.Codecs): a schema that cannot compile at
    some version must fail here, not at a client's first request of it."""
    from broker.protocol.registry import REQUEST_CODECS, RESPONSE_CODECS

    count = sum(hi - lo + 1 for lo, hi in SUPPORTED_VERSIONS.values())
    assert len(REQUEST_CODECS.compile_all()) == len(RESPONSE_CODECS.compile_all()) == count
    assert REQUEST_CODECS.get((ApiKey.PRODUCE, 99)) is None
    assert RESPONSE_CODECS.get((9999, 0)) is None
