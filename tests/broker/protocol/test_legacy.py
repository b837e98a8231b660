"""Legacy messages (magic 0 and 1) up- and down-converted, checked against the
message sets kafka-python writes and reads (its legacy_records module)."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from broker.protocol.legacy import down_convert, magic_of, up_convert
from broker.protocol.records import BatchBuilder, iter_batches
from common.compression import Codec, CorruptRecordError

CODECS = {0: Codec.NONE, 1: Codec.GZIP, 2: Codec.SNAPPY, 3: Codec.LZ4}

records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=30,
)


def message_set(magic: int, codec: int, records) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for offset, (key, value, ts) in enumerate(records):
        assert builder.append(offset, timestamp=ts, key=key, value=value) is not None
    return bytes(builder.build())


@settings(max_examples=60, deadline=None)
@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([0, 1, 2, 3]),
    records=records_st,
)
def test_up_converted_message_sets_keep_keys_values_and_timestamps(magic, codec, records):
    if magic == 0 and codec == 3:
        codec = 1  # magic 0 lz4 is refused (below)
    data = message_set(magic, codec, records)
    assert magic_of(data) == magic
    (batch,) = iter_batches(up_convert(data))
    batch.validate_records()
    assert batch.codec == CODECS[codec]
    assert batch.producer_id == -1 and batch.records_count == len(records)
    got = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch.records()]
    assert got == [
        (i, key, value, ts if magic == 1 else -1, []) for i, (key, value, ts) in enumerate(records)
    ]


@settings(max_examples=60, deadline=None)
@given(magic=st.sampled_from([0, 1]), records=records_st, start=st.integers(0, 5))
def test_down_converted_batches_read_back_in_kafka_python(magic, records, start):
    data = b""
    base = 100
    for codec in (Codec.LZ4, Codec.NONE):  # two batches, one compressed
        b = BatchBuilder(codec=codec, base_offset=base)
        for key, value, ts in records:
            b.append(value, key=key, timestamp_ms=ts, headers=[("h", b"dropped")])
        data += b.build()
        base += len(records)
    first = 100 + start
    out = down_convert(data, magic, first, 1 << 30)
    flat = [(key, value, ts) for key, value, ts in records] * 2
    expected = [
        (100 + i, key, value, ts if magic == 1 else None)
        for i, (key, value, ts) in enumerate(flat)
        if 100 + i >= first
    ]
    got = []
    pos = 0
    while pos < len(out):  # one kafka-python LegacyRecordBatch per message
        (size,) = struct.unpack_from(">i", out, pos + 8)
        (message,) = list(LegacyRecordBatch(out[pos : pos + 12 + size], magic))
        assert message.validate_crc()
        got.append((message.offset, message.key, message.value, message.timestamp))
        pos += 12 + size
    assert got == expected


def test_down_convert_stops_at_max_bytes_but_always_gives_one_message():
    b = BatchBuilder()
    for i in range(10):
        b.append(b"v" * 100, timestamp_ms=1000 + i)
    data = b.build()
    one = down_convert(data, 1, 0, 10)
    assert [m.offset for m in LegacyRecordBatch(one, 1)] == [0]
    some = down_convert(data, 1, 3, 400)
    (size,) = struct.unpack_from(">i", some, 8)
    assert len(some) == 2 * (12 + size)  # whole messages (134 bytes) only, from offset 3


def test_control_batches_are_left_out():
    control = BatchBuilder(is_control=True, is_transactional=True)
    control.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")
    data = BatchBuilder()
    data.append(b"real", timestamp_ms=5)
    control_bytes = control.build()
    data.base_offset = 1
    out = down_convert(control_bytes + data.build(), 1, 0, 1 << 20)
    assert [(m.offset, m.value) for m in LegacyRecordBatch(out, 1)] == [(1, b"real")]


def _raw_message(magic: int, attributes: int, value: bytes) -> bytes:
    body = bytes((magic, attributes)) + struct.pack(">i", -1) + struct.pack(">i", len(value))
    body += value
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


def _corrupt_variants() -> list[tuple[str, bytes]]:
    good = message_set(1, 0, [(b"k", b"value", 5)])
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    magic3 = bytearray(good)
    magic3[16] = 3
    return [
        ("crc", bytes(flipped)),
        ("magic", bytes(magic3)),
        ("truncated", good[:-3]),
        ("bad size", good[:8] + struct.pack(">i", 10_000) + good[12:]),
        ("magic 0 lz4", _raw_message(magic=0, attributes=3, value=b"\x04\x22\x4d\x18...")),
        ("empty", b""),
    ]


@pytest.mark.parametrize(
    "name,data", _corrupt_variants(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_broken_message_sets_are_corrupt(name, data):
    with pytest.raises(CorruptRecordError):
        up_convert(data)
