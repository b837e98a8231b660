"""The scrape-time metrics of the groups coordinated here (see broker.metrics).

Groups by state (classic and consumer-protocol groups alike), rebalances completed, and for each partition a group committed its
`committed offset`, and its `lag` (high watermark minus committed offset) where this
broker hosts a replica of the partition (`high_watermark` returns None elsewhere);
in a cluster where every broker holds every partition (the usual replication factor
3 on 3 brokers) that is all of them.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.groups.coordinator import GroupCoordinator
from broker.metrics import PREFIX


def group_metrics(
    coordinator: GroupCoordinator, high_watermark: Callable[[str, int], int | None]
) -> Iterator[Metric]:
    by_state = collections.Counter(state for _, _, state, _ in coordinator.list_groups())
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
    for group_id, group in sorted(coordinator.groups.items()):
        for (topic, index), value in sorted(group.offsets.items()):
            key = [group_id, topic, str(index)]
            committed.add_metric(key, value.offset)
            hw = high_watermark(topic, index)
            if hw is not None:
                lag.add_metric(key, max(0, hw - value.offset))
    yield from (committed, lag)
