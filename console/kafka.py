"""The console's reads of the cluster through confluent-kafka. Every call blocks (up to
`timeout` seconds) and raises KafkaException or RuntimeError on failure: the server
runs them in a worker thread and shows the error on the page.

`KafkaView` owns one AdminClient (thread-safe in librdkafka), the stats reader's
Consumer, which only `read_stats` touches, the audit topic's follower, which
only `audit` touches, and the groups' reader (console/groups.py), which only `groups`
touches (the server calls them from one refresh at a time). The message browser
makes a short-lived Consumer per request.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from common.topic_names import AUDIT_TOPIC, is_internal
from console.groups import GroupsReader
from console.model import StatsFold, record_json, text_of

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
        self._groups = GroupsReader(self.conf, timeout)

    def close(self) -> None:
        self._groups.close()
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
        """Every consumer group with its state, members, committed offsets and lag
        per partition (lag against `high_watermarks`, from the last cluster
        snapshot): console/groups.py, one request of a kind per coordinator."""
        return self._groups.read(high_watermarks)

    # ---- configs -----------------------------------------------------------------

    def configs(self, kind: str, name: str) -> dict:
        """A topic's or a broker's configs (DescribeConfigs): name, value (None when
        sensitive), source (Kafka's names: DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG,
        DEFAULT_CONFIG ...), read-only and sensitive flags, sorted by name."""
        from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

        resource = ConfigResource(
            ResourceType.TOPIC if kind == "topic" else ResourceType.BROKER, name
        )
        futures = self.admin.describe_configs([resource], request_timeout=self.timeout)
        entries = futures[resource].result(timeout=self.timeout)
        rows = []
        for key, entry in sorted(entries.items()):
            rows.append(
                {
                    "name": key,
                    "value": None if entry.is_sensitive else entry.value,
                    "source": _source_name(ConfigSource, entry.source),
                    "default": bool(entry.is_default),
                    "read_only": bool(entry.is_read_only),
                    "sensitive": bool(entry.is_sensitive),
                }
            )
        return {"type": kind, "name": name, "configs": rows}

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

    def messages(
        self,
        topic: str,
        partition: int,
        n: int,
        *,
        offset: int | None = None,
        timestamp: int | None = None,
        max_chars: int = 500,
    ) -> dict:
        """Up to `n` committed records of a partition: the last `n` before its last
        stable offset, or the first `n` from `offset`, or from the first record at or
        after `timestamp` (ms; offsets_for_times). Each with offset, timestamp (ms),
        key, value (UTF-8 with replacement, cut to `max_chars`), the value
        pretty-printed when it is a JSON object or array, and headers.

        The read is read_committed and ends at the last stable offset (ListOffsets
        with isolation level READ_COMMITTED): a transactional partition whose last
        offsets are a commit marker, which no consumer is given, ends at once (the
        consumer's end-of-partition event) rather than at a timeout. `stopped` says
        why the read ended: "end" (the last stable offset), "count" (n records) or
        "timeout"."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        low, high, stable = self._bounds(topic, partition)
        if offset is not None:
            start = min(max(offset, low), stable)
        elif timestamp is not None:
            start = self._offset_at(topic, partition, timestamp, stable)
        else:
            start = max(low, stable - n)
        records: list[dict] = []
        stopped = "end"
        if start < stable:
            consumer = self._consumer(
                **{"enable.partition.eof": True, "isolation.level": "read_committed"}
            )
            try:
                consumer.assign([TopicPartition(topic, partition, start)])
                deadline = time.monotonic() + self.timeout
                stopped = "timeout"
                while stopped == "timeout" and time.monotonic() < deadline:
                    for msg in consumer.consume(num_messages=n, timeout=0.5):
                        err = msg.error()
                        if err is not None:
                            if err.code() == KafkaError._PARTITION_EOF:
                                stopped = "end"
                                break
                            if err.fatal():
                                raise KafkaException(err)
                            continue
                        records.append(_record(msg, max_chars))
                        if len(records) >= n:
                            stopped = "count"
                            break
            finally:
                consumer.close()
        return {
            "topic": topic,
            "partition": partition,
            "low": low,
            "high": high,
            "last_stable": stable,
            "start": start,
            "stopped": stopped,
            "records": records,
        }

    def _bounds(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(log start offset, high watermark, last stable offset) of a partition."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        tp = TopicPartition(topic, partition)
        found = []
        for spec, isolation in (
            (OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
            (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
            (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
        ):
            futures = self.admin.list_offsets(
                {tp: spec}, isolation_level=isolation, request_timeout=self.timeout
            )
            found.append(futures[tp].result(timeout=self.timeout).offset)
        low, high, stable = found
        return low, high, stable

    def _offset_at(self, topic: str, partition: int, timestamp: int, stable: int) -> int:
        """The offset of the first record at or after `timestamp`; `stable` when
        there is none (the read then ends at once)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        tp = TopicPartition(topic, partition)
        futures = self.admin.list_offsets(
            {tp: OffsetSpec.for_timestamp(timestamp)}, request_timeout=self.timeout
        )
        found = futures[tp].result(timeout=self.timeout).offset
        return stable if found < 0 else min(found, stable)


def _source_name(sources, source) -> str:
    """Kafka's name of a config's source (confluent-kafka gives its number)."""
    try:
        return str(sources(source).name)
    except ValueError:
        return str(source)


def _record(msg, max_chars: int) -> dict:
    kind, stamp = msg.timestamp()
    value = msg.value()
    return {
        "offset": msg.offset(),
        "timestamp": stamp if kind else None,
        "key": text_of(msg.key(), max_chars),
        "value": text_of(value, max_chars),
        "json": record_json(value),
        "headers": [[k, text_of(v, max_chars)] for k, v in msg.headers() or []],
    }
