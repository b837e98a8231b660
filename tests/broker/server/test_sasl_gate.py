"""The SASL gate (broker.server.sasl_gate), without sockets: what a connection
answers, and when it closes, before its client is authenticated."""

import pytest

from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.sasl.plain import PlainServer
from broker.server.sasl_gate import SaslGate


def gate():
    return SaslGate({"PLAIN": lambda: PlainServer({"alice": "pw"})})


def header(api_key, version=1):
    return RequestHeader(api_key, version, 7, "client")


def handshake(g, version=1, mechanism="PLAIN"):
    return g.request(header(ApiKey.SASL_HANDSHAKE, version), {"mechanism": mechanism})


def authenticate(g, token):
    return g.request(header(ApiKey.SASL_AUTHENTICATE), {"auth_bytes": token})


def test_api_versions_then_handshake_then_authenticate_passes():
    g = gate()
    d = g.request(header(ApiKey.API_VERSIONS, 0), {})
    assert d.response["error_code"] == 0 and d.timed and not d.authenticated
    d = handshake(g)
    assert d.response == {"error_code": 0, "mechanisms": ["PLAIN"]}
    assert d.timed and d.close is None and not g.passed
    d = authenticate(g, b"\0alice\0pw")
    assert d.authenticated and d.timed and d.failure is None
    assert d.header.api_key == ApiKey.SASL_AUTHENTICATE
    assert d.response == {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }
    assert g.passed and g.principal == "User:alice" and g.mechanism == "PLAIN"


def test_after_a_v0_handshake_frames_are_bare_tokens_answered_bare():
    g = gate()
    handshake(g, version=0)
    assert g.takes_bare_tokens
    d = g.bare_token(b"\0alice\0pw")
    assert d.authenticated and d.header is None and not d.timed  # no request to count
    assert d.response == [b"\0\0\0\0", b""]
    assert g.passed and not g.takes_bare_tokens


def test_a_failed_authentication_is_answered_then_the_gate_ignores_frames():
    g = gate()
    handshake(g)
    d = authenticate(g, b"\0alice\0nope")
    assert d.failure is not None and d.failure.user == "alice" and d.timed
    assert d.response["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert d.response["error_message"] == str(d.failure)
    assert not d.authenticated and g.failed and not g.passed


def test_a_failed_bare_token_has_no_answer():
    g = gate()
    handshake(g, version=0)
    d = g.bare_token(b"\0alice\0nope")
    assert d.failure is not None and d.response is None
    assert g.failed


def test_an_unserved_mechanism_is_answered_then_closes():
    g = gate()
    d = handshake(g, mechanism="GSSAPI")
    assert d.response["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert d.close == "SASL mechanism 'GSSAPI' is not enabled"
    assert g.failed


@pytest.mark.parametrize("api", [ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.SASL_AUTHENTICATE])
def test_other_requests_before_the_handshake_are_refused(api):
    d = gate().request(header(api), {"auth_bytes": b""})
    assert d.refuse is not None and "IllegalSaslStateException" in d.refuse
    assert d.response is None


def test_a_second_handshake_or_a_request_while_authenticating_is_refused():
    g = gate()
    handshake(g)
    assert handshake(g).refuse is not None
    assert g.request(header(ApiKey.METADATA), {}).refuse is not None
