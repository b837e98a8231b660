"""Wire primitives: unsigned varints, strings, bytes, uuid (the zigzag varint of\nrecords is tested in test_records.py)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol import ErrorCode, ProtocolError
from broker.protocol import primitives as p


def test_unsigned_varint_known_values():
    assert p.write_unsigned_varint(300) == b"\xac\x02"
    assert p.read_unsigned_varint(b"\xac\x02", 0) == (300, 2)


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(n):
    raw = p.write_unsigned_varint(n)
    assert p.read_unsigned_varint(memoryview(raw + b"junk"), 0) == (n, len(raw))


def test_unsigned_varint_errors():
    with pytest.raises(ProtocolError, match="runs past"):
        p.read_unsigned_varint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError, match="longer than 5"):
        p.read_unsigned_varint(b"\xff" * 6, 0)
    with pytest.raises(ValueError):
        p.write_unsigned_varint(-1)


@given(st.none() | st.text(max_size=50))
def test_nullable_string_round_trip(s):
    raw = p.write_string(s)
    assert p.read_nullable_string(raw, 0) == (s, len(raw))


def test_string_limits():
    with pytest.raises(ValueError):
        p.write_string("x" * 40000)
    with pytest.raises(ProtocolError):
        p.read_string(p.write_string(None), 0)


@given(st.none() | st.binary(max_size=50))
def test_nullable_bytes_round_trip(b):
    raw = p.write_bytes(b)
    assert p.read_nullable_bytes(raw, 0) == (b, len(raw))
    records, end = p.read_records(raw, 0)
    assert end == len(raw)
    assert records is None if b is None else bytes(records) == b


def test_uuid_and_bool():
    u = uuid.uuid4()
    assert p.read_uuid(b"\x00" + p.write_uuid(u), 1) == (u, 17)
    assert p.read_bool(b"\x02", 0) == (True, 1)
    with pytest.raises(ProtocolError):
        p.read_uuid(b"\x00" * 15, 0)


def test_tagged_fields_are_skipped():
    raw = b"\x02" + b"\x00\x02ab" + b"\x05\x00" + b"rest"
    assert p.skip_tagged_fields(raw, 0) == len(raw) - 4


def test_error_codes():
    assert ErrorCode.NONE == 0 and ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.FENCED_INSTANCE_ID == 82 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert not ErrorCode.MESSAGE_TOO_LARGE.retriable
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert len(ErrorCode) == 131
