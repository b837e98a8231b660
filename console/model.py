"""The console's pure parts: no sockets, no clock of their own (callers pass `now`).

- `parse_urls`: the `--agents` / `--broker-metrics` lists, as base URLs.
- `StatsFold`: the per-minute nginx rows of the realtime job (topic nginx-stats),
  folded so that the latest row of each window and host wins (a provisional row is
  superseded by any later row of its window and host, the final one included), then
  summed over hosts per minute for the chart.
- `Rates`: per-second rates of growing values (summed high watermarks, agent
  counters) between two polls.
- `agent_summary` / `partition_sizes`: what the page shows of an agent's or a
  broker's /metrics text.
- `audit_grid`: the audit's verdicts (common/audit.py) as the page's grid, a row per
  host and topic, a column per minute.
- `text_of`, `record_json`, `parse_timestamp`: the message browser's record texts
  and its "from time" field.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

COUNTS = ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes")


def parse_urls(value: str | None) -> list[str]:
    """`"127.0.0.1:8286,http://h:9/metrics"` -> `["http://127.0.0.1:8286", "http://h:9"]`:
    comma-separated, scheme optional (http), a trailing /metrics or /health dropped."""
    urls = []
    for item in (value or "").split(","):
        url = item.strip().rstrip("/")
        if not url:
            continue
        if "://" not in url:
            url = "http://" + url
        for suffix in ("/metrics", "/health"):
            if url.endswith(suffix):
                url = url[: -len(suffix)]
        urls.append(url)
    return urls


def epoch_seconds(value: object) -> float | None:
    """An ISO 8601 timestamp (Spark's `2026-11-26T18:00:00.000Z`) as Unix seconds;
    None when it is not one. A timestamp without zone is taken as UTC."""
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        offset = stamp.astimezone().utcoffset()
        assert offset is not None  # astimezone() gives an aware time
        return stamp.timestamp() - offset.total_seconds()
    return stamp.timestamp()


class StatsFold:
    """Rows of topic nginx-stats, latest per (window, host), at most `keep_windows`
    windows (the newest). Owned by one reader; not thread-safe."""

    def __init__(self, keep_windows: int = 60):
        self.keep_windows = keep_windows
        self.rows: dict[tuple[float, str], dict] = {}

    def add(self, row: object) -> bool:
        """Take one decoded row (in topic order); False when it is not a stats row."""
        if not isinstance(row, dict):
            return False
        start = epoch_seconds(row.get("window_start"))
        if start is None:
            return False
        host = row.get("host")
        self.rows[(start, "" if host is None else str(host))] = row
        starts = sorted({s for s, _ in self.rows})
        if len(starts) > self.keep_windows:
            cut = starts[-self.keep_windows]
            self.rows = {k: v for k, v in self.rows.items() if k[0] >= cut}
        return True

    def per_minute(self) -> list[dict]:
        """One point per window, oldest first: `t` (window start, Unix seconds), the
        counts summed over hosts, `hosts`, and `final` (every host's row final)."""
        points: dict[float, dict] = {}
        for (start, _host), row in sorted(self.rows.items(), key=lambda kv: kv[0]):
            point = points.setdefault(
                start, {"t": start, **dict.fromkeys(COUNTS, 0), "hosts": 0, "final": True}
            )
            for name in COUNTS:
                value = row.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    point[name] += value
            point["hosts"] += 1
            point["final"] = point["final"] and row.get("final") is True
        return [points[t] for t in sorted(points)]


class Rates:
    """Per-second rates of growing values (counters, high watermarks) by key, from the
    last two polls. A key seen for the first time, or whose value went down (a
    restarted agent, a recreated topic), has no rate (None) this poll."""

    def __init__(self) -> None:
        self._last: dict[object, tuple[float, float]] = {}

    def update(self, now: float, values: dict) -> dict:
        rates = {}
        for key, value in values.items():
            before = self._last.get(key)
            rate = None
            if before is not None and now > before[0] and value >= before[1]:
                rate = (value - before[1]) / (now - before[0])
            rates[key] = rate
            self._last[key] = (now, value)
        return rates

    def forget_except(self, keys) -> None:
        """Drop the keys not in `keys` (deleted topics, agents no longer listed)."""
        keep = set(keys)
        self._last = {k: v for k, v in self._last.items() if k in keep}


def samples(text: str) -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every sample of a Prometheus text exposition."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.append((s.name, dict(s.labels), s.value))
    return out


def partition_sizes(texts: list[str]) -> dict[tuple[str, int], float]:
    """`logflume_broker_log_size_bytes{topic, partition}` of brokers' /metrics texts:
    the largest copy of each partition (the leader's, unless a follower is ahead)."""
    sizes: dict[tuple[str, int], float] = {}
    for text in texts:
        for name, labels, value in samples(text):
            if name != "logflume_broker_log_size_bytes":
                continue
            try:
                key = (labels["topic"], int(labels["partition"]))
            except (KeyError, ValueError):
                continue
            sizes[key] = max(sizes.get(key, 0.0), value)
    return sizes


SOURCE_IN = "logflume_agent_source_events_in_total"
SINK_OUT = "logflume_agent_sink_events_out_total"
CHANNEL_EVENTS = "logflume_agent_channel_events"
CHANNEL_CAPACITY = "logflume_agent_channel_capacity_events"
OLDEST = "logflume_agent_oldest_undelivered_event_age_seconds"


def agent_summary(url: str, metrics_text: str, health: dict, rates: Rates, now: float) -> dict:
    """What the page shows of one agent: its health, and one row per component
    (sources and sinks with their state and events/s, channels with their fill)."""
    by_name: dict[str, dict[str, float]] = {}
    for name, labels, value in samples(metrics_text):
        component = labels.get("component")
        if component is not None:
            by_name.setdefault(name, {})[component] = value
    counters = {(url, SOURCE_IN, c): v for c, v in by_name.get(SOURCE_IN, {}).items()}
    counters |= {(url, SINK_OUT, c): v for c, v in by_name.get(SINK_OUT, {}).items()}
    per_second = rates.update(now, counters)
    components = health.get("components")
    states = components if isinstance(components, dict) else {}
    rows: list[dict[str, object]] = []
    for full, state in sorted(states.items()):
        kind, _, name = str(full).partition(".")
        metric = SOURCE_IN if kind == "source" else SINK_OUT if kind == "sink" else None
        row: dict[str, object] = {"kind": kind, "name": name or kind, "state": str(state)}
        if metric is not None:
            row["events_total"] = by_name.get(metric, {}).get(name)
            row["rate"] = per_second.get((url, metric, name))
        if kind == "sink" and name in by_name.get(OLDEST, {}):
            row["oldest_age"] = by_name[OLDEST][name]
        rows.append(row)
    for name in sorted(by_name.get(CHANNEL_EVENTS, {})):
        events = by_name[CHANNEL_EVENTS][name]
        capacity = by_name.get(CHANNEL_CAPACITY, {}).get(name)
        fill = events / capacity if capacity else None
        rows.append(
            {
                "kind": "channel",
                "name": name,
                "state": "",
                "events": events,
                "capacity": capacity,
                "fill": fill,
            }
        )
    return {"url": url, "status": str(health.get("status", "unknown")), "components": rows}


def lag(high_watermark: int, committed: int) -> int | None:
    """A group's lag on a partition: None when it committed nothing there (Kafka's
    tools show "-"), never below 0."""
    if committed < 0:
        return None
    return max(0, high_watermark - committed)


def audit_grid(verdicts: list, minutes: int) -> dict:
    """The last `minutes` minutes of `verdicts` (common.audit.Verdict) as {"minutes":
    [epoch ms...], "rows": [{"host", "topic", "cells": [cell or None per minute]}],
    "summary": {status: n}}; a cell is {"status", "text", "tiers": {tier: {"count",
    "checksum"}}}."""
    if not verdicts:
        return {"minutes": [], "rows": [], "summary": {}}
    last = max(v.bucket.minute for v in verdicts)
    columns = [last - 60_000 * i for i in range(minutes - 1, -1, -1)]
    index = {m: i for i, m in enumerate(columns)}
    rows: dict[tuple[str, str], list] = {}
    summary: dict[str, int] = {}
    for v in verdicts:
        if v.bucket.minute not in index:
            continue
        cells = rows.setdefault((v.bucket.host, v.bucket.topic), [None] * len(columns))
        doc = v.to_json()
        cells[index[v.bucket.minute]] = {
            "status": v.status,
            "text": v.text(),
            "tiers": doc["tiers"],
        }
        summary[v.status] = summary.get(v.status, 0) + 1
    return {
        "minutes": columns,
        "rows": [
            {"host": host, "topic": topic, "cells": cells}
            for (host, topic), cells in sorted(rows.items())
        ],
        "summary": summary,
    }


MAX_PRETTY_CHARS = 20_000


def text_of(value: bytes | None, max_chars: int) -> str | None:
    """A record's key, value or header value as text: UTF-8 with replacement, cut to
    `max_chars` (an ellipsis marks the cut)."""
    if value is None:
        return None
    text = value.decode("utf-8", errors="replace")
    return text if len(text) <= max_chars else text[:max_chars] + "…"


def record_json(value: bytes | None) -> str | None:
    """A value that is a JSON object or array, pretty-printed (2 spaces, cut to
    MAX_PRETTY_CHARS); None for anything else (scalars gain nothing)."""
    if not value or value.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    text = json.dumps(parsed, indent=2, ensure_ascii=False)
    return text if len(text) <= MAX_PRETTY_CHARS else text[:MAX_PRETTY_CHARS] + "…"


def parse_timestamp(text: str) -> int:
    """The browser's "from time": milliseconds since the epoch, or an ISO 8601 time
    (`2026-11-29T07:00:00Z`; without a zone, UTC). Raises ValueError."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"time {text!r}: give milliseconds since the epoch or ISO 8601, "
            "e.g. 2026-11-29T07:00:00Z"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)
