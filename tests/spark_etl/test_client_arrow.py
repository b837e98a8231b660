"""The reference reading's Arrow columns (`librdkafka_arrow.messages_to_arrow`), on hand-made
confluent-kafka Messages: what the decoder of record sets is checked against."""

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import xxhash
from confluent_kafka import Message

from common.audit import HASH_SEED, MASK, checksum
from spark_etl.source.batches import VALUE_HASH
from tests.spark_etl.librdkafka_arrow import messages_to_arrow

SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)


def msg(offset, ts=(1, 1_714_557_600_123), **kw):
    kw.setdefault("value", b"v%d" % offset)
    return Message(topic="t", partition=3, offset=offset, timestamp=ts, **kw)


def test_contiguous_run_cut_at_end():
    batch, nxt = messages_to_arrow([msg(o) for o in range(10, 20)], "t", 3, 15, SCHEMA)
    assert nxt == 15 and batch.schema == SCHEMA
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [10, 11, 12, 13, 14]
    assert rows[0] == {
        "key": None, "value": b"v10", "topic": "t", "partition": 3, "offset": 10,
        "timestamp": datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC),
        "timestampType": 0, "headers": None,
    }  # fmt: skip


def test_gaps_missing_timestamps_log_append_time_and_headers():
    run = [
        msg(4, key=b"k", headers=[("h", b"x")]),
        msg(7, ts=(0, 0)),
        msg(9, ts=(2, 1000)),
        msg(12),
    ]
    batch, nxt = messages_to_arrow(run, "t", 3, 10, SCHEMA)
    rows = batch.to_pylist()
    assert nxt == 10 and [r["offset"] for r in rows] == [4, 7, 9]
    assert rows[0]["key"] == b"k" and rows[0]["headers"] == [{"key": "h", "value": b"x"}]
    assert rows[1]["headers"] is None
    assert (rows[1]["timestamp"], rows[1]["timestampType"]) == (None, -1)
    assert (rows[2]["timestamp"], rows[2]["timestampType"]) == (
        datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
        1,
    )


def test_run_entirely_past_end_is_empty():
    batch, nxt = messages_to_arrow([msg(20), msg(21)], "t", 3, 18, SCHEMA)
    assert (batch.num_rows, nxt) == (0, 18)
    batch, nxt = messages_to_arrow([msg(20), msg(25)], "t", 3, 18, SCHEMA)
    assert (batch.num_rows, nxt) == (0, 18)


def test_value_hash_column_holds_the_audit_checksum_terms():
    schema = SCHEMA.append(pa.field(VALUE_HASH, pa.int64()))
    run = [msg(0), msg(1, value=None), msg(2, value=b"")]
    batch, _ = messages_to_arrow(run, "t", 3, 10, schema)
    assert batch.schema == schema
    hashes = batch.column(VALUE_HASH).to_numpy().view(np.uint64).tolist()
    assert hashes == [xxhash.xxh64_intdigest(v, HASH_SEED) for v in (b"v0", b"", b"")]
    assert sum(hashes) & MASK == checksum([b"v0", b"", b""])
