"""The C records check (`_recordscheck`, built by `pip install`) accepts exactly what
the Python reference walk `records._check_records` accepts: valid sections, sections
mutated byte by byte, wrong counts and deltas, and random bytes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import records
from broker.protocol.records import HEADER_SIZE, BatchBuilder, CorruptRecordError, RecordBatch

fast_check = records._fast_check


def test_the_c_check_is_built_and_used():
    assert fast_check is not None, "broker/protocol/_recordscheck.c was not built"


def python_accepts(data: bytes, count: int, last_delta: int) -> bool:
    try:
        records._check_records(data, count, last_delta)
    except CorruptRecordError:
        return False
    return True


def c_accepts(data: bytes, count: int, last_delta: int) -> bool:
    try:
        fast_check(data, count, last_delta)
    except ValueError:
        return False
    return True


def section(recs) -> tuple[bytes, int, int]:
    b = BatchBuilder()
    for key, value, headers, ts in recs:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    raw = b.build()
    batch = RecordBatch(raw)
    return raw[HEADER_SIZE:], batch.records_count, batch.last_offset_delta


small_bytes = st.none() | st.binary(max_size=40)
a_record = st.tuples(
    small_bytes,
    small_bytes,
    st.lists(st.tuples(st.text(max_size=8), small_bytes), max_size=3),
    st.integers(0, 2**45),
)
mutation = st.tuples(
    st.sampled_from(["flip", "set", "insert", "delete", "truncate"]),
    st.integers(0, 10_000),
    st.integers(0, 255),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(a_record, min_size=1, max_size=6), st.lists(mutation, max_size=3))
def test_c_and_python_agree_on_mutated_sections(recs, mutations):
    data, count, last_delta = section(recs)
    assert python_accepts(data, count, last_delta) and c_accepts(data, count, last_delta)
    buf = bytearray(data)
    for kind, where, byte in mutations:
        i = where % (len(buf) + 1)
        if kind == "flip" and i < len(buf):
            buf[i] ^= 1 << (byte % 8)
        elif kind == "set" and i < len(buf):
            buf[i] = byte
        elif kind == "insert":
            buf.insert(i, byte)
        elif kind == "delete" and i < len(buf):
            del buf[i]
        elif kind == "truncate":
            del buf[i:]
    data = bytes(buf)
    for n, last in ((count, last_delta), (count + 1, last_delta), (count, last_delta - 1)):
        assert python_accepts(data, n, last) == c_accepts(data, n, last), (data, n, last)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80), st.integers(-2, 4), st.integers(-2, 4))
def test_c_and_python_agree_on_random_bytes(data, count, last_delta):
    assert python_accepts(data, count, last_delta) == c_accepts(data, count, last_delta)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 11,  # a varint longer than 10 bytes
        b"\x02\x00" + b"\xff" * 9 + b"\x7f",  # a timestamp delta wider than 64 bits
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # a length wider than 64 bits
    ],
)
def test_c_and_python_agree_on_over_long_varints(data):
    for count in (0, 1):
        assert python_accepts(data, count, 0) == c_accepts(data, count, 0)
