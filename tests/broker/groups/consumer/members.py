"""A confluent-kafka consumer of the consumer group protocol (`group.protocol=consumer`,
KIP-848) in a thread, for the tests: it records its assignment callbacks and every
record it consumed and committed (a record counts once its offset is committed; a
failed commit seeks back to it, so it is read again by whoever owns the partition);
and a kafka-python consumer of the classic protocol kept the same way."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTopicPartition


class Member:
    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str, **conf):
        self.name = name
        self.events: list[tuple[str, tuple[tuple[str, int], ...]]] = []
        self.records: list[tuple[str, int, int, bytes]] = []  # topic, partition, offset, value
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
                "client.id": name,
                **conf,
            }
        )
        self._consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer, partitions):
        self.events.append(("assign", tuple((p.topic, p.partition) for p in partitions)))

    def _on_revoke(self, consumer, partitions):
        self.events.append(("revoke", tuple((p.topic, p.partition) for p in partitions)))

    def assignment(self) -> set[tuple[str, int]]:
        """What the callbacks say this member holds now."""
        held: set[tuple[str, int]] = set()
        for kind, parts in list(self.events):
            held = held | set(parts) if kind == "assign" else held - set(parts)
        return held

    def _run(self) -> None:
        c = self._consumer
        while not self._stop.is_set():
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(str(msg.error()))
                continue
            tp = TopicPartition(msg.topic(), msg.partition(), msg.offset() + 1)
            try:
                c.commit(offsets=[tp], asynchronous=False)
            except KafkaException as e:
                self.errors.append(f"commit: {e}")
                try:
                    c.seek(TopicPartition(msg.topic(), msg.partition(), msg.offset()))
                except KafkaException as e2:  # no longer assigned: the new owner reads it
                    self.errors.append(f"seek: {e2}")
                continue
            self.records.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
        c.close()  # leaves the group (member epoch -1)

    def close(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close"


def wait_until(condition, timeout: float = 90.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class ClassicMember:
    """A kafka-python consumer (the classic protocol, range assignor) in a thread, with
    the same bookkeeping as Member: a record counts once its offset is committed; a
    failed commit (a rebalance under way) seeks back, so it is read again."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str):
        self.name = name
        self.records: list[tuple[str, int, int, bytes]] = []
        self.errors: list[str] = []
        self._held: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._consumer = KafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RangePartitionAssignor],
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
            metadata_max_age_ms=1000,
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def assignment(self) -> set[tuple[str, int]]:
        return set(self._held)

    def _run(self) -> None:
        c = self._consumer
        while not self._stop.is_set():
            try:
                batches = c.poll(timeout_ms=200)
                self._held = {(tp.topic, tp.partition) for tp in c.assignment()}
            except KafkaError as e:
                self.errors.append(f"poll: {e}")
                continue
            for tp, msgs in batches.items():
                if not msgs:
                    continue
                end = OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
                try:
                    c.commit({KTopicPartition(tp.topic, tp.partition): end})
                except KafkaError as e:
                    self.errors.append(f"commit: {e}")
                    try:
                        c.seek(tp, msgs[0].offset)
                    except (KafkaError, AssertionError, ValueError) as e2:
                        self.errors.append(f"seek: {e2}")  # no longer ours
                    continue
                self.records += [(m.topic, m.partition, m.offset, m.value) for m in msgs]
        c.close()  # leaves the group (LeaveGroup)

    def close(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close"
