"""The audit: per (host, topic, minute), how many records each tier of the pipeline
saw and a checksum of them, and the verdict that reconciles the tiers.

One clock: the minute of a record is the minute of its Kafka record timestamp,
which the agent sets to the line's own time where a parser read one (nginx
`$time_local`, syslog) and to the time its sink took the line otherwise. Every
tier buckets by (host, topic, minute of that timestamp); the host is the record's
`host` header ("" when it has none).

One checksum: per bucket, the count and the sum modulo 2^64 of XXH64 (seed 42, the
seed of Spark's `xxhash64`) of each record's value bytes, exactly as produced; the
Spark jobs compute it in the Python worker that parses the records. A lost record
and a duplicated one cancel in the count, not in the checksum.

Tiers, and what each counts:

- `agent-source`: lines an agent's source read, with how many its interceptors
  filtered out and a parser could not parse (`filtered`, `unparsable`), by the
  agent's clock when read and under the topic of the sink that publishes them
  (agent/source_audit.py); counts only, shown beside the others, never held to them;
- `agent`: records the agent's kafka sink delivered (the reference the others are
  compared with);
- `broker`: records the topic holds, recounted by `logflume audit --recount`;
- `spark-offline`, `spark-realtime`: records the Spark jobs read.

Each tier writer publishes, to the audit topic (`logflume-audit`), the running total
of every bucket it changed, keyed `tier/host/topic/minute/writer`: the writer
(agent, sink and a run id, or a Spark batch id) keeps keys of different processes
apart, so the totals of a restarted agent add up instead of replacing each other;
the topic is compacted, so the last total of each key is what counts. A bucket is
final at a tier `grace` after its minute ends; until then the verdict is "still
open". The Spark jobs also publish progress marks (`Progress`: when they last read
the topic to its end), so that a minute they have not read to its end yet is not
taken for missing lines.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from itertools import repeat
from typing import NamedTuple

import orjson
import xxhash

HASH_SEED = 42  # Spark's xxhash64 seed
MASK = (1 << 64) - 1
MINUTE_MS = 60_000
GRACE_S = 120.0  # a bucket is final this long after its minute ends

AGENT_SOURCE = "agent-source"
AGENT = "agent"
BROKER = "broker"
SPARK_OFFLINE = "spark-offline"
SPARK_REALTIME = "spark-realtime"
TIERS = (AGENT_SOURCE, AGENT, BROKER, SPARK_OFFLINE, SPARK_REALTIME)
DOWNSTREAM = (BROKER, SPARK_OFFLINE, SPARK_REALTIME)  # compared with AGENT
# A tier's running totals are kept this long after their minute (by the agent's sink
# and the realtime job); a record later still opens the bucket under a new writer.
KEEP_S = 6 * 3600.0

# The audit topic, as the agent creates it when missing (operators create it so on a
# secured cluster): compacted (the last total of each key counts) and deleted after
# a week (buckets older than that are no longer audited).
AUDIT_PARTITIONS = 3
AUDIT_RETENTION_MS = 7 * 24 * 3600 * 1000
AUDIT_TOPIC_CONFIG = {"cleanup.policy": "compact,delete", "retention.ms": str(AUDIT_RETENTION_MS)}

_xxh64 = xxhash.xxh64_intdigest


def checksum(values: Iterable[bytes], start: int = 0) -> int:
    """`start` plus the values' hashes, modulo 2^64."""
    return (start + sum(map(_xxh64, values, repeat(HASH_SEED)))) & MASK


def minute_of(timestamp_ms: int) -> int:
    """The start of the minute of a timestamp, in epoch milliseconds."""
    return timestamp_ms - timestamp_ms % MINUTE_MS


def minute_text(minute_ms: int) -> str:
    """'2026-11-28T16:10Z' for the minute starting at `minute_ms`."""
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(minute_ms // 1000))


def host_of(headers: list[tuple[str, bytes]] | None) -> str:
    """The `host` header of a record's headers, "" when it has none."""
    for name, value in headers or ():
        if name == "host":
            return value.decode("utf-8", "replace")
    return ""


class Bucket(NamedTuple):
    host: str
    topic: str
    minute: int  # epoch ms of the minute's start


@dataclasses.dataclass(slots=True)
class Tally:
    """A bucket's count and checksum at one tier."""

    count: int = 0
    checksum: int = 0

    def add(self, other: Tally) -> None:
        self.count += other.count
        self.checksum = (self.checksum + other.checksum) & MASK

    def plus(self, other: Tally) -> Tally:
        return Tally(self.count + other.count, (self.checksum + other.checksum) & MASK)


def tally_values(buckets: dict[Bucket, Tally], bucket: Bucket, values: Iterable[bytes]) -> None:
    """Add `values` (records of one bucket) to `buckets`."""
    values = list(values)
    t = buckets.get(bucket)
    if t is None:
        t = buckets[bucket] = Tally()
    t.add(Tally(len(values), checksum(values)))


@dataclasses.dataclass
class AuditRecord:
    """One record of the audit topic: a writer's running total of one bucket."""

    tier: str
    bucket: Bucket
    writer: str
    tally: Tally
    extra: dict[str, int] = dataclasses.field(default_factory=dict)  # tier-specific counts

    def key(self) -> bytes:
        b = self.bucket
        return f"{self.tier}/{b.host}/{b.topic}/{minute_text(b.minute)}/{self.writer}".encode()

    def value(self, now_ms: int | None = None) -> bytes:
        b = self.bucket
        doc = {
            "tier": self.tier,
            "host": b.host,
            "topic": b.topic,
            "minute": b.minute,
            "writer": self.writer,
            "count": self.tally.count,
            "checksum": f"{self.tally.checksum:016x}",
            "updated": now_ms if now_ms is not None else int(time.time() * 1000),
            **self.extra,
        }
        return orjson.dumps(doc)

    @classmethod
    def parse(cls, key: bytes | None, value: bytes | None) -> AuditRecord | None:
        """The record of a message of the audit topic; None for a tombstone or a value
        that is not one (the topic is shared: a stray record is skipped, not fatal)."""
        if key is None or value is None:
            return None
        try:
            doc = orjson.loads(value)
            bucket = Bucket(str(doc["host"]), str(doc["topic"]), int(doc["minute"]))
            tally = Tally(int(doc["count"]), int(doc["checksum"], 16))
            tier, writer = str(doc["tier"]), str(doc["writer"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        known = {"tier", "host", "topic", "minute", "writer", "count", "checksum", "updated"}
        extra = {k: v for k, v in doc.items() if k not in known and isinstance(v, int)}
        return cls(tier, bucket, writer, tally, extra)


@dataclasses.dataclass
class Progress:
    """A Spark job's mark: it has read every record its topic held at `as_of` (epoch
    ms). Published once per run by the offline job, with every batch by the realtime
    job; a tier is held to the agents' counts only for minutes its marks cover."""

    tier: str
    topic: str
    writer: str
    as_of: int

    def key(self) -> bytes:
        return f"{self.tier}/progress/{self.topic}/{self.writer}".encode()

    def value(self) -> bytes:
        doc = {"kind": "progress", "tier": self.tier, "topic": self.topic}
        return orjson.dumps({**doc, "writer": self.writer, "as_of": self.as_of})

    @classmethod
    def parse(cls, value: bytes | None) -> Progress | None:
        try:
            doc = orjson.loads(value or b"")
            if doc.get("kind") != "progress":
                return None
            return cls(str(doc["tier"]), str(doc["topic"]), str(doc["writer"]), int(doc["as_of"]))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            return None


def published(
    messages: Iterable[tuple[bytes | None, bytes | None]],
) -> tuple[list[AuditRecord], list[Progress]]:
    """The audit records and progress marks of the audit topic's messages in offset
    order, the last per key (what compaction keeps); other messages are skipped."""
    last: dict[bytes, bytes | None] = {}
    for key, value in messages:
        if key is not None:
            last[key] = value
    records, marks = [], []
    for key, value in last.items():
        rec = AuditRecord.parse(key, value)
        if rec is not None:
            records.append(rec)
        elif (mark := Progress.parse(value)) is not None:
            marks.append(mark)
    return records, marks


@dataclasses.dataclass
class Verdict:
    bucket: Bucket
    tiers: dict[str, Tally]
    # complete, missing, duplicated, checksum differs, still open, no agent count,
    # unchecked (no tier to compare with)
    status: str
    difference: int = 0  # downstream count minus the agent's, for missing and duplicated
    where: str = ""  # the tier the status is about
    # tier -> its own counts beside the tally (the Spark tiers': parsed, rejected)
    extra: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

    @property
    def problem(self) -> bool:
        return self.status in ("missing", "duplicated", "checksum differs")

    def text(self) -> str:
        if self.status in ("missing", "duplicated"):
            return f"{self.status} {abs(self.difference)} ({self.where})"
        if self.status == "checksum differs":
            return f"checksum differs ({self.where})"
        return self.status

    def to_json(self) -> dict:
        return {
            "host": self.bucket.host,
            "topic": self.bucket.topic,
            "minute": minute_text(self.bucket.minute),
            "minute_ms": self.bucket.minute,
            "tiers": {
                t: {"count": v.count, "checksum": f"{v.checksum:016x}", **self.extra.get(t, {})}
                for t, v in self.tiers.items()
            },
            "status": self.status,
            "difference": self.difference,
            "where": self.where,
        }


def compared_tiers(records: Iterable[AuditRecord], recounted: bool = False) -> set[str]:
    """The tiers held to the agents' counts: those among `records` after the agent,
    and the broker when the topics were recounted (even if it found nothing)."""
    tiers = {r.tier for r in records if r.tier in DOWNSTREAM}
    return tiers | {BROKER} if recounted else tiers


def totals(records: Iterable[AuditRecord]) -> dict[Bucket, dict[str, Tally]]:
    """Per bucket, each tier's total over its writers."""
    out: dict[Bucket, dict[str, Tally]] = {}
    for rec in records:
        tiers = out.setdefault(rec.bucket, {})
        t = tiers.get(rec.tier)
        tiers[rec.tier] = rec.tally if t is None else t.plus(rec.tally)
    return out


def extra_totals(records: Iterable[AuditRecord]) -> dict[Bucket, dict[str, dict[str, int]]]:
    """Per bucket and tier, its own counts (`AuditRecord.extra`) summed over writers."""
    out: dict[Bucket, dict[str, dict[str, int]]] = {}
    for rec in records:
        if rec.extra:
            sums = out.setdefault(rec.bucket, {}).setdefault(rec.tier, {})
            for name, n in rec.extra.items():
                sums[name] = sums.get(name, 0) + n
    return out


Coverage = dict[tuple[str, str], tuple[int, int]]  # (tier, topic) -> (first minute, as_of)


def coverage(records: Iterable[AuditRecord], marks: Iterable[Progress]) -> Coverage:
    """Per Spark tier and topic: the first minute it counted (for the realtime job
    the next one: it starts reading at the topic's end, part way through a minute)
    and how far its progress marks say it has read. A tier without marks covers
    nothing."""
    firsts: dict[tuple[str, str], int] = {}
    for rec in records:
        if rec.tier in (SPARK_OFFLINE, SPARK_REALTIME):
            key = (rec.tier, rec.bucket.topic)
            firsts[key] = min(firsts.get(key, rec.bucket.minute), rec.bucket.minute)
    read: dict[tuple[str, str], int] = {}
    for mark in marks:
        key = (mark.tier, mark.topic)
        read[key] = max(read.get(key, mark.as_of), mark.as_of)
    return {
        key: (first + (MINUTE_MS if key[0] == SPARK_REALTIME else 0), read[key])
        for key, first in firsts.items()
        if key in read
    }


def reconcile(
    tiers_by_bucket: dict[Bucket, dict[str, Tally]],
    compared: Iterable[str],
    now_ms: int,
    grace_s: float = GRACE_S,
    covered: Coverage | None = None,
) -> list[Verdict]:
    """A verdict per bucket, in (minute, host, topic) order. Each tier of `compared`
    is held to the agent's count and checksum, the Spark tiers only in the minutes
    they `covered` (`coverage`: from their first minute to those that had closed,
    their end plus `grace_s`, when the tier last read the topic to its end); a
    compared tier without the bucket counted nothing of it. A bucket whose minute
    ended less than `grace_s` ago is "still open" whatever the counts say."""
    compared = [t for t in DOWNSTREAM if t in set(compared)]
    out = []
    for bucket in sorted(tiers_by_bucket, key=lambda b: (b.minute, b.host, b.topic)):
        tiers = tiers_by_bucket[bucket]
        held = [t for t in compared if _covers(covered or {}, t, bucket, grace_s)]
        out.append(_verdict(bucket, tiers, held, now_ms, grace_s))
    return out


def _covers(covered: Coverage, tier: str, bucket: Bucket, grace_s: float) -> bool:
    if tier not in (SPARK_OFFLINE, SPARK_REALTIME):
        return True
    span = covered.get((tier, bucket.topic))
    if span is None:
        return False
    first, as_of = span
    return first <= bucket.minute and bucket.minute + MINUTE_MS + grace_s * 1000 <= as_of


def _verdict(
    bucket: Bucket, tiers: dict[str, Tally], compared: list[str], now_ms: int, grace_s: float
) -> Verdict:
    if now_ms < bucket.minute + MINUTE_MS + grace_s * 1000:
        return Verdict(bucket, tiers, "still open")
    ref = tiers.get(AGENT)
    if ref is None:
        return Verdict(bucket, tiers, "no agent count")
    checksum_tier = ""
    for tier in compared:
        got = tiers.get(tier, Tally())
        diff = got.count - ref.count
        if diff < 0:
            return Verdict(bucket, tiers, "missing", diff, tier)
        if diff > 0:
            return Verdict(bucket, tiers, "duplicated", diff, tier)
        if got.checksum != ref.checksum and not checksum_tier:
            checksum_tier = tier
    if checksum_tier:
        return Verdict(bucket, tiers, "checksum differs", 0, checksum_tier)
    return Verdict(bucket, tiers, "complete" if compared else "unchecked")
