"""The C records check (the `logflume-recordscheck` distribution, native/recordscheck)
accepts exactly what the Python reference walk `records._check_records` accepts: valid
sections, sections mutated byte by byte, wrong counts and deltas, and random bytes.
What they accept, the decoder reads, and the records it reads re-encode to the same
records."""

import struct

import crc32c
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from broker.protocol import records
from broker.protocol.records import (
    CRC_AT,
    CRC_FROM,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchBuilder,
    CorruptRecordError,
    RecordBatch,
)

fast_check = records._fast_check


def test_the_c_check_is_built_and_used():
    assert fast_check is not None, "logflume-recordscheck is not installed (native/recordscheck)"


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


def in_a_batch(data: bytes, count: int, last_delta: int) -> bytes:
    """`data` as the records section of an uncompressed batch with base offset 0 and
    base timestamp 0, so each record's offset and timestamp are its section deltas."""
    head = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        head, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(data), -1, MAGIC, 0, 0,
        last_delta, 0, 0, -1, -1, -1, count,
    )  # fmt: skip
    raw = head + data
    struct.pack_into(">I", raw, CRC_AT, crc32c.crc32c(raw[CRC_FROM:]))
    return bytes(raw)


def decodes_and_reencodes(data: bytes, count: int, last_delta: int) -> None:
    """A section the check accepted: the decoder reads `count` records from it, and
    those records, encoded again (BatchBuilder, as the log cleaner rebuilds a batch),
    decode to the same records, and encoding those gives the same bytes again.

    Values are compared, not the input bytes: a records section has more than one
    encoding of the same records, all of which the check and the decoder accept
    (as Kafka does): an over-long varint (0 as 80 00), any record attributes byte
    (unused, written as 0), timestamp deltas from any base (the builder's base is the
    first record's timestamp), and header keys that are not UTF-8 (read with U+FFFD
    replacements). The builder's output is the canonical form: it must be a fixed
    point. test_unmutated_sections_reencode_to_the_same_bytes covers the byte-exact
    case, a section the builder wrote."""
    if count < 0 or last_delta < 0:
        return  # RecordBatch.validate, which runs first, rejects such a header
    batch = RecordBatch(in_a_batch(data, count, last_delta))
    batch.validate()
    got = batch.records()
    assert len(got) == max(count, 0)
    assert all(0 <= r.offset <= last_delta for r in got)
    assert all(-(2**63) <= r.timestamp < 2**63 for r in got)
    again = rebuild(got, last_delta)
    assert RecordBatch(again).records() == got
    assert rebuild(RecordBatch(again).records(), last_delta) == again
    event("accepted, decoded and re-encoded")


def rebuild(recs, last_delta: int) -> bytes:
    b = BatchBuilder()
    for r in recs:
        b.append(r.value, key=r.key, timestamp_ms=r.timestamp, headers=r.headers, offset=r.offset)
    b.last_offset_delta = last_delta
    return b.build()


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
        accepted = python_accepts(data, n, last)
        assert accepted == c_accepts(data, n, last), (data, n, last)
        if accepted:
            decodes_and_reencodes(data, n, last)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80), st.integers(-2, 4), st.integers(-2, 4))
def test_c_and_python_agree_on_random_bytes(data, count, last_delta):
    accepted = python_accepts(data, count, last_delta)
    assert accepted == c_accepts(data, count, last_delta)
    if accepted:
        decodes_and_reencodes(data, count, last_delta)


@settings(max_examples=100, deadline=None)
@given(st.lists(a_record, min_size=1, max_size=6))
def test_unmutated_sections_reencode_to_the_same_bytes(recs):
    data, count, last_delta = section(recs)
    got = RecordBatch(in_a_batch(data, count, last_delta)).records()
    again = rebuild(got, last_delta)
    assert again[HEADER_SIZE:] == data


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
