"""Broker metrics: Kafka's operational set (what its JMX exporters show), named the
Prometheus way.

Two kinds, kept apart for speed:

- Events (bytes and messages in and out per topic, requests, errors and latency per
  API, ISR shrinks and expands, connections, invalid requests, log flushes, group
  rebalances) are plain numbers bumped where they happen. Everything runs on the
  broker's event loop, so the hot path takes no lock and allocates nothing.
- State (partition and leader counts, under-replicated, under-min-ISR and offline
  partitions, the active controller, per-partition log size, segments and offsets,
  the data directory's free space, purgatory sizes, groups, committed offsets and lag) is read from the core when
  Prometheus scrapes, as Kafka computes its gauges when JMX reads them.

`BrokerMetrics` is a prometheus_client collector registered in the broker's own
registry (common.prometheus.new_registry), which adds process_* and
logflume_build_info; the exposition is prometheus_client's. Scrapes are served on the
event loop too (broker.server.server starts the MetricsServer on `metrics.listen`),
so `collect` reads a consistent core.

Lag: the group's coordinator exports `committed offset` for each partition a group
committed, and `lag` (high watermark minus committed offset) for the partitions it
hosts a replica of; in a cluster where every broker holds every partition (the usual
replication factor 3 on 3 brokers) that is all of them.
"""

from __future__ import annotations

import bisect
import collections
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from broker.server.core import BrokerCore

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
    """Requests of one API key: count, latency, and response error codes."""

    __slots__ = ("count", "latency", "errors")

    def __init__(self) -> None:
        self.count = 0
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
            elif count.leaf:  # an array of structs with an error code and no deeper one
                for item in value:
                    if code := item.get("error_code"):
                        errors[code] += 1
            else:
                for item in value:
                    count(item, errors)

    count_errors.leaf = direct and not nested
    return count_errors


ERROR_COUNTERS = {int(key): _error_counter(api.response) for key, api in SCHEMAS.items()}


class BrokerMetrics:
    """The broker's metrics; owned by the BrokerCore (`core.metrics`), event-loop only."""

    def __init__(self, core: BrokerCore):
        self.core = core
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
        self.registry = new_registry("broker")
        self.registry.register(self)

    # -- events (hot path) -------------------------------------------------------------

    def request_done(self, api_key: int, started: float, body: object) -> None:
        """A request's answer is ready (`body` None for acks=0 produce)."""
        stats = self.requests[api_key]
        stats.count += 1
        stats.latency.observe(time.perf_counter() - started)
        if type(body) is dict and (count := ERROR_COUNTERS.get(api_key)) is not None:
            count(body, stats.errors)

    def isr_changed(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1

    # -- scrape ------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        """Nothing up front: the series depend on the core's state at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_counters()
        yield from self._request_metrics()
        yield from self._connection_metrics()
        yield from self._partition_metrics()
        yield from self._log_metrics()
        yield from self._group_metrics()

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
            for code, n in sorted(stats.errors.items()):
                errors.add_metric([api, _error_label(code)], n)
            latency.add_metric([api], stats.latency.buckets(), stats.latency.sum)
        yield from (count, errors, latency)
        yield CounterMetricFamily(
            PREFIX + "invalid_requests",
            "Requests that closed their connection: undecodable, unsupported or oversized",
            value=self.invalid_requests,
        )
        purgatory = GaugeMetricFamily(
            PREFIX + "purgatory_size",
            "Requests waiting: acks=all produces and long-poll fetches",
            labels=["purgatory"],
        )
        for p in (self.core.produce_purgatory, self.core.fetch_purgatory):
            purgatory.add_metric([p.name], p.watched())
        yield purgatory

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

    def _partition_metrics(self) -> Iterator[Metric]:
        core = self.core
        partitions = list(core.replicas.partitions.values()) if core.replicas else []
        leaders = [p for p in partitions if p.is_leader]
        cluster = core.cluster
        controller = cluster is None or cluster.controller is not None
        offline = 0
        if cluster is not None and controller:
            live = set(cluster.brokers)
            offline = sum(1 for s in cluster.states.values() if s.leader not in live)
        gauges = (
            ("partitions", "Partitions hosted here", len(partitions)),
            ("leader_partitions", "Partitions led here", len(leaders)),
            (
                "under_replicated_partitions",
                "Partitions led here whose ISR is smaller than their replica set",
                sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
            ),
            (
                "under_min_isr_partitions",
                "Partitions led here whose ISR is below min.insync.replicas",
                sum(1 for p in leaders if len(p.isr) < p.min_insync_replicas),
            ),
            (
                "offline_partitions",
                "Partitions without a live leader (reported by the active controller)",
                offline,
            ),
            ("active_controller", "1 on the active controller", int(controller)),
        )
        for name, doc, value in gauges:
            yield GaugeMetricFamily(PREFIX + name, doc, value)
        yield CounterMetricFamily(
            PREFIX + "isr_shrinks", "ISR shrinks of partitions led here", self.isr_shrinks
        )
        yield CounterMetricFamily(
            PREFIX + "isr_expands", "ISR expansions of partitions led here", self.isr_expands
        )

    def _log_metrics(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(PREFIX + "log_size_bytes", "Bytes of the log", labels=labels)
        segments = GaugeMetricFamily(PREFIX + "log_segments", "Segments of the log", labels=labels)
        end = GaugeMetricFamily(PREFIX + "log_end_offset", "Log end offset", labels=labels)
        start = GaugeMetricFamily(PREFIX + "log_start_offset", "Log start offset", labels=labels)
        hw = GaugeMetricFamily(PREFIX + "high_watermark", "High watermark", labels=labels)
        lso = GaugeMetricFamily(
            PREFIX + "last_stable_offset",
            "Last stable offset: what read_committed consumers can read up to",
            labels=labels,
        )
        replicas = self.core.replicas
        for (topic, index), p in sorted(replicas.partitions.items() if replicas else ()):
            key = [topic, str(index)]
            size.add_metric(key, p.log.size_bytes)
            segments.add_metric(key, len(p.log.segments))
            end.add_metric(key, p.log.log_end_offset)
            start.add_metric(key, p.log.log_start_offset)
            hw.add_metric(key, p.high_watermark)
            lso.add_metric(key, p.last_stable_offset)
        yield from (size, segments, end, start, hw, lso)
        disk = os.statvfs(self.core.data_dir)
        yield GaugeMetricFamily(
            PREFIX + "log_dir_available_bytes",
            "Bytes available to the broker on the data directory's file system",
            disk.f_bavail * disk.f_frsize,
        )
        yield GaugeMetricFamily(
            PREFIX + "log_dir_capacity_bytes",
            "Size of the data directory's file system",
            disk.f_blocks * disk.f_frsize,
        )
        yield HistogramMetricFamily(
            PREFIX + "log_flush_duration_seconds",
            "Time of each scheduled log flush (fsync)",
            buckets=self.flush_time.buckets(),
            sum_value=self.flush_time.sum,
        )

    def _group_metrics(self) -> Iterator[Metric]:
        coordinator = self.core.extensions.get("groups")
        if coordinator is None:
            return
        by_state = collections.Counter(g.state.value for g in coordinator.groups.values())
        groups = GaugeMetricFamily(
            PREFIX + "groups", "Consumer groups coordinated here, by state", labels=["state"]
        )
        for state, n in sorted(by_state.items()):
            groups.add_metric([state], n)
        yield groups
        yield CounterMetricFamily(
            PREFIX + "group_rebalances",
            "Rebalances completed by groups coordinated here",
            coordinator.rebalances_completed,
        )
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily(
            PREFIX + "group_committed_offset", "Offset committed by a group", labels=labels
        )
        lag = GaugeMetricFamily(
            PREFIX + "group_lag",
            "High watermark minus the group's committed offset",
            labels=labels,
        )
        replicas = self.core.replicas
        for group_id, group in sorted(coordinator.groups.items()):
            for (topic, index), value in sorted(group.offsets.items()):
                key = [group_id, topic, str(index)]
                committed.add_metric(key, value.offset)
                partition = replicas.get_partition(topic, index)
                if partition is not None:
                    lag.add_metric(key, max(0, partition.high_watermark - value.offset))
        yield from (committed, lag)
