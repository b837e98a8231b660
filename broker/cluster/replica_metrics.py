"""The scrape-time metrics of the partitions hosted here and of their logs.

Gauges read from the replica manager when Prometheus scrapes (see broker.metrics):
partitions hosted and led, under-replicated and under-min-ISR partitions led here,
each log's size, segments and offsets, and the data directory's free space.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from broker.cluster.replica_manager import ReplicaManager
from broker.metrics import PREFIX, gauge


def replica_metrics(replicas: ReplicaManager, data_dir: Path) -> Iterator[Metric]:
    yield from _partition_metrics(replicas)
    yield from _log_metrics(replicas, data_dir)


def _partition_metrics(replicas: ReplicaManager) -> Iterator[Metric]:
    partitions = list(replicas.partitions.values())
    leaders = [p for p in partitions if p.is_leader]
    yield gauge("partitions", "Partitions hosted here", len(partitions))
    yield gauge("leader_partitions", "Partitions led here", len(leaders))
    yield gauge(
        "under_replicated_partitions",
        "Partitions led here whose ISR is smaller than their replica set",
        sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
    )
    yield gauge(
        "under_min_isr_partitions",
        "Partitions led here whose ISR is below min.insync.replicas",
        sum(1 for p in leaders if len(p.isr) < p.min_insync_replicas),
    )


def _log_metrics(replicas: ReplicaManager, data_dir: Path) -> Iterator[Metric]:
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
    for (topic, index), p in sorted(replicas.partitions.items()):
        key = [topic, str(index)]
        size.add_metric(key, p.log.size_bytes)
        segments.add_metric(key, len(p.log.segments))
        end.add_metric(key, p.log.log_end_offset)
        start.add_metric(key, p.log.log_start_offset)
        hw.add_metric(key, p.high_watermark)
        lso.add_metric(key, p.last_stable_offset)
    yield from (size, segments, end, start, hw, lso)
    disk = os.statvfs(data_dir)
    yield gauge(
        "log_dir_available_bytes",
        "Bytes available to the broker on the data directory's file system",
        disk.f_bavail * disk.f_frsize,
    )
    yield gauge(
        "log_dir_capacity_bytes",
        "Size of the data directory's file system",
        disk.f_blocks * disk.f_frsize,
    )
