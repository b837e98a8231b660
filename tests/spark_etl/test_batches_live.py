"""Record sets fetched from a real broker, written by librdkafka (every codec,
headers, transactions committed and aborted), decoded by `record_set_to_arrow`, and read by
the source's `client.read_range`: both the same Arrow table as confluent-kafka's
consume() makes of the same offsets (`librdkafka_arrow`), in both isolation levels."""

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from broker.protocol.api_keys import ApiKey
from broker.protocol.client import BlockingClient
from spark_etl.source import client
from spark_etl.source.batches import VALUE_HASH, record_set_to_arrow
from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA as SCHEMA
from spark_etl.source.options import SourceOptions
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess
from tests.spark_etl.librdkafka_arrow import consume_range

TOPIC = "decode"
HASHED = SCHEMA.append(pa.field(VALUE_HASH, pa.int64()))
FETCH_VERSION = 12
SMALL_FETCH = 3000  # bytes: most responses end in a partial batch


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("decode-live") / "broker").start()
    yield b
    client.close_pooled()
    b.stop()


def _plain(bootstrap, codec, n, tag):
    p = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "acks": "all"}
    )
    for i in range(n):
        key = None if i % 3 == 0 else b"" if i % 3 == 1 else b"k%d" % i
        value = None if i % 11 == 5 else (b"%s line %d " % (tag, i)) * (1 + i % 9)
        headers = [("h", b"x%d" % i), ("empty", None)] if i % 4 == 0 else None
        p.produce(TOPIC, value, key, partition=0, headers=headers)
    assert p.flush(30) == 0


@pytest.fixture(scope="module")
def written(bk):
    """Partition 0 of TOPIC: batches of every codec from plain producers, interleaved
    with two transactional producers' committed and aborted transactions."""
    create_topic(bk.bootstrap, TOPIC, 1)
    txns = []
    for name in ("one", "two"):
        t = Producer(
            {"bootstrap.servers": bk.bootstrap, "transactional.id": name, "compression.type": "lz4"}
        )
        t.init_transactions(30)
        txns.append(t)
    for round_, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        for t in txns:
            t.begin_transaction()
        for i, t in enumerate(txns):
            for j in range(40):
                t.produce(TOPIC, b"txn %d %d %d" % (round_, i, j) * 5, partition=0)
            t.flush(30)
        _plain(bk.bootstrap, codec, 300, codec.encode())
        txns[0].commit_transaction(30) if round_ % 2 else txns[0].abort_transaction(30)
        txns[1].abort_transaction(30) if round_ % 2 else txns[1].commit_transaction(30)
    return bk


def _fetch_all(bk, isolation, schema):
    """Every record up to the (stable) end, fetched in small responses."""
    tables, offset, end = [], 0, None
    with BlockingClient(bk.host, bk.port) as wire:
        while end is None or offset < end:
            body = {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": SMALL_FETCH,
                "isolation_level": isolation,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "log_start_offset": -1,
                                "partition_max_bytes": SMALL_FETCH,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            (part,) = wire.request(ApiKey.FETCH, FETCH_VERSION, body)["responses"][0]["partitions"]
            assert part["error_code"] == 0
            end = part["last_stable_offset"] if isolation else part["high_watermark"]
            aborted = None
            if isolation:
                aborted = [
                    (a["producer_id"], a["first_offset"])
                    for a in part["aborted_transactions"] or []
                ]
            batches, offset = record_set_to_arrow(
                part["records"], TOPIC, 0, offset, end, schema, aborted
            )
            tables += batches
    return pa.Table.from_batches(tables, schema), end


def _read_range(bk, isolation, end, schema):
    opts = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": bk.bootstrap,
            "subscribe": TOPIC,
            "kafka.isolation.level": isolation,
        },
        streaming=False,
    )
    return pa.Table.from_batches(list(client.read_range(opts, (TOPIC, 0), 0, end, schema)), schema)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("schema", [SCHEMA, HASHED], ids=["plain", "hashed"])
def test_fetched_record_sets_decode_as_consume_reads_them(written, isolation, schema):
    fetched, end = _fetch_all(written, int(isolation == "read_committed"), schema)
    consumed = consume_range(written.bootstrap, TOPIC, 0, end, schema, isolation)
    assert fetched.num_rows == consumed.num_rows > 1500
    assert fetched.combine_chunks().equals(consumed.combine_chunks())
    assert (
        _read_range(written, isolation, end, schema)
        .combine_chunks()
        .equals(consumed.combine_chunks())
    )
    values = set(fetched.column("value").to_pylist())
    if isolation == "read_committed":
        assert b"txn 1 0 0" * 5 in values and b"txn 0 0 0" * 5 not in values
        assert b"txn 0 1 0" * 5 in values and b"txn 1 1 0" * 5 not in values
    else:
        assert {b"txn 0 0 0" * 5, b"txn 1 1 0" * 5} <= values


def test_the_log_holds_batches_of_every_codec(written):
    """What the test above decodes: librdkafka's batches in all five codecs."""
    codecs = set()
    for segment in written.data_dir.glob(f"{TOPIC}-0/*.log"):
        data, pos = segment.read_bytes(), 0
        while pos + 61 <= len(data):
            codecs.add(data[pos + 22] & 7)  # the attributes' low byte
            pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    assert codecs == {0, 1, 2, 3, 4}
