"""The `logflume` data source against a real broker subprocess."""

import json
import re
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from spark_etl.source import SCHEMA
from testkit.kafka import consume_all, create_topic, produce, watermarks
from testkit.procs import BrokerProcess


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("ds") / "broker").start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def two_parts(bk):
    """Topic `ds` with offsets 0..119 in partition 0 and 0..79 in partition 1."""
    create_topic(bk.bootstrap, "ds", 2)
    produce(
        bk.bootstrap,
        "ds",
        [f"p0-{i}" for i in range(120)],
        partition=0,
        key=b"k0",
        headers=[("host", b"web1")],
    )
    produce(bk.bootstrap, "ds", [f"p1-{i}" for i in range(80)], partition=1)
    return "ds"


def _read(spark, bk, topic, **opts):
    r = spark.read.format("logflume").option("kafka.bootstrap.servers", bk.bootstrap)
    r = r.option("subscribe", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_schema_matches_sparks_kafka_source(spark, bk, two_parts):
    df = _read(spark, bk, two_parts)
    assert df.schema.simpleString() == spark.createDataFrame([], SCHEMA).schema.simpleString()
    assert [f.name for f in df.schema] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip


def test_batch_read_earliest_to_latest_all_partitions(spark, bk, two_parts):
    rows = _read(spark, bk, two_parts).collect()
    assert len(rows) == 200
    by_part = {p: sorted(r.offset for r in rows if r.partition == p) for p in (0, 1)}
    assert by_part == {0: list(range(120)), 1: list(range(80))}
    first = next(r for r in rows if r.partition == 0 and r.offset == 5)
    assert (bytes(first.key), bytes(first.value), first.topic) == (b"k0", b"p0-5", "ds")
    assert first.timestampType == 0 and first.timestamp is not None
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("host", b"web1")]
    other = next(r for r in rows if r.partition == 1)
    assert other.key is None and other.headers is None


def test_batch_read_json_offsets_and_latest(spark, bk, two_parts):
    df = _read(
        spark, bk, two_parts,
        startingOffsets=json.dumps({"ds": {"0": 100, "1": -2}}),
        endingOffsets=json.dumps({"ds": {"0": -1, "1": 10}}),
    )  # fmt: skip
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(100, 120)] + [(1, o) for o in range(10)]
    latest = _read(spark, bk, two_parts, startingOffsets=json.dumps({"ds": {"0": -1, "1": -1}}))
    assert latest.count() == 0


def test_min_partitions_splits_ranges_without_changing_data(spark, bk, two_parts):
    df = _read(spark, bk, two_parts, minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    assert df.select("partition", "offset").distinct().count() == 200


def test_subscribe_pattern(spark, bk, two_parts):
    create_topic(bk.bootstrap, "ds-other", 1)
    produce(bk.bootstrap, "ds-other", [b"x"] * 3)
    df = _read(spark, bk, two_parts).drop()  # sanity: plain subscribe excludes ds-other
    assert df.where(F.col("topic") != "ds").count() == 0
    pat = (
        spark.read.format("logflume")
        .option("bootstrap.servers", bk.bootstrap)
        .option("subscribePattern", "ds.*")
        .load()
    )
    assert dict(pat.groupBy("topic").count().collect()) == {"ds": 200, "ds-other": 3}


def test_batch_writer_round_trip(spark, bk):
    create_topic(bk.bootstrap, "written", 1)
    df = spark.createDataFrame(
        [(f"k{i}", f"value {i}") for i in range(50)], "key string, value string"
    )
    df.write.format("logflume").option("kafka.bootstrap.servers", bk.bootstrap).option(
        "topic", "written"
    ).mode("append").save()
    got = consume_all(bk.bootstrap, "written")
    assert sorted(m.value() for m in got) == sorted(f"value {i}".encode() for i in range(50))
    assert {m.key() for m in got} == {f"k{i}".encode() for i in range(50)}


def test_available_now_spreads_max_offsets_over_partitions_by_backlog(spark, bk, tmp_path):
    create_topic(bk.bootstrap, "backlog", 2)
    produce(bk.bootstrap, "backlog", [b"a"] * 300, partition=0)
    produce(bk.bootstrap, "backlog", [b"b"] * 100, partition=1)
    seen = []

    def collect(batch_df, batch_id):
        seen.append(dict(batch_df.groupBy("partition").count().collect()))

    stream = (
        spark.readStream.format("logflume")
        .option("kafka.bootstrap.servers", bk.bootstrap)
        .option("subscribe", "backlog")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "200")
        .load()
    )
    q = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert seen == [{0: 150, 1: 50}] * 2
    # Data produced after the run is left for the next one, which picks up only it.
    produce(bk.bootstrap, "backlog", [b"c"] * 7, partition=1)
    seen.clear()
    q = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert seen == [{1: 7}]


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory):
    """A broker whose retention has already deleted the start of topic `trimmed`."""
    settings = {"log.retention.check.interval.ms": 200}
    b = BrokerProcess(tmp_path_factory.mktemp("trim") / "broker", settings=settings).start()
    try:
        config = {"segment.bytes": "2048", "retention.bytes": "4096"}
        create_topic(b.bootstrap, "trimmed", 1, config)
        for chunk in range(40):  # one record batch each: segments roll between batches
            values = [f"record {i:04d} ".encode() * 4 for i in range(chunk * 10, chunk * 10 + 10)]
            produce(b.bootstrap, "trimmed", values)
        deadline = time.monotonic() + 30
        while watermarks(b.bootstrap, "trimmed")[0] == 0:
            assert time.monotonic() < deadline, "retention never deleted a segment"
            time.sleep(0.2)
        yield b
    finally:
        b.stop()


def test_offsets_removed_by_retention_fail_with_a_clear_error(spark, trimmed):
    df = _read(spark, trimmed, "trimmed", startingOffsets=json.dumps({"trimmed": {"0": 0}}))
    with pytest.raises((PySparkException, AnalysisException)) as err:
        df.count()
    text = str(err.value)
    assert "topic 'trimmed' partition 0: offsets 0.." in text
    assert re.search(r"earliest available offset is [1-9]\d*", text)
    assert "failOnDataLoss" in text


def test_fail_on_data_loss_false_skips_to_earliest(spark, trimmed):
    low, high = watermarks(trimmed.bootstrap, "trimmed")
    df = _read(
        spark, trimmed, "trimmed",
        startingOffsets=json.dumps({"trimmed": {"0": 0}}), failOnDataLoss="false",
    )  # fmt: skip
    offsets = sorted(r.offset for r in df.select("offset").collect())
    assert offsets[0] >= low and offsets[-1] == high - 1 and offsets[0] < high


def test_streaming_from_deleted_offsets_fails_unless_told_otherwise(spark, trimmed, tmp_path):
    def run(fail: str, ckpt: str):
        got = []
        stream = (
            spark.readStream.format("logflume")
            .option("kafka.bootstrap.servers", trimmed.bootstrap)
            .option("subscribe", "trimmed")
            .option("startingOffsets", json.dumps({"trimmed": {"0": 0}}))
            .option("failOnDataLoss", fail)
            .load()
        )
        q = (
            stream.writeStream.foreachBatch(lambda df, _: got.append(df.count()))
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return got

    with pytest.raises(Exception, match="no longer available"):
        run("true", str(tmp_path / "a"))
    low, high = watermarks(trimmed.bootstrap, "trimmed")
    assert sum(run("false", str(tmp_path / "b"))) >= high - low


def test_streaming_detects_a_log_that_ends_below_the_checkpoint(spark, bk, trimmed, tmp_path):
    """The checkpoint says offset 30, but the topic (recreated, here on another
    broker) now ends at 5: fail, or with failOnDataLoss=false read it from the start."""
    for broker, count in ((bk, 30), (trimmed, 5)):
        create_topic(broker.bootstrap, "moved", 1)
        produce(broker.bootstrap, "moved", [f"m{i}" for i in range(count)])

    def run(broker, fail: str):
        got = []
        stream = (
            spark.readStream.format("logflume")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "moved")
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", fail)
            .load()
        )
        q = (
            stream.writeStream.foreachBatch(
                lambda df, _: got.append(sorted(r.offset for r in df.select("offset").collect()))
            )
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return got

    assert run(bk, "true") == [list(range(30))]
    with pytest.raises(Exception, match="offset 30 is beyond the latest offset 5"):
        run(trimmed, "true")
    assert run(trimmed, "false") == [list(range(5))]
