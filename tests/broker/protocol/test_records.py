import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.protocol.records import (
    CRC_AT,
    HEADER,
    BatchBuilder,
    Codec,
    CorruptRecordError,
    Record,
    RecordBatch,
    _zigzag_decode,
    _zigzag_encode,
    assign_offsets,
    iter_batches,
    set_log_append_time,
)


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C from its definition (reflected Castagnoli polynomial), for golden checks."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def raw_batch(codec: int, payload: bytes, count: int = 1, base_offset: int = 0) -> bytes:
    """A batch with `payload` as its records section, however (in)valid."""
    head = bytearray(HEADER.size)
    HEADER.pack_into(
        head,
        0,
        base_offset,
        HEADER.size - 12 + len(payload),
        -1,
        2,
        0,
        codec,
        count - 1,
        5,
        5,
        -1,
        -1,
        -1,
        count,
    )
    head += payload
    struct.pack_into(">I", head, CRC_AT, crc32c.crc32c(bytes(head[21:])))
    return bytes(head)


def zigzag_bytes(n: int) -> bytes:
    out = bytearray()
    _zigzag_encode(out, n)
    return bytes(out)


@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varlong_round_trip(n):
    raw = zigzag_bytes(n)
    assert len(raw) <= 10
    assert _zigzag_decode(raw + b"junk", 0) == (n, len(raw))


@given(st.integers(-(2**31), 2**31 - 1))
def test_zigzag_varint_round_trip(n):
    raw = zigzag_bytes(n)
    assert len(raw) <= 5
    assert _zigzag_decode(memoryview(raw), 0) == (n, len(raw))


def test_zigzag_known_values():
    assert [zigzag_bytes(v) for v in (0, -1, 1, -2, 2)] == [
        b"\x00",
        b"\x01",
        b"\x02",
        b"\x03",
        b"\x04",
    ]
    assert zigzag_bytes(300) == b"\xd8\x04"
    assert zigzag_bytes(-(2**63)) == b"\xff" * 9 + b"\x01"
    out = bytearray(b"ab")
    _zigzag_encode(out, -1)
    assert out == b"ab\x01"  # appends to what is there
    assert _zigzag_decode(b"xx\xd8\x04", 2) == (300, 4)


def test_zigzag_errors():
    with pytest.raises(CorruptRecordError, match="runs past"):
        _zigzag_decode(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError, match="too long"):
        _zigzag_decode(b"\xff" * 11, 0)


def test_crc32c_known_vector():
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    assert crc32c_bitwise(b"123456789") == 0xE3069283


def test_golden_batch_bytes_by_hand():
    b = BatchBuilder(base_offset=0)
    b.append(b"v", key=b"k", timestamp_ms=1000)
    data = b.build()
    # one record: attrs 0, tsDelta 0, offsetDelta 0, key len 1 'k', value len 1 'v', 0 headers
    record = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([0])
    body = bytes([len(record) * 2]) + record
    after_crc = struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1) + body
    crc = crc32c_bitwise(after_crc)
    expected = struct.pack(">qiibI", 0, 49 + len(body), -1, 2, crc) + after_crc
    assert data == expected
    batch = RecordBatch(data)
    batch.validate()
    assert batch.crc == crc and batch.size == len(data)


records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(min_value=0, max_value=2**41),
        st.lists(
            st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
        ),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(
    records=records_st,
    codec=st.sampled_from(list(Codec)),
    base=st.integers(0, 2**40),
)
def test_round_trip(records, codec, base):
    b = BatchBuilder(
        codec=codec, base_offset=base, producer_id=7, producer_epoch=1, base_sequence=3
    )
    for key, value, ts, headers in records:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    data = b.build()
    (batch,) = iter_batches(data)
    assert batch.codec == codec
    assert batch.base_offset == base and batch.last_offset == base + len(records) - 1
    assert batch.records_count == len(records) and batch.size == len(data)
    assert batch.max_timestamp == max(r[2] for r in records)
    assert batch.producer_id == 7 and batch.last_sequence == 3 + len(records) - 1
    got = batch.records()
    assert got == [Record(base + i, ts, k, v, list(h)) for i, (k, v, ts, h) in enumerate(records)]


@pytest.mark.parametrize("codec", list(Codec))
def test_interoperates_with_kafka_python(codec):
    kb = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 20)
    for i in range(5):
        kb.append(i, 1000 + i, f"k{i}".encode(), f"v{i}".encode() * 20, [("h", b"x")])
    theirs = bytes(kb.build())
    (batch,) = iter_batches(theirs)
    assert [(r.offset, r.key, r.headers) for r in batch.records()] == [
        (i, f"k{i}".encode(), [("h", b"x")]) for i in range(5)
    ]
    ours = BatchBuilder(codec=codec, base_offset=10)
    for i in range(5):
        ours.append(
            f"v{i}".encode(), key=f"k{i}".encode(), timestamp_ms=2000 + i, headers=[("h", None)]
        )
    parsed = DefaultRecordBatch(ours.build())
    assert parsed.validate_crc()
    assert [(r.offset, r.timestamp, r.value) for r in parsed] == [
        (10 + i, 2000 + i, f"v{i}".encode()) for i in range(5)
    ]


def test_assign_offsets_keeps_crc_valid():
    parts = []
    for n in (3, 1, 4):
        b = BatchBuilder(codec=Codec.LZ4)
        for i in range(n):
            b.append(b"x%d" % i, timestamp_ms=5)
        parts.append(b.build())
    buf = bytearray(b"".join(parts))
    assert assign_offsets(buf, 1000, 7) == 1008
    batches = list(iter_batches(buf))
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch) for b in batches] == [
        (1000, 1002, 7),
        (1003, 1003, 7),
        (1004, 1007, 7),
    ]
    assert [r.offset for r in batches[2].records()] == [1004, 1005, 1006, 1007]


def test_log_append_time_rewrites_crc():
    b = BatchBuilder()
    b.append(b"a", timestamp_ms=1)
    b.append(b"b", timestamp_ms=2)
    buf = bytearray(b.build())
    set_log_append_time(buf, 0, 99_000)
    (batch,) = iter_batches(buf)
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records()] == [99_000, 99_000]


def _batch() -> bytes:
    b = BatchBuilder(codec=Codec.GZIP)
    for i in range(10):
        b.append(b"value-%d" % i, key=b"k", timestamp_ms=i)
    return b.build()


@settings(max_examples=80, deadline=None)
@given(pos=st.integers(min_value=16, max_value=10_000), flip=st.integers(1, 255))
def test_any_flipped_byte_after_magic_is_caught(pos, flip):
    data = bytearray(_batch())
    pos = 17 + pos % (len(data) - 17)
    data[pos] ^= flip
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data))


def test_bad_lengths_and_truncation():
    data = _batch()
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data[:-1]))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data[:30]))
    assert list(iter_batches(data + data[:-5], allow_partial_tail=True))[0].size == len(data)
    for length in (0, 10, 48, 2**31 - 1):
        bad = bytearray(data)
        struct.pack_into(">i", bad, 8, length)
        with pytest.raises(CorruptRecordError):
            list(iter_batches(bad))
    bad = bytearray(data)
    bad[16] = 1  # magic
    with pytest.raises(CorruptRecordError):
        RecordBatch(bad).validate()


def test_corrupt_records_section_with_valid_crc():
    data = raw_batch(Codec.NONE, b"\x7f\x00garbage", count=1)
    (batch,) = iter_batches(data)
    with pytest.raises(CorruptRecordError):
        batch.records()
    with pytest.raises(CorruptRecordError):
        raw_batch_obj = RecordBatch(raw_batch(Codec.GZIP, b"not gzip"))
        raw_batch_obj.records()


@pytest.mark.parametrize(
    "timestamps",
    [[-(2**63), 2**63 - 1], [2**63 - 1, -(2**63), 0], [0, 2**63 - 1, -1]],
)
def test_timestamps_spanning_more_than_64_bits_round_trip_as_in_kafka(timestamps):
    """Deltas from the first timestamp are Java longs: they wrap modulo 2**64, and so
    does first timestamp + delta on the way back (kafka-python, in unbounded Python
    ints, reads such batches differently from Kafka)."""
    b = BatchBuilder()
    for ts in timestamps:
        b.append(b"v", timestamp_ms=ts)
    data = b.build()
    assert [r.timestamp for r in RecordBatch(data).records()] == timestamps


def test_a_ten_byte_varint_keeps_its_low_64_bits_as_kafka_reads_it():
    encoded = b"\xff" * 9 + b"\x7f"  # 70 bits of ones; Kafka keeps the low 64
    assert _zigzag_decode(encoded, 0) == (-(2**63), 10)
