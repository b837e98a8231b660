"""Record sets -> Arrow (`batches.record_set_to_arrow`), on record batches written by an
independent encoder (kafka-python's DefaultRecordBatchBuilder), held to what
`librdkafka_arrow.messages_to_arrow` makes of the same records as confluent-kafka Messages."""

import struct

import cramjam
import crc32c
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from logflume_recordscheck import decode_batches, xxh64

from common.audit import HASH_SEED
from common.compression import CorruptRecordError
from spark_etl.source.batches import VALUE_HASH, record_set_to_arrow
from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA as SCHEMA
from tests.spark_etl.librdkafka_arrow import messages_to_arrow

HASHED = SCHEMA.append(pa.field(VALUE_HASH, pa.int64()))
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_714_557_600_000
ATTRIBUTES_AT, CRC_AT, CRC_FROM, MAX_TS_AT = 21, 17, 21, 35
LOG_APPEND_TIME, TRANSACTIONAL, CONTROL = 0x08, 0x10, 0x20
HEADER = 61


def batch(
    records,
    base_offset=0,
    codec=0,
    producer_id=-1,
    transactional=False,
    control=False,
    log_append_time=None,
):
    """One v2 batch: `records` are (offset delta, timestamp, key, value, headers).
    Kafka-python writes produce batches; what the broker sets (base offset,
    LogAppendTime and its max timestamp, the control bit) is patched in."""
    b = DefaultRecordBatchBuilder(
        2, codec, transactional, producer_id, 0 if producer_id >= 0 else -1, 0, 1 << 24
    )
    for delta, ts, key, value, headers in records:
        assert b.append(delta, ts, key, value, headers) is not None
    out = bytearray(b.build())
    assert out[ATTRIBUTES_AT + 1] & 7 == codec, "kafka-python left the batch uncompressed"
    struct.pack_into(">q", out, 0, base_offset)
    attrs = out[ATTRIBUTES_AT + 1]
    if log_append_time is not None:
        attrs |= LOG_APPEND_TIME
        struct.pack_into(">q", out, MAX_TS_AT, log_append_time)
    if control:
        attrs |= CONTROL
    out[ATTRIBUTES_AT + 1] = attrs
    return recrc(out)


def recrc(out: bytearray) -> bytes:
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[CRC_FROM:])))
    return bytes(out)


def marker(base_offset, producer_id, abort):
    """An end-transaction marker: a control batch with one record."""
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 7)
    return batch(
        [(0, TS, key, value, [])], base_offset, 0, producer_id, transactional=True, control=True
    )


def messages(records, base_offset, log_append_time=None, topic="t", partition=3):
    """The confluent-kafka Messages librdkafka makes of a batch's records."""
    out = []
    for delta, ts, key, value, headers in records:
        stamp = (2, log_append_time) if log_append_time is not None else (1, ts)
        out.append(
            Message(
                topic=topic,
                partition=partition,
                offset=base_offset + delta,
                timestamp=stamp,
                key=key,
                value=value,
                headers=headers or None,
            )
        )
    return out


def reference(msgs, start, end, schema):
    """What `librdkafka_arrow.messages_to_arrow` makes of the Messages in [start, end)."""
    msgs = [m for m in msgs if start <= m.offset() < end]
    if not msgs:
        return pa.Table.from_batches([], schema)
    table_batch, _ = messages_to_arrow(msgs, "t", 3, end, schema)
    return pa.Table.from_batches([table_batch])


def decoded(data, start=0, end=1 << 62, schema=SCHEMA, aborted=None):
    out, nxt = record_set_to_arrow(data, "t", 3, start, end, schema, aborted)
    for b in out:
        assert b.schema == schema and b.num_rows
        b.validate(full=True)
    return pa.Table.from_batches(out, schema), nxt


def offsets(table):
    return table.column("offset").to_pylist()


def varied(n, size=40):
    """n records: null and empty keys and values, headers on some, compressible values."""
    out = []
    for i in range(n):
        key = None if i % 5 == 1 else b"" if i % 5 == 2 else b"host-%d" % (i % 3)
        value = None if i % 7 == 3 else b"" if i % 7 == 4 else (b"GET /x %d " % i) * size
        headers = [("h", b"v%d" % i), ("null", None), ("", b"")] if i % 4 == 0 else []
        out.append((i, TS + i * 13 - 50, key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("schema", [SCHEMA, HASHED], ids=["plain", "hashed"])
def test_every_codec_matches_to_arrow(codec, schema):
    records = varied(40)
    data = batch(records[:25], 100, CODECS[codec]) + batch(
        [(d - 25, *rest) for d, *rest in records[25:]], 125, CODECS[codec]
    )
    table, nxt = decoded(data, schema=schema)
    assert nxt == 140
    assert table.equals(reference(messages(records, 100), 0, 1 << 62, schema))
    if schema is HASHED:
        hashes = table.column(VALUE_HASH).to_numpy().view(np.uint64).tolist()
        values = [r[3] or b"" for r in records]
        assert hashes == [xxhash.xxh64_intdigest(v, HASH_SEED) for v in values]


def test_raw_snappy_as_librdkafka_writes_it():
    """Snappy without the xerial framing: one raw block (librdkafka's producer)."""
    records = varied(10)
    plain = bytearray(batch(records, 7))
    body = bytes(cramjam.snappy.compress_raw(bytes(plain[HEADER:])))
    out = bytearray(plain[:HEADER] + body)
    struct.pack_into(">i", out, 8, len(out) - 12)
    out[ATTRIBUTES_AT + 1] |= 2
    table, nxt = decoded(recrc(out))
    assert nxt == 17 and table.equals(reference(messages(records, 7), 0, 1 << 62, SCHEMA))


def test_log_append_time_gives_every_record_the_batch_max_timestamp():
    records = varied(6)
    data = batch(records, 0, CODECS["lz4"], log_append_time=TS + 99_000)
    table, _ = decoded(data)
    assert table.column("timestampType").to_pylist() == [1] * 6
    assert {t.timestamp() for t in table.column("timestamp").to_pylist()} == {TS / 1000 + 99}
    assert table.equals(reference(messages(records, 0, TS + 99_000), 0, 1 << 62, SCHEMA))


def test_start_and_end_cut_inside_batches():
    records = varied(30)
    data = batch(records[:10], 0) + batch([(d - 10, *r) for d, *r in records[10:]], 10, 3)
    table, nxt = decoded(data, start=4, end=17, schema=HASHED)
    assert offsets(table) == list(range(4, 17))
    assert nxt == 30  # the last complete batch's end, past `end`
    assert table.equals(reference(messages(records, 0), 4, 17, HASHED))


def test_batches_wholly_outside_the_range_are_skipped():
    data = batch(varied(5), 0) + batch(varied(5), 5) + batch(varied(5), 10)
    table, nxt = decoded(data, start=5, end=10)
    assert offsets(table) == list(range(5, 10)) and nxt == 15
    table, nxt = decoded(data, start=20, end=30)
    assert table.num_rows == 0 and nxt == 20  # never below start


def test_offset_gaps_of_a_compacted_log():
    records = [(d, TS, b"k%d" % d, b"v", []) for d in (0, 3, 4, 9)]
    table, nxt = decoded(batch(records, 50))
    assert offsets(table) == [50, 53, 54, 59] and nxt == 60
    table, _ = decoded(batch(records, 50), start=54, end=59)
    assert offsets(table) == [54]


@pytest.mark.parametrize("cut", [1, 5, 40, 61, 100])
def test_a_truncated_trailing_batch_is_left_for_the_next_fetch(cut):
    first, second = batch(varied(5), 0), batch(varied(5), 5, CODECS["gzip"])
    table, nxt = decoded(first + second[: len(second) - cut])
    assert offsets(table) == list(range(5)) and nxt == 5


def test_no_complete_batch_gives_start():
    assert decoded(b"", 42) == (pa.Table.from_batches([], SCHEMA), 42)
    table, nxt = decoded(batch(varied(3), 42)[:30], 42)
    assert (table.num_rows, nxt) == (0, 42)


def test_control_batches_are_never_returned():
    data = batch(varied(3), 0, producer_id=9, transactional=True) + marker(3, 9, abort=False)
    data += batch([(0, TS, None, b"after", [])], 4)
    for aborted in (None, []):
        table, nxt = decoded(data, aborted=aborted)
        assert offsets(table) == [0, 1, 2, 4] and nxt == 5


def txn(base_offset, producer_id, n=2):
    records = [(i, TS, None, b"p%d-%d" % (producer_id, base_offset + i), []) for i in range(n)]
    return batch(records, base_offset, 0, producer_id, transactional=True)


def test_read_committed_drops_aborted_transactions_of_interleaved_producers():
    """Producer 1 aborts, then commits; 2 commits; 3 aborts twice; 4 is idempotent
    only (never transactional). The fetch's AbortedTransactions name (1, 0), (3, 4)
    and (3, 14)."""
    data = b"".join(
        [
            txn(0, 1),  # 0-1 aborted
            txn(2, 2),  # 2-3 committed
            txn(4, 3),  # 4-5 aborted
            marker(6, 1, abort=True),
            batch([(0, TS, None, b"idem", [])], 7, producer_id=4),  # 7
            txn(8, 1),  # 8-9 committed: after its abort marker
            txn(10, 3),  # 10-11 still the aborted transaction
            marker(12, 2, abort=False),
            marker(13, 3, abort=True),
            txn(14, 3),  # 14-15 aborted again
            marker(16, 1, abort=False),
            marker(17, 3, abort=True),
            txn(18, 3),  # 18-19 committed
            marker(20, 3, abort=False),
        ]
    )
    aborted = [(3, 14), (1, 0), (3, 4)]
    table, nxt = decoded(data, aborted=aborted)
    assert offsets(table) == [2, 3, 7, 8, 9, 18, 19] and nxt == 21
    table, _ = decoded(data)  # read_uncommitted: every data record
    assert offsets(table) == [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 14, 15, 18, 19]
    # a fetch from the middle of the aborted transaction still drops its records
    table, _ = decoded(data, start=10, aborted=aborted)
    assert offsets(table) == [18, 19]


def test_a_corrupt_crc_names_topic_partition_and_offset():
    good = batch(varied(4), 0)
    bad = bytearray(batch(varied(4), 4))
    bad[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"topic 't' partition 3: .* offset 4: CRC32C"):
        record_set_to_arrow(good + bytes(bad), "t", 3, 0, 100, SCHEMA, None)


def test_an_old_magic_is_refused_by_name():
    """The broker stores what old producers send as v2; another broker may hold
    message sets of magic 0 or 1 (here one message of magic 1: 12 + 22 bytes)."""
    message = struct.pack(">qiIbbq", 7, 22, 0, 1, 0, TS) + struct.pack(">ii", -1, 0)
    with pytest.raises(CorruptRecordError, match="offset 7: magic 1: only record batches v2"):
        record_set_to_arrow(message, "t", 3, 0, 100, SCHEMA, None)
    assert record_set_to_arrow(None, "t", 3, 5, 100, SCHEMA, None) == ([], 5)


def test_malformed_records_are_refused():
    data = bytearray(batch(varied(4), 0))
    struct.pack_into(">i", data, 57, 3)  # records_count one short
    with pytest.raises(CorruptRecordError, match="topic 't' partition 3: record batch at offset 0"):
        record_set_to_arrow(recrc(data), "t", 3, 0, 100, SCHEMA, None)
    gz = bytearray(batch(varied(4), 8, CODECS["gzip"]))
    gz[HEADER + 12] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="partition 3: .* offset 8: cannot decompress"):
        record_set_to_arrow(recrc(gz), "t", 3, 0, 100, SCHEMA, None)


def test_a_timestamp_out_of_range_is_refused():
    data = batch([(0, 2**62, None, b"v", [])], 0)  # microseconds overflow int64
    with pytest.raises(CorruptRecordError, match="topic 't' partition 3: timestamp"):
        record_set_to_arrow(data, "t", 3, 0, 100, SCHEMA, None)


def test_a_header_key_that_is_not_utf8_is_refused():
    data = bytearray(batch([(0, TS, None, b"v", [("ab", b"x")])], 0))
    pos = bytes(data).index(b"ab")
    data[pos] = 0xFF
    with pytest.raises(CorruptRecordError, match="header key is not UTF-8"):
        record_set_to_arrow(recrc(data), "t", 3, 0, 100, SCHEMA, None)


def test_a_memoryview_of_a_larger_buffer():
    records = varied(8)
    data = b"junk" + batch(records, 0, CODECS["zstd"]) + b"more"
    table, nxt = decoded(memoryview(data)[4:-4])
    assert nxt == 8 and table.equals(reference(messages(records, 0), 0, 1 << 62, SCHEMA))


blobs = st.one_of(st.none(), st.binary(max_size=300), st.binary(max_size=8).map(lambda b: b * 30))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
records_st = st.lists(
    st.tuples(st.integers(1, 3), st.integers(-(10**6), 10**6), blobs, blobs, headers),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(records_st, st.sampled_from(list(CODECS.values()))), max_size=4),
    st.integers(0, 90),
    st.integers(0, 90),
    st.booleans(),
)
def test_any_records_match_to_arrow(batches, start, length, hashed):
    """Random keys, values, headers, timestamp deltas (some negative) and offset gaps,
    in batches of every codec: the decoder and `messages_to_arrow` agree."""
    schema = HASHED if hashed else SCHEMA
    data, msgs, base = b"", [], 0
    for records, codec in batches:
        deltas = np.cumsum([gap for gap, *_ in records]).tolist()
        records = [
            (d - deltas[0], TS + dt, k, v, h)
            for d, (_, dt, k, v, h) in zip(deltas, records, strict=True)
        ]
        try:
            data += batch(records, base, codec)
        except AssertionError:  # kafka-python found it incompressible
            data += batch(records, base, 0)
        msgs += messages(records, base)
        base += records[-1][0] + 1
    table, nxt = decoded(data, start, start + length, schema)
    assert nxt == max(base, start)
    assert table.equals(reference(msgs, start, start + length, schema))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 2**64 - 1))
def test_xxh64_is_the_published_hash(data, seed):
    assert xxh64(data, seed) == xxhash.xxh64_intdigest(data, seed)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_damaged_records_sections_fail_cleanly(data):
    """Any bytes in a records section, or a valid one with bytes flipped and its count
    changed: the C walk returns or raises ValueError, and never reads out of bounds."""
    records = data.draw(records_st)
    section = bytearray(batch([(i, TS, *r[2:]) for i, r in enumerate(records)])[HEADER:])
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(section) - 1))
        section[at] = data.draw(st.integers(0, 255))
    section = data.draw(st.sampled_from([bytes(section), data.draw(st.binary(max_size=64))]))
    count = data.draw(st.integers(-1, len(records) + 2))
    start, end = data.draw(st.integers(-5, 30)), data.draw(st.integers(-5, 30))
    part = (section, count, data.draw(st.integers(-(2**63), 2**63 - 1)), TS, TS, False)
    try:
        decode_batches([part], start, end, True, HASH_SEED, True)
    except ValueError:
        pass
