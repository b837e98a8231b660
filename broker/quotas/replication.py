"""Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager: a byte rate per
side, `leader.replication.throttled.rate` (what this broker sends to followers) and
`follower.replication.throttled.rate` (what its replica fetchers copy), applied only
to the replicas a topic lists in `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` (`partition:broker,...` naming this
broker, or `*`: every replica of the topic). `logflume reassign --throttle` sets
both for the partitions it moves.

Per side, as Kafka does:
- the bytes of every throttled partition count toward the rate, in sync or not, so
  that the total of throttled replication stays under it (leader: the record bytes of
  the throttled partitions of each answer to a follower, broker/server/handlers/fetch.py;
  follower: the record bytes its fetcher appends, broker/cluster/replica_fetcher.py);
- while the measured rate is over the bound, a throttled partition whose replica is
  not in sync is held back: the leader answers it without records (the rest of the
  answer is unaffected), the follower leaves it out of its next fetch. In-sync
  replicas are never held back (no ISR thrashing): on the leader "in sync" is
  ISR membership, on the follower a lag of 0 at its last fetch that brought records.

The rate is Kafka's SimpleRate (broker.quotas.rate) over `replication.quota.window.num`
samples of `replication.quota.window.size.seconds`. The bounds follow the dynamic
broker configs (this broker's own, else the cluster-wide default; unset: unbounded)
through `reconfigure`; the replica lists are the topic configs as the partition's log
config has them, so a topic config change applies at once, in every mode.

Metrics (scrape time, `collect`), per side: `replication_throttled_bytes_total`,
`replication_throttled_byte_rate` (as measured at the scrape) and
`replication_throttled_rate_limit` (the bound, when set). Event-loop only.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.config import BrokerConfig
from broker.metrics import PREFIX
from broker.quotas.rate import SimpleRate

if TYPE_CHECKING:
    from broker.cluster.partition import Partition

LEADER = "leader"
FOLLOWER = "follower"
RATE_KEYS = {
    LEADER: "leader.replication.throttled.rate",
    FOLLOWER: "follower.replication.throttled.rate",
}
_LIST_ATTRS = {
    LEADER: "leader_replication_throttled_replicas",
    FOLLOWER: "follower_replication_throttled_replicas",
}


@functools.lru_cache(maxsize=4096)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """Kafka's parseThrottledPartitions: the partitions of a topic's throttled
    replica list (checked by broker.log.config) that name `broker_id`; None for `*`
    (all of them)."""
    if value == "*":
        return None
    found = set()
    for item in value.split(","):
        if item:
            partition, _, broker = item.partition(":")
            if int(broker) == broker_id:
                found.add(int(partition))
    return frozenset(found)


def is_throttled(value: str, broker_id: int, partition: int) -> bool:
    """Whether replica `partition` on `broker_id` is in the throttled list `value`."""
    if not value:
        return False
    partitions = throttled_partitions(value, broker_id)
    return partitions is None or partition in partitions


class ReplicationQuota:
    """One side's throttle (Kafka's ReplicationQuotaManager)."""

    def __init__(
        self,
        side: str,
        broker_id: int,
        samples: int,
        window_s: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.side = side
        self.broker_id = broker_id
        self._attr = _LIST_ATTRS[side]
        self._clock = clock
        self._samples = samples
        self._window_ms = window_s * 1000
        self.bound: int | None = None  # bytes/s; None: unbounded
        # made at the first bytes recorded, as Kafka makes its sensor: windows opened
        # before would stretch the first measurement
        self.rate: SimpleRate | None = None
        self.throttled_bytes = 0

    def is_throttled(self, partition: Partition) -> bool:
        return is_throttled(
            getattr(partition.log.config, self._attr), self.broker_id, partition.index
        )

    def is_quota_exceeded(self) -> bool:
        """The measured rate is over the bound (never without one)."""
        if self.bound is None:
            return False
        return self.measured() > self.bound

    def holds_back(self, partition: Partition, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: a replica out of sync,
        in the throttled list, while the rate is over the bound."""
        return not in_sync and self.is_throttled(partition) and self.is_quota_exceeded()

    def record(self, nbytes: int) -> None:
        """Bytes of throttled partitions replicated (recorded even over the bound)."""
        now = self._clock() * 1000
        if self.rate is None:
            self.rate = SimpleRate(self._samples, self._window_ms, now)
        self.rate.record(nbytes, now)
        self.throttled_bytes += nbytes

    def measured(self) -> float:
        """Bytes per second now."""
        return 0.0 if self.rate is None else self.rate.rate(self._clock() * 1000)


class ReplicationQuotas:
    """Both sides, built by the BrokerCore; a dynamic-config reconfigurable
    (broker.dynamic_config.Reconfigurable) for the two rates."""

    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = time.monotonic):
        self.config = config
        args = (
            config.broker_id,
            config["replication.quota.window.num"],
            config["replication.quota.window.size.seconds"],
            clock,
        )
        self.leader = ReplicationQuota(LEADER, *args)
        self.follower = ReplicationQuota(FOLLOWER, *args)

    def validate(self, new: BrokerConfig) -> None:
        """Nothing more to check: broker.dynamic_keys checked the rates (longs >= 0)."""

    def reconfigure(self) -> None:
        """Each side's bound: this broker's dynamic value, else the cluster-wide one."""
        for quota in (self.leader, self.follower):
            key = RATE_KEYS[quota.side]
            value = self.config.dynamic_broker.get(key, self.config.dynamic_default.get(key))
            quota.bound = None if value is None else int(value.strip())

    def reload(self, new: BrokerConfig) -> None:
        """No file to re-read."""

    def collect(self) -> Iterator[Metric]:
        throttled = CounterMetricFamily(
            PREFIX + "replication_throttled_bytes",
            "Record bytes of throttled replicas replicated, counted toward the replication "
            "throttle (leader: sent to followers; follower: copied from leaders)",
            labels=["side"],
        )
        rates = GaugeMetricFamily(
            PREFIX + "replication_throttled_byte_rate",
            "Bytes per second of throttled replication, as measured now",
            labels=["side"],
        )
        limits = GaugeMetricFamily(
            PREFIX + "replication_throttled_rate_limit",
            "leader.replication.throttled.rate and follower.replication.throttled.rate "
            "(bytes per second), when set",
            labels=["side"],
        )
        for quota in (self.leader, self.follower):
            throttled.add_metric([quota.side], quota.throttled_bytes)
            rates.add_metric([quota.side], quota.measured())
            if quota.bound is not None:
                limits.add_metric([quota.side], quota.bound)
        yield from (throttled, rates, limits)
