"""Topics, producing and consuming through confluent-kafka, for tests and benchmarks."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict | None = None, replication=1
):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication, config=config or {})])
    futures[name].result(30)


def produce(
    bootstrap: str, topic: str, values, partition: int | None = None, key=None, headers=None
):
    """Send `values` (bytes or str) with acks=all; raise unless all were acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
    for v in values:
        while True:
            try:
                producer.produce(
                    topic, value=v, key=key, headers=headers, on_delivery=on_delivery, **kwargs
                )
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    if errors:
        raise KafkaException(errors[0])


def consume_all(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 30.0) -> list:
    """Every record of `topic` from its log start to its current end."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tests", "enable.partition.eof": True}
    )
    try:
        out = []
        for p in range(partitions):
            low, high = c.get_watermark_offsets(
                TopicPartition(topic, p), timeout=timeout, cached=False
            )
            if high == low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + timeout
            got: list[Message] = []
            while len(got) < high - low and time.monotonic() < deadline:
                for m in c.consume(1000, timeout=1.0):
                    if m.error() is None:
                        got.append(m)
            out += got
        return out
    finally:
        c.close()


def consume_and_commit(
    bootstrap: str, topic: str, group: str, count: int, timeout: float = 60.0
) -> None:
    """Read `count` records of `topic` from the start as member of `group`, then
    commit: the group's committed offsets are then known to the test."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got, deadline = 0, time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                got += 1
        assert got == count, f"read {got} of {count} records of {topic}"
        c.commit(asynchronous=False)
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)
    finally:
        c.close()
