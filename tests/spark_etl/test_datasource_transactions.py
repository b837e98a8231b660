"""The `logflume` data source over transactional topics: read_committed by default
(committed records only, never those of aborted or open transactions), every
record with `kafka.isolation.level=read_uncommitted`."""

import pytest
from confluent_kafka import Producer

from testkit.kafka import create_topic
from testkit.procs import BrokerProcess


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn-ds") / "broker").start()
    yield b
    b.stop()


def _transaction(producer, topic, values, commit):
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, v.encode(), partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


@pytest.fixture(scope="module")
def mixed(bk):
    """Topic `txn` partition 0: committed c0-c2, aborted a0-a1, committed c3-c4,
    then an open transaction o0 (its producer stays alive, not committing)."""
    create_topic(bk.bootstrap, "txn", 1)
    producer = Producer({"bootstrap.servers": bk.bootstrap, "transactional.id": "ds-test"})
    producer.init_transactions(30)
    _transaction(producer, "txn", ["c0", "c1", "c2"], commit=True)
    _transaction(producer, "txn", ["a0", "a1"], commit=False)
    _transaction(producer, "txn", ["c3", "c4"], commit=True)
    producer.begin_transaction()
    producer.produce("txn", b"o0", partition=0)
    producer.flush(30)
    yield "txn"
    producer.abort_transaction(30)


def _values(spark, bk, topic, **opts):
    r = spark.read.format("logflume").option("kafka.bootstrap.servers", bk.bootstrap)
    r = r.option("subscribe", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return sorted(row.value.decode() for row in r.load().select("value").collect())


def test_batch_read_is_read_committed_by_default(spark, bk, mixed):
    assert _values(spark, bk, mixed) == ["c0", "c1", "c2", "c3", "c4"]


def test_read_uncommitted_sees_every_data_record(spark, bk, mixed):
    values = _values(spark, bk, mixed, **{"kafka.isolation.level": "read_uncommitted"})
    assert values == ["a0", "a1", "c0", "c1", "c2", "c3", "c4", "o0"]
