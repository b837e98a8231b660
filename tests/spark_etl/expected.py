"""Independent pure-Python computation of the offline job's figures (ground truth).

Works from `loggen.Access` objects (the values each generated line encodes), not
from parsing, so it shares nothing with the Spark code under test.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import UTC

from spark_etl import loggen


def key_of(a: loggen.Access, with_host: bool) -> tuple:
    t = a.time.astimezone(UTC)
    return (t.strftime("%Y-%m-%d"), t.hour, a.host if with_host else None)


def hourly(sent: list[tuple[loggen.Access | loggen.Garbage, bool]]) -> dict:
    """{(date, hour, host): figures} for (item, sent_as_json) pairs; garbage skipped.
    Host is known only for records sent as JSON (raw lines carry none)."""
    return _figures_by(sent, key_of)


def by_minute(sent: list[tuple[loggen.Access | loggen.Garbage, bool]]) -> dict:
    """{(minute start in epoch seconds, host): figures}, as `hourly`."""

    def minute_of(a: loggen.Access, with_host: bool) -> tuple:
        return (int(a.time.timestamp()) // 60 * 60, a.host if with_host else None)

    return _figures_by(sent, minute_of)


def _figures_by(sent, key) -> dict:
    groups = defaultdict(list)
    for item, as_json in sent:
        if isinstance(item, loggen.Access):
            groups[key(item, as_json)].append(item)
    out = {}
    for k, items in groups.items():
        classes = Counter(a.status // 100 for a in items)
        out[k] = {
            "requests": len(items),
            **{f"status_{c}xx": classes.get(c, 0) for c in (2, 3, 4, 5)},
            "bytes": sum(a.bytes for a in items),
            "clients": len({a.client for a in items}),
            "rt": sorted(a.request_time for a in items),
        }
    return out


def top_paths(sent, n: int = 20) -> dict:
    counts = defaultdict(Counter)
    for item, as_json in sent:
        if isinstance(item, loggen.Access):
            counts[key_of(item, as_json)][item.path.split("?")[0]] += 1
    return {k: sorted(c.items(), key=lambda pc: (-pc[1], pc[0]))[:n] for k, c in counts.items()}


def assert_hourly_matches(rows, expected: dict) -> None:
    """Every figure exact (the offline job merges exact partials: `hour_parts`)."""
    got = {(str(r.date), r.hour, r.host): r.asDict() for r in rows}
    assert set(got) == set(expected)
    for k, e in expected.items():
        assert_figures(got[k], e, k)


def assert_figures(row: dict, e: dict, k) -> None:
    """One group's figures (a dict of requests, status_2xx..., rt_p99) against `e`:
    counts and unique clients exact, percentiles by nearest rank (the smallest
    request_time with at least p % of the group's timed requests at or below it)."""
    for f in ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes"):
        assert row[f] == e[f], (k, f)
    assert row["unique_clients"] == e["clients"], k
    rt, n = e["rt"], len(e["rt"])
    for p in (50, 95, 99):
        v = row[f"rt_p{p}"]
        assert v == rt[max(1, math.ceil(p * n / 100)) - 1], (k, p, v)


def assert_audit_equals_recount(
    bootstrap: str, topic: str, tier: str, progress_mark: bool = True
) -> int:
    """The audit totals of `topic` for `tier` (a job's spark-offline or
    spark-realtime, or the agent's, from the audit topic) equal a recount of the
    topic itself, bucket by bucket, count and checksum; returns how many records they
    cover. A job publishes a progress mark with its totals (`progress_mark`)."""
    from common.audit import totals
    from common.audit_kafka import read_audit, recount

    conf = {"bootstrap.servers": bootstrap}
    records, marks = read_audit(conf, "logflume-audit")
    published = {
        bucket: tiers[tier]
        for bucket, tiers in totals(records).items()
        if bucket.topic == topic and tier in tiers
    }
    recounted = {r.bucket: r.tally for r in recount(conf, [topic], 0, 1 << 62)}
    assert published == recounted
    if progress_mark:
        assert any(m.tier == tier and m.topic == topic for m in marks), "a progress mark"
    return sum(t.count for t in recounted.values())
