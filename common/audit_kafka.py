"""The audit's reads of Kafka, for `logflume audit` and the console: the tiers'
totals from the audit topic, and the `broker` tier, recounted from the data topics
themselves (common/audit.py says what is counted and how).

Both read with read_committed, from the first offset whose timestamp is at or after
the window's start (`offsets_for_times`) to the partition's end as it was when the
read began; records later than that are the next read's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from common.audit import (
    BROKER,
    MINUTE_MS,
    AuditRecord,
    Bucket,
    Progress,
    Tally,
    coverage,
    published,
    tally_values,
)

READ_TIMEOUT_S = 30.0


class AuditReadError(RuntimeError):
    """A topic could not be read (unreachable, not authorized): the message says why."""


def read_messages(
    conf: dict,
    topic: str,
    since_ms: int | None,
    handle: Callable[[list], None],
    timeout_s: float = READ_TIMEOUT_S,
) -> bool:
    """Hand `handle` every committed message of `topic` from `since_ms` (None: the
    beginning) to the end, in batches. False when the topic does not exist. Blocking."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **conf,
            "group.id": "logflume-audit",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            if meta is not None and meta.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise AuditReadError(f"topic {topic}: {meta.error.str()}")
            return False
        partitions = sorted(meta.partitions)
        if since_ms is None:
            firsts = dict.fromkeys(partitions, 0)
        else:  # -1: no record at or after since_ms
            asked = [TopicPartition(topic, p, since_ms) for p in partitions]
            found = consumer.offsets_for_times(asked, timeout=timeout_s)
            firsts = {tp.partition: tp.offset for tp in found}
        ends, assigned = {}, []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            start = max(firsts[p], low)
            if firsts[p] >= 0 and high > start:
                ends[p] = high
                assigned.append(TopicPartition(topic, p, start))
        if not ends:
            return True
        limits = dict(ends)  # `ends` keeps the partitions not read to their end yet
        consumer.assign(assigned)
        deadline = time.monotonic() + timeout_s
        while ends:
            batch = consumer.consume(10_000, 0.2)
            if batch:
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline:
                raise AuditReadError(f"reading {topic}: no progress for {timeout_s:.0f}s")
            good = [m for m in batch if m.error() is None]
            if len(good) < len(batch):
                for msg in batch:
                    err = msg.error()
                    if err is None:
                        continue
                    if err.code() == KafkaError._PARTITION_EOF:
                        ends.pop(msg.partition(), None)
                    elif err.code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                        raise AuditReadError(f"reading {topic}: {err.str()}")
            # records produced after the read began are the next read's
            good = [m for m in good if m.offset() < limits[m.partition()]]
            if good:
                handle(good)
            for tp in consumer.position([TopicPartition(topic, p) for p in list(ends)]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
    finally:
        consumer.close()
    return True


def read_audit(
    conf: dict, topic: str, timeout_s: float = READ_TIMEOUT_S
) -> tuple[list[AuditRecord], list[Progress]]:
    """The last record of every key of the audit topic, and the progress marks. The
    whole topic is read: a bucket's total may be published long after its minute."""
    messages: list[tuple[bytes | None, bytes | None]] = []

    def keep(batch: list) -> None:
        messages.extend((m.key(), m.value()) for m in batch)

    read_messages(conf, topic, None, keep, timeout_s)
    return published(messages)


def recount(
    conf: dict,
    topics: Iterable[str],
    from_ms: int,
    to_ms: int,
    hosts: set[str] | None = None,
    timeout_s: float = READ_TIMEOUT_S,
) -> list[AuditRecord]:
    """The `broker` tier: every record of `topics` whose timestamp is in [from_ms,
    to_ms), bucketed and checksummed as the agent does (of `hosts` only, when given)."""
    buckets: dict[Bucket, Tally] = {}
    for topic in topics:

        def count(batch: list, topic: str = topic) -> None:
            # the per-record loop of a recount of millions: grouped by the host
            # header's bytes and the minute, decoded and checksummed per group
            groups: dict[tuple[bytes, int], list[bytes]] = {}
            for msg in batch:
                ts = msg.timestamp()[1]
                if ts < from_ms or ts >= to_ms:
                    continue
                host = b""
                for name, value in msg.headers() or ():
                    if name == "host":
                        host = value
                        break
                key = (host, ts - ts % MINUTE_MS)
                values = groups.get(key)
                if values is None:
                    values = groups[key] = []
                values.append(msg.value() or b"")
            for (host, minute), values in groups.items():
                name = host.decode("utf-8", "replace")
                if hosts is None or name in hosts:
                    tally_values(buckets, Bucket(name, topic, minute), values)

        read_messages(conf, topic, from_ms, count, timeout_s)
    return [AuditRecord(BROKER, b, "recount", t) for b, t in buckets.items()]


class AuditFollower:
    """The audit topic, followed: the last record of every key whose minute is
    within `horizon_ms` before now, and the Spark tiers' coverage (common/audit.py)
    of everything read. One consumer, assigned once the topic exists, read from the
    beginning; `update` reads what arrived since. Used from one thread."""

    def __init__(self, conf: dict, topic: str, horizon_ms: int):
        from confluent_kafka import Consumer

        self.topic, self.horizon_ms = topic, horizon_ms
        self.consumer = Consumer(
            {
                **conf,
                "group.id": "logflume-audit",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            }
        )
        self.partitions: list[int] = []
        self.eof_at: dict[int, int] = {}  # partition -> the end offset it last reported
        self.latest: dict[bytes, AuditRecord] = {}
        self.firsts: dict[tuple[str, str], AuditRecord] = {}  # a tier's first minute
        self.marks: dict[bytes, Progress] = {}

    def update(self, timeout_s: float = READ_TIMEOUT_S, poll_s: float = 0.5) -> bool:
        """Read what was published since the last call, up to each partition's end as
        it was when this call began (its last stable offset: read_committed), and for
        at most `timeout_s`; the rest is the next call's. Agents publish all the time,
        so reading "until nothing more comes" would never end on a busy topic. Whether
        every partition was read to that end (False: the topic does not exist yet,
        or `timeout_s` ran out first)."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

        if not self.partitions:
            meta = self.consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
            if meta is None or meta.error is not None or not meta.partitions:
                return False
            self.partitions = sorted(meta.partitions)
            self.consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self.partitions]
            )
        deadline = time.monotonic() + timeout_s
        ends = {}
        for p in self.partitions:
            tp = TopicPartition(self.topic, p)
            ends[p] = self.consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)[1]
        horizon = int(time.time() * 1000) - self.horizon_ms
        while True:
            positions = self.consumer.position([TopicPartition(self.topic, p) for p in ends])
            for tp in positions:
                if max(tp.offset, self.eof_at.get(tp.partition, -1)) >= ends[tp.partition]:
                    del ends[tp.partition]
            if not ends or time.monotonic() > deadline:
                break
            for msg in self.consumer.consume(10_000, poll_s):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise AuditReadError(f"reading {self.topic}: {err.str()}")
                    partition, offset = msg.partition(), msg.offset()
                    if partition is not None and offset is not None:
                        self.eof_at[partition] = offset
                    continue
                key, value = msg.key(), msg.value()
                if key is None:
                    continue
                rec = AuditRecord.parse(key, value)
                if rec is None:
                    if (mark := Progress.parse(value)) is not None:
                        self.marks[key] = mark
                    continue
                first = self.firsts.get((rec.tier, rec.bucket.topic))
                if first is None or rec.bucket.minute < first.bucket.minute:
                    self.firsts[(rec.tier, rec.bucket.topic)] = rec
                if rec.bucket.minute >= horizon:
                    self.latest[key] = rec
        self.latest = {k: r for k, r in self.latest.items() if r.bucket.minute >= horizon}
        return not ends

    def records(self) -> list[AuditRecord]:
        return list(self.latest.values())

    def coverage(self):
        """`common.audit.coverage` of every record read, old ones included."""
        return coverage(self.firsts.values(), self.marks.values())

    def close(self) -> None:
        self.consumer.close()
