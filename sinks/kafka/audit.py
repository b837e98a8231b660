"""The kafka sink's tier of the audit (`agent`, common/audit.py): per (host, topic,
minute of the record timestamp), how many records the sink delivered and their
checksum, published to the audit topic as running totals.

- exactly once: the audit records of the buckets a transaction changes go in that
  transaction, so the totals and the data are committed together or not at all;
- at least once: after a take batch is acknowledged, the totals of the buckets it
  changed are produced and waited for (one publication at a time, so the last
  record of a key is always its latest total); a publication that fails leaves its
  buckets to the next one.

The writer of a bucket's key is `<agent>.<sink>.<run id>` (a new run id at every
start: a restarted sink adds to the totals of the one before, it does not replace
them). Totals are kept for `KEEP_S` after their minute; a record later still opens
the bucket again under a new writer.

Records the sink sends to the dead-letter topic are not delivered, so not counted.

A drill (`audit_drill`, `Drill`) makes the sink lose or duplicate records on purpose
while it counts them as delivered once: how an operator checks that the audit, and
the alert on it, catch what they are there for.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Collection, Sequence

from agent.source_audit import SourceTally
from common.audit import (
    AGENT,
    AGENT_SOURCE,
    KEEP_S,
    MINUTE_MS,
    AuditRecord,
    Bucket,
    Tally,
    checksum,
    host_of,
    minute_of,
)
from sinks.kafka.records import Records


class Drill:
    """What the sink produces instead of what it counts: of the first records it
    delivers, `drop` are never produced (the last of a batch, never all of one)
    and `duplicate` are produced twice (the first of a batch), until both are spent.
    Per run of the sink: a restarted agent drills again."""

    def __init__(self, drop: int, duplicate: int):
        self.drop, self.duplicate = drop, duplicate

    def apply(self, out: Records) -> Records:
        """The records to produce for `out` (`out` itself once the drill is spent)."""
        n = len(out.values)
        if not (self.drop or self.duplicate) or not n:
            return out
        dropped = min(self.drop, n - 1)
        kept = n - dropped
        doubled = min(self.duplicate, kept)
        self.drop -= dropped
        self.duplicate -= doubled
        order = [i for i in range(kept) for _ in range(2 if i < doubled else 1)]

        def pick(seq):
            return [seq[i] for i in order]

        return Records(
            out.topic if isinstance(out.topic, str) else pick(out.topic),
            pick(out.values),
            None if out.keys is None else pick(out.keys),
            None if out.headers is None else pick(out.headers),
            out.timestamps if isinstance(out.timestamps, int) else pick(out.timestamps),
            out.dead,
        )


class SinkAudit:
    """Running totals of one sink's deliveries; event loop only. `produced(out)`:
    what to produce of `out` (`out` itself but in a drill). `sources`: the source
    tallies it publishes too (agent/source_audit.py), under `records_topic` (the
    sink's topic; none when a template names it per record: then not published),
    with writers `<agent>.<source>.<run>`."""

    def __init__(
        self,
        topic: str,
        writer: str,
        drill: Drill | None = None,
        sources: Sequence[SourceTally] = (),
        records_topic: str | None = None,
        agent: str = "",
    ):
        self.topic = topic
        self.drill = drill
        self.agent = agent
        self.sources = list(sources) if records_topic is not None else []
        self.records_topic = records_topic
        self._writer_base = f"{writer}.{uuid.uuid4().hex[:12]}"
        self._generation = 0
        self.totals: dict[Bucket, tuple[str, Tally]] = {}  # bucket -> (writer, total)
        self.dirty: set[Bucket] = set()  # changed since they were last published
        self._next_evict = time.monotonic() + 60

    def produced(self, out: Records) -> Records:
        return out if self.drill is None else self.drill.apply(out)

    @property
    def writer(self) -> str:
        return f"{self._writer_base}.{self._generation}"

    def delivered(self, out: Records, skip: Collection[int] = ()) -> dict[Bucket, Tally]:
        """The tallies of `out`'s records, but those at the indexes `skip`."""
        values, topic, headers, stamps = out.values, out.topic, out.headers, out.timestamps
        n = len(values)
        if not n:
            return {}
        one_run = headers is None or headers.count(headers[0]) == n
        if not skip and isinstance(topic, str) and one_run:
            # the common batch: one topic, one source's run of lines (one host); no
            # Python work per record but the hash unless it spans minutes
            host = host_of(headers[0] if headers is not None else None)
            if isinstance(stamps, int):
                return {Bucket(host, topic, minute_of(stamps)): Tally(n, checksum(values))}
            first = minute_of(min(stamps))
            if first == minute_of(max(stamps)):
                return {Bucket(host, topic, first): Tally(n, checksum(values))}
            by_minute: dict[int, list[bytes]] = {}
            for ts, value in zip(stamps, values, strict=True):
                minute = ts - ts % MINUTE_MS
                group = by_minute.get(minute)
                if group is None:
                    group = by_minute[minute] = []
                group.append(value)
            return {
                Bucket(host, topic, m): Tally(len(v), checksum(v)) for m, v in by_minute.items()
            }
        groups: dict[Bucket, list[bytes]] = {}
        hosts: dict[int, str] = {}
        for i in range(n):
            if i in skip:
                continue
            h = headers[i] if headers is not None else None
            if id(h) not in hosts:
                hosts[id(h)] = host_of(h)
            host = hosts[id(h)]
            t = topic if isinstance(topic, str) else topic[i]
            ts = stamps if isinstance(stamps, int) else stamps[i]
            groups.setdefault(Bucket(host, t, minute_of(ts)), []).append(values[i])
        return {b: Tally(len(v), checksum(v)) for b, v in groups.items()}

    def records(self, delta: dict[Bucket, Tally], buckets: Collection[Bucket] = ()):
        """(key, value) audit records of the totals that applying `delta` makes, for
        its buckets and `buckets`."""
        now_ms = int(time.time() * 1000)
        out = []
        for bucket in {*delta, *buckets}:
            writer, total = self.totals.get(bucket) or (self.writer, Tally())
            change = delta.get(bucket)
            rec = AuditRecord(AGENT, bucket, writer, total.plus(change) if change else total)
            out.append((rec.key(), rec.value(now_ms)))
        return out

    def take_sources(self) -> list[tuple[SourceTally, dict]]:
        """The source totals changed since the last take, per tally."""
        return [(t, taken) for t in self.sources if (taken := t.take_dirty())]

    def source_records(self, taken: list[tuple[SourceTally, dict]]) -> list[tuple[bytes, bytes]]:
        """(key, value) audit records of taken source totals."""
        assert self.records_topic is not None or not taken
        now_ms = int(time.time() * 1000)
        out = []
        for tally, totals in taken:
            writer = f"{self.agent}.{tally.source}.{tally.writer_run}"
            for (host, minute), c in totals.items():
                bucket = Bucket(host, str(self.records_topic), minute)
                extra = {"filtered": c.filtered, "unparsable": c.unparsable}
                rec = AuditRecord(AGENT_SOURCE, bucket, writer, Tally(c.read, 0), extra)
                out.append((rec.key(), rec.value(now_ms)))
        return out

    @staticmethod
    def restore_sources(taken: list[tuple[SourceTally, dict]]) -> None:
        """Taken source totals whose publication failed: taken again next time."""
        for tally, totals in taken:
            tally.restore(totals)

    def apply(self, delta: dict[Bucket, Tally]) -> None:
        """Add `delta` (now delivered) to the totals."""
        for bucket, change in delta.items():
            known = self.totals.get(bucket)
            if known is None:
                self.totals[bucket] = (self.writer, change)
            else:
                known[1].add(change)
            self.dirty.add(bucket)
        self._evict()

    def _evict(self) -> None:
        """Drop totals older than KEEP_S (looked at once a minute)."""
        if time.monotonic() < self._next_evict:
            return
        self._next_evict = time.monotonic() + 60
        horizon = int((time.time() - KEEP_S) * 1000)
        if self.totals and min(b.minute for b in self.totals) < horizon:
            for bucket in [b for b in self.totals if b.minute < horizon]:
                del self.totals[bucket]
                self.dirty.discard(bucket)
            self._generation += 1


def dead_indexes(out: Records, dead: list[tuple[str, bytes]]) -> set[int]:
    """The indexes of `out`'s records that `dead` (topic, value) pairs name, each
    pair naming one record."""
    wanted = Counter(dead)
    found = set()
    for i, value in enumerate(out.values):
        topic = out.topic if isinstance(out.topic, str) else out.topic[i]
        if wanted[(topic, value)] > 0:
            wanted[(topic, value)] -= 1
            found.add(i)
    return found
