"""`client.read_range` over Fetch requests, outside Spark, against a real broker: the
records of [start, end) exactly, across fetches; a range past the log's end or below
its start (failOnDataLoss either way); the settings the reads cannot honour refused
before a query starts."""

import logging

import pytest

from spark_etl.source import client, fetcher
from spark_etl.source.batches import RecordSet
from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA
from spark_etl.source.options import DataLossError, SourceOptions
from testkit.kafka import create_topic, produce
from testkit.procs import BrokerProcess

VALUE = b"v" * 1000


@pytest.fixture(autouse=True)
def pooled_closed():
    yield
    client.close_pooled()


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("rr") / "broker").start()
    create_topic(b.bootstrap, "rr", 1)
    # ~10 MB: a read of all of it takes several fetches
    produce(b.bootstrap, "rr", [b"%d:" % i + VALUE for i in range(10_000)])
    yield b
    b.stop()


def _opts(bk, **extra):
    return SourceOptions.parse(
        {"kafka.bootstrap.servers": bk.bootstrap, "subscribe": "rr", **extra}, streaming=False
    )


def _offsets(batches) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


def test_the_range_exactly_across_fetches(bk):
    batches = list(client.read_range(_opts(bk), ("rr", 0), 1234, 9876, RECORDS_ARROW_SCHEMA))
    assert _offsets(batches) == list(range(1234, 9876))
    row = batches[0].slice(0, 1).to_pylist()[0]
    assert row["value"] == b"1234:" + VALUE and (row["topic"], row["partition"]) == ("rr", 0)


def test_each_fetch_is_on_its_way_while_the_last_records_are_decoded(bk, monkeypatch):
    events = []
    send, to_arrow = fetcher.Fetcher._send_fetch, RecordSet.to_arrow

    def sending(self, conn, tp, offset, read_committed):
        events.append(("send", offset))
        return send(self, conn, tp, offset, read_committed)

    def decoding(self, arrow_schema):
        events.append(("decode", self.next_offset))
        return to_arrow(self, arrow_schema)

    monkeypatch.setattr(fetcher.Fetcher, "_send_fetch", sending)
    monkeypatch.setattr(RecordSet, "to_arrow", decoding)
    batches = list(client.read_range(_opts(bk), ("rr", 0), 1234, 9876, RECORDS_ARROW_SCHEMA))
    assert _offsets(batches) == list(range(1234, 9876))
    sent = [offset for what, offset in events if what == "send"]
    assert len(sent) >= 3 and len(set(sent)) == len(sent)  # several, each asked once
    for i, (what, next_offset) in enumerate(events):
        if what == "decode" and next_offset < 9876:
            assert ("send", next_offset) in events[:i]


def test_a_range_past_the_log_end_is_data_loss(bk):
    with pytest.raises(DataLossError, match="the log ends at offset 10000"):
        list(client.read_range(_opts(bk), ("rr", 0), 9990, 10_010, RECORDS_ARROW_SCHEMA))


def test_a_range_past_the_log_end_without_fail_on_data_loss(bk, caplog):
    opts = _opts(bk, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, "spark_etl.source"):
        batches = list(client.read_range(opts, ("rr", 0), 9990, 10_010, RECORDS_ARROW_SCHEMA))
    assert _offsets(batches) == list(range(9990, 10_000))
    assert "skipping them" in caplog.text


def test_a_start_beyond_the_log_is_out_of_range(bk, caplog):
    with pytest.raises(DataLossError, match="offset 20000 is beyond the latest offset 10000"):
        list(client.read_range(_opts(bk), ("rr", 0), 20_000, 20_010, RECORDS_ARROW_SCHEMA))
    # failOnDataLoss=false: from the log's start on, as check_start says
    opts = _opts(bk, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, "spark_etl.source"):
        reader = client.read_range(opts, ("rr", 0), 20_000, 20_010, RECORDS_ARROW_SCHEMA)
        first = next(reader)
    reader.close()
    assert first.column("offset")[0].as_py() == 0
    assert "continuing from offset 0" in caplog.text


def test_settings_the_reads_cannot_honour_fail_the_query_early(bk, spark):
    reader = (
        spark.read.format("logflume")
        .option("kafka.bootstrap.servers", bk.bootstrap)
        .option("subscribe", "rr")
        .option("kafka.security.protocol", "SASL_SSL")
        .option("kafka.sasl.mechanism", "OAUTHBEARER")
    )
    with pytest.raises(Exception, match="sasl.mechanism OAUTHBEARER"):
        reader.load().count()
    bad_level = reader.option("kafka.sasl.mechanism", "PLAIN").option(
        "kafka.isolation.level", "committed"
    )
    with pytest.raises(Exception, match="kafka.isolation.level must be"):
        bad_level.load().count()
