"""Clients of the legacy message format against the broker: kafka-python pinned to
Kafka 0.10.1 (magic 1, Produce v2 / Fetch v3), 0.9 (magic 0, Produce v1 / Fetch v1)
and 0.8.2 (magic 0, Produce v0 / Fetch v0). What they produce is read back by them
and by a current client with the same offsets, keys, values and timestamps; what a
current client produces (lz4 batches with headers) is read by them. On one broker
and on a three-broker cluster (conftest.py)."""

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as TP
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from testkit.kafka import create_topic

ERAS = [((0, 10, 1), "gzip", True), ((0, 9), "snappy", False), ((0, 8, 2), None, False)]


def _legacy_read(bootstrap: str, api, topic: str) -> list[tuple]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=api, consumer_timeout_ms=3000,
        enable_auto_commit=False,
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        return [(m.offset, m.key, m.value, m.timestamp) for m in consumer]
    finally:
        consumer.close()


def _current_read(bootstrap: str, topic: str, count: int) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "current"})
    try:
        consumer.assign([TP(topic, 0, 0)])
        got = []
        for _ in range(50):
            got += [m for m in consumer.consume(count, 0.2) if m.error() is None]
            if len(got) >= count:
                break
        return [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in got]
    finally:
        consumer.close()


@pytest.mark.parametrize("api,codec,timestamps", ERAS, ids=lambda v: str(v))
def test_legacy_producer_read_by_legacy_and_current_clients(target, api, codec, timestamps):
    bootstrap = target.bootstrap
    topic = "legacy-" + "-".join(map(str, api))
    create_topic(bootstrap, topic, replication=target.replication)
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api, compression_type=codec)
    for i in range(50):
        ts = 1_790_000_000_000 + i if timestamps else None
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp_ms=ts)
    producer.flush(30)
    producer.close()
    expected = [
        (i, b"k%d" % i, b"v%d" % i, 1_790_000_000_000 + i if timestamps else None)
        for i in range(50)
    ]
    assert _legacy_read(bootstrap, api, topic) == expected
    current = [(o, k, v, -1 if t is None else t) for o, k, v, t in expected]
    assert _current_read(bootstrap, topic, 50) == current


@pytest.mark.parametrize("api", [era[0] for era in ERAS], ids=str)
def test_current_producer_read_by_legacy_clients(target, api):
    bootstrap = target.bootstrap
    topic = "current-for-" + "-".join(map(str, api))
    create_topic(bootstrap, topic, replication=target.replication)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 50}
    )
    for i in range(100):
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
            timestamp=1_790_000_000_000 + i, headers=[("dropped", b"for old clients")],
        )  # fmt: skip
    assert producer.flush(30) == 0
    with_ts = api >= (0, 10)
    assert _legacy_read(bootstrap, api, topic) == [
        (i, b"k%d" % i, b"v%d" % i, 1_790_000_000_000 + i if with_ts else None) for i in range(100)
    ]
