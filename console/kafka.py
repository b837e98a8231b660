"""The console's reads of the cluster through confluent-kafka. Every call blocks (up to
`timeout` seconds) and raises KafkaException or RuntimeError on failure: the server
runs them in a worker thread and shows the error on the page.

`KafkaView` owns one AdminClient (thread-safe in librdkafka), the stats reader's
Consumer, which only `read_stats` touches, and the audit topic's follower, which
only `audit` touches (the server calls it from one refresh at a
time). The message browser makes a short-lived Consumer per request.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from common.topic_names import AUDIT_TOPIC, is_internal
from console.model import StatsFold, lag

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from common.audit_kafka import AuditFollower

STATS_BACKLOG = 2000  # rows of the stats topic read at start, per partition
AUDIT_MINUTES = 30  # minutes of the audit grid


class KafkaView:
    def __init__(self, conf: dict, stats_topic: str, timeout: float = 5.0):
        from confluent_kafka.admin import AdminClient

        self.conf = dict(conf)
        self.stats_topic = stats_topic
        self.timeout = timeout
        ms = int(timeout * 1000)
        self.admin = AdminClient({**self.conf, "socket.timeout.ms": ms})
        self.stats = StatsFold()
        self._stats_consumer: Consumer | None = None
        self._stats_partitions: set[int] = set()
        self._audit: AuditFollower | None = None

    def close(self) -> None:
        if self._stats_consumer is not None:
            self._stats_consumer.close()
            self._stats_consumer = None
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    # ---- the audit: what each tier counted per host and minute -------------------

    def audit(self, now_ms: int) -> list:
        """The verdicts of the last AUDIT_MINUTES minutes (common/audit.py), from the
        audit topic as the agents and Spark jobs publish it (no recount)."""
        from common.audit import compared_tiers, reconcile, totals
        from common.audit_kafka import AuditFollower

        if self._audit is None:
            conf = {**self.conf, "socket.timeout.ms": int(self.timeout * 1000)}
            self._audit = AuditFollower(conf, AUDIT_TOPIC, AUDIT_MINUTES * 60_000)
        self._audit.update(self.timeout, poll_s=0.1)
        records = self._audit.records()
        compared = compared_tiers(records)
        return reconcile(totals(records), compared, now_ms, covered=self._audit.coverage())

    def _consumer(self, **extra):
        from confluent_kafka import Consumer

        return Consumer(
            {
                **self.conf,
                "group.id": "logflume-console",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "socket.timeout.ms": int(self.timeout * 1000),
                **extra,
            }
        )

    # ---- cluster: brokers, controller, topics, partitions, offsets -------------

    def cluster(self) -> dict:
        """Brokers, controller, and every topic's partitions with leader, replicas,
        ISR and offsets (earliest, high watermark)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        meta = self.admin.list_topics(timeout=self.timeout)
        described = self.admin.describe_cluster(request_timeout=self.timeout).result(
            timeout=self.timeout
        )
        controller = described.controller.id if described.controller is not None else None
        brokers = [
            {"id": b.id, "host": b.host, "port": b.port}
            for b in sorted(meta.brokers.values(), key=lambda b: b.id)
        ]
        topics: list[dict[str, Any]] = []
        wanted = {}
        for name, t in sorted(meta.topics.items()):
            if t.error is not None and not t.partitions:
                topics.append({"name": name, "error": t.error.str(), "partitions": []})
                continue
            parts: list[dict[str, Any]] = []
            for index, p in sorted(t.partitions.items()):
                parts.append(
                    {
                        "partition": index,
                        "leader": p.leader,
                        "replicas": list(p.replicas),
                        "isr": list(p.isrs),
                    }
                )
                tp = TopicPartition(name, index)
                wanted[(name, index, "low")] = (tp, OffsetSpec.earliest())
                wanted[(name, index, "high")] = (tp, OffsetSpec.latest())
            topics.append({"name": name, "internal": is_internal(name), "partitions": parts})
        offsets = self._offsets(wanted)
        for topic in topics:
            for p in topic["partitions"]:
                p["low"] = offsets.get((topic["name"], p["partition"], "low"))
                p["high"] = offsets.get((topic["name"], p["partition"], "high"))
        return {
            "cluster_id": described.cluster_id,
            "controller": controller,
            "brokers": brokers,
            "topics": topics,
        }

    def _offsets(self, wanted: dict) -> dict:
        """{key: offset} for {key: (TopicPartition, OffsetSpec)}; one ListOffsets round
        per spec kind (a request may not name a partition twice)."""
        out = {}
        for kind in ("low", "high"):
            keys = {k: v for k, v in wanted.items() if k[2] == kind}
            if not keys:
                continue
            futures = self.admin.list_offsets(
                {tp: spec for tp, spec in keys.values()}, request_timeout=self.timeout
            )
            by_tp = {(tp.topic, tp.partition): key for key, (tp, _) in keys.items()}
            for tp, future in futures.items():
                try:
                    out[by_tp[(tp.topic, tp.partition)]] = future.result(
                        timeout=self.timeout
                    ).offset
                except Exception:  # one partition without a leader: its offset unknown
                    out[by_tp[(tp.topic, tp.partition)]] = None
        return out

    # ---- consumer groups ---------------------------------------------------------

    def groups(self, high_watermarks: dict[tuple[str, int], int]) -> list[dict]:
        """Every consumer group with its state, and its committed offsets and lag per
        partition (lag against `high_watermarks`, from the last cluster snapshot)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        listed = self.admin.list_consumer_groups(request_timeout=self.timeout).result(
            timeout=self.timeout
        )
        out = []
        for listing in sorted(listed.valid, key=lambda g: g.group_id):
            state = getattr(listing.state, "name", str(listing.state))
            group = {"group": listing.group_id, "state": state, "partitions": [], "lag": 0}
            future = self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(listing.group_id)], request_timeout=self.timeout
            )[listing.group_id]
            try:
                result = future.result(timeout=self.timeout)
            except Exception as exc:
                group["error"] = _describe(exc)
                out.append(group)
                continue
            total = None
            for tp in sorted(result.topic_partitions or [], key=lambda t: (t.topic, t.partition)):
                high = high_watermarks.get((tp.topic, tp.partition))
                behind = lag(high, tp.offset) if high is not None else None
                group["partitions"].append(
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "committed": tp.offset,
                        "high": high,
                        "lag": behind,
                    }
                )
                if behind is not None:
                    total = (total or 0) + behind
            group["lag"] = total
            out.append(group)
        return out

    # ---- nginx-stats -------------------------------------------------------------

    def read_stats(self) -> list[dict]:
        """New rows of the stats topic folded in; the per-minute points. The topic
        may not exist yet (no Spark job): then no points, and it is looked for again
        next time."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        meta = self.admin.list_topics(self.stats_topic, timeout=self.timeout)
        topic = meta.topics.get(self.stats_topic)
        if topic is None or topic.error is not None or not topic.partitions:
            return self.stats.per_minute()
        if self._stats_consumer is None:
            self._stats_consumer = self._consumer()
        new = set(topic.partitions) - self._stats_partitions
        if new:
            starts = []
            for index in sorted(new):
                low, high = self._stats_consumer.get_watermark_offsets(
                    TopicPartition(self.stats_topic, index), timeout=self.timeout
                )
                start = max(low, high - STATS_BACKLOG) if high >= 0 else OFFSET_BEGINNING
                starts.append(TopicPartition(self.stats_topic, index, start))
            self._stats_consumer.incremental_assign(starts)
            self._stats_partitions |= new
        while True:
            batch = self._stats_consumer.consume(num_messages=1000, timeout=0.2)
            for msg in batch:
                value = msg.value()
                if msg.error() is None and value is not None:
                    try:
                        self.stats.add(json.loads(value))
                    except ValueError:
                        pass
            if len(batch) < 1000:
                break
        return self.stats.per_minute()

    # ---- message browser ---------------------------------------------------------

    def messages(self, topic: str, partition: int, n: int, max_chars: int = 500) -> dict:
        """The last `n` records of a partition: offset, timestamp (ms), key and value
        (UTF-8 with replacement, cut to `max_chars`)."""
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._consumer()
        try:
            tp = TopicPartition(topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=self.timeout)
            start = max(low, high - n)
            records: list[dict] = []
            if high > start:
                consumer.assign([TopicPartition(topic, partition, start)])
                deadline = time.monotonic() + self.timeout
                last = start - 1
                while last < high - 1 and time.monotonic() < deadline:
                    for msg in consumer.consume(num_messages=n, timeout=0.5):
                        if msg.error() is not None:
                            if msg.error().fatal():
                                raise KafkaException(msg.error())
                            continue
                        last = msg.offset()
                        kind, stamp = msg.timestamp()
                        records.append(
                            {
                                "offset": msg.offset(),
                                "timestamp": stamp if kind else None,
                                "key": _text(msg.key(), max_chars),
                                "value": _text(msg.value(), max_chars),
                            }
                        )
            return {
                "topic": topic,
                "partition": partition,
                "low": low,
                "high": high,
                "records": records[-n:],
            }
        finally:
            consumer.close()


def _text(value: bytes | None, max_chars: int) -> str | None:
    if value is None:
        return None
    text = value.decode("utf-8", errors="replace")
    return text if len(text) <= max_chars else text[:max_chars] + "…"


def _describe(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)
