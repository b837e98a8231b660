"""Broker metrics: Kafka's operational set (what its JMX exporters show), named the
Prometheus way.

Two kinds, kept apart for speed:

- Events (bytes and messages in and out per topic, requests, errors and latency per
  API, ISR shrinks and expands, connections, invalid requests, log flushes) are plain
  numbers kept here and bumped where they happen. Everything runs on the broker's
  event loop, so the hot path takes no lock and allocates nothing.
- State (partition and leader counts, under-replicated, under-min-ISR and offline
  partitions, the active controller, per-partition log size, segments and offsets,
  the data directory's free space, purgatory sizes, groups, committed offsets and lag)
  is read when Prometheus scrapes, as Kafka computes its gauges when JMX reads them.
  Each component that owns such state exposes it as a collector (a function yielding
  metric families: `purgatory.purgatory_metrics`, `broker.cluster.replica_metrics`,
  the cluster view's `collect_metrics`, `broker.groups.metrics`), and the
  composition root (`BrokerCore`) adds them with `add_collector`; this module reads
  nobody's internals.

`BrokerMetrics` is a prometheus_client collector registered in the broker's own
registry (common.prometheus.new_registry), which adds process_* and
logflume_build_info; the exposition is prometheus_client's. Scrapes are served on the
event loop too (broker.server.server starts the MetricsServer on `metrics.listen`),
so the collectors read a consistent state.
"""

from __future__ import annotations

import bisect
import collections
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.registry import SCHEMAS
from broker.protocol.schema import Struct
from common.prometheus import new_registry

# Seconds. A long-poll fetch waits up to fetch.max.wait.ms (500 ms by default).
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
PREFIX = "logflume_broker_"


class Histogram:
    """Cumulative-bucket histogram without locks (event-loop only)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, int]]:
        running, out = 0, []
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


class TopicStats:
    """Counters of one topic (Kafka's BrokerTopicStats)."""

    __slots__ = (
        "messages_in",
        "messages_out",
        "bytes_in",
        "bytes_out",
        "replication_bytes_in",
        "replication_bytes_out",
    )

    def __init__(self) -> None:
        self.messages_in = self.messages_out = self.bytes_in = self.bytes_out = 0
        self.replication_bytes_in = self.replication_bytes_out = 0


class RequestStats:
    """Requests of one API key: count, by version, latency, and response error codes."""

    __slots__ = ("count", "versions", "latency", "errors")

    def __init__(self) -> None:
        self.count = 0
        self.versions: collections.Counter[int] = collections.Counter()
        self.latency = Histogram(LATENCY_BUCKETS)
        self.errors: collections.Counter[int] = collections.Counter()


def _api_label(api_key: int) -> str:
    """Kafka's request name, as its RequestMetrics label it: PRODUCE -> Produce."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(word.capitalize() for word in name.split("_"))


def _error_label(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _error_counter(fields: list) -> Callable[[dict, collections.Counter], None] | None:
    """A function counting the non-zero `error_code`s of a response body that
    `fields` (an API's response schema) describe, or None if there can be none.
    Kafka's ErrorsPerSec counts each one (each partition's error of a produce or
    fetch). Only the arrays and structs that lead to an error code are visited, so a
    produce answer costs a lookup per partition."""
    direct = any(f.name == "error_code" for f in fields)
    nested = []
    for f in fields:
        inner = f.type if isinstance(f.type, list) else None
        if isinstance(f.type, Struct):
            inner = list(f.type.fields)
        count = _error_counter(inner) if inner is not None else None
        if count is not None:
            nested.append((f.name, isinstance(f.type, list), count))
    if not direct and not nested:
        return None

    def count_errors(body: dict, errors: collections.Counter) -> None:
        if direct and (code := body.get("error_code")):
            errors[code] += 1
        for name, is_array, count in nested:
            value = body.get(name)
            if not value:
                continue
            if not is_array:
                count(value, errors)
            elif count.leaf:  # type: ignore[attr-defined]  # an array of structs with an error code and no deeper one
                for item in value:
                    if code := item.get("error_code"):
                        errors[code] += 1
            else:
                for item in value:
                    count(item, errors)

    # mypy does not model attributes set on a function (attr-defined)
    count_errors.leaf = direct and not nested  # type: ignore[attr-defined]
    return count_errors


ERROR_COUNTERS = {int(key): _error_counter(api.response) for key, api in SCHEMAS.items()}


class BrokerMetrics:
    """The broker's metrics; owned by the BrokerCore (`core.metrics`), event-loop only."""

    def __init__(self) -> None:
        self.topics: collections.defaultdict[str, TopicStats] = collections.defaultdict(TopicStats)
        self.requests: collections.defaultdict[int, RequestStats] = collections.defaultdict(
            RequestStats
        )
        self.invalid_requests = 0
        self.open_connections: set = set()  # the server's live connections (BrokerServer)
        self.connections_created = 0
        self.tls_handshake_failures = 0
        # (listener, mechanism, succeeded) -> SASL authentications
        self.authentications: collections.Counter[tuple[str, str, bool]] = collections.Counter()
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.flush_time = Histogram(FLUSH_BUCKETS)
        self._collectors: list[Callable[[], Iterable[Metric]]] = []
        self.registry = new_registry("broker")
        self.registry.register(self)

    # -- events (hot path) -------------------------------------------------------------

    def request_done(self, api_key: int, started: float, body: object, version: int) -> None:
        """A request of `version` has its answer ready (`body` None for acks=0 produce)."""
        stats = self.requests[api_key]
        stats.count += 1
        stats.versions[version] += 1
        stats.latency.observe(time.perf_counter() - started)
        if type(body) is dict and (count := ERROR_COUNTERS.get(api_key)) is not None:
            count(body, stats.errors)

    def isr_changed(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1

    # -- scrape ------------------------------------------------------------------------

    def add_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Scrape `collect()` too: a component's state, read at scrape time."""
        self._collectors.append(collect)

    def describe(self) -> list[Metric]:
        """Nothing up front: the series depend on the broker's state at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_counters()
        yield from self._request_metrics()
        yield from self._connection_metrics()
        yield from self._event_metrics()
        for collect in self._collectors:
            yield from collect()

    def _topic_counters(self) -> Iterator[Metric]:
        fields = (
            ("messages_in", "Records appended by producers"),
            ("messages_out", "Records sent to consumers, from each fetch offset on"),
            ("bytes_in", "Record batch bytes appended by producers"),
            ("bytes_out", "Record batch bytes sent to consumers"),
            ("replication_bytes_in", "Record batch bytes appended from leaders, as a follower"),
            ("replication_bytes_out", "Record batch bytes sent to followers"),
        )
        for field, doc in fields:
            family = CounterMetricFamily(PREFIX + field, doc, labels=["topic"])
            for topic, stats in sorted(self.topics.items()):
                family.add_metric([topic], getattr(stats, field))
            yield family

    def _request_metrics(self) -> Iterator[Metric]:
        count = CounterMetricFamily(PREFIX + "requests", "Requests answered", labels=["api"])
        by_version = CounterMetricFamily(
            PREFIX + "requests_by_version",
            "Requests answered, by API version (what clients negotiated)",
            labels=["api", "version"],
        )
        errors = CounterMetricFamily(
            PREFIX + "request_errors",
            "Error codes in responses (each partition's counts)",
            labels=["api", "error"],
        )
        latency = HistogramMetricFamily(
            PREFIX + "request_duration_seconds",
            "Time from a request's arrival to its answer being ready (long polls included)",
            labels=["api"],
        )
        for key, stats in sorted(self.requests.items()):
            api = _api_label(key)
            count.add_metric([api], stats.count)
            for version, n in sorted(stats.versions.items()):
                by_version.add_metric([api, str(version)], n)
            for code, n in sorted(stats.errors.items()):
                errors.add_metric([api, _error_label(code)], n)
            latency.add_metric([api], stats.latency.buckets(), stats.latency.sum)
        yield from (count, by_version, errors, latency)
        yield CounterMetricFamily(
            PREFIX + "invalid_requests",
            "Requests that closed their connection: undecodable, unsupported or oversized",
            value=self.invalid_requests,
        )

    def _connection_metrics(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            PREFIX + "connections", "Open client connections", len(self.open_connections)
        )
        yield CounterMetricFamily(
            PREFIX + "connections_created", "Client connections accepted", self.connections_created
        )
        yield CounterMetricFamily(
            PREFIX + "tls_handshake_failures",
            "Connections to an SSL listener closed because their TLS handshake failed",
            self.tls_handshake_failures,
        )
        labels = ["listener", "mechanism"]
        ok = CounterMetricFamily(
            PREFIX + "successful_authentication",
            "SASL authentications that succeeded",
            labels=labels,
        )
        failed = CounterMetricFamily(
            PREFIX + "failed_authentication",
            "SASL authentications that failed (wrong password, unknown user, bad token)",
            labels=labels,
        )
        for (listener, mechanism, succeeded), n in sorted(self.authentications.items()):
            (ok if succeeded else failed).add_metric([listener, mechanism], n)
        yield from (ok, failed)

    def _event_metrics(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            PREFIX + "isr_shrinks", "ISR shrinks of partitions led here", self.isr_shrinks
        )
        yield CounterMetricFamily(
            PREFIX + "isr_expands", "ISR expansions of partitions led here", self.isr_expands
        )
        yield HistogramMetricFamily(
            PREFIX + "log_flush_duration_seconds",
            "Time of each scheduled log flush (fsync)",
            buckets=self.flush_time.buckets(),
            sum_value=self.flush_time.sum,
        )


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    """One unlabelled gauge of the broker's set (`name` without the prefix)."""
    return GaugeMetricFamily(PREFIX + name, doc, value)
