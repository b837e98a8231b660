"""The replication throttles' pure parts (broker.quotas.replication) with a fake
clock: which replicas a topic's lists throttle on a broker, when a replica is held
back, the rates following the dynamic configs; the topic configs' check
(broker.log.config); and what `logflume reassign --throttle` sets (Kafka's move map
and replica lists)."""

from types import SimpleNamespace

import pytest

from broker.config import BrokerConfig
from broker.log.config import LogConfig
from broker.quotas.rate import SimpleRate
from broker.quotas.replication import (
    ReplicationQuotas,
    is_throttled,
    throttled_partitions,
)
from logflume.commands.reassign import follower_throttles, leader_throttles, move_map


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _partition(index: int, **configs: str):
    return SimpleNamespace(index=index, log=SimpleNamespace(config=LogConfig.from_props(configs)))


def test_a_list_throttles_the_partitions_it_names_with_this_broker():
    assert throttled_partitions("0:1,1:2,2:1,10:1", 1) == {0, 2, 10}
    assert throttled_partitions("0:1,1:2", 3) == frozenset()
    assert throttled_partitions("*", 1) is None  # every replica of the topic
    assert is_throttled("*", 7, 5)
    assert is_throttled("0:1,2:1", 1, 2) and not is_throttled("0:1,2:1", 1, 1)
    assert not is_throttled("0:1,2:1", 2, 0)
    assert not is_throttled("", 1, 0)


def test_topic_configs_take_kafkas_lists_and_refuse_anything_else():
    cfg = LogConfig.from_props(
        {
            "leader.replication.throttled.replicas": " 0:1 , 1:2",
            "follower.replication.throttled.replicas": "*",
        }
    )
    assert cfg.leader_replication_throttled_replicas == "0:1,1:2"  # as Kafka shows it
    assert cfg.follower_replication_throttled_replicas == "*"
    assert LogConfig().leader_replication_throttled_replicas == ""
    for bad in ("0-1", "a:1", "*,0:1", "0:1:2"):
        with pytest.raises(ValueError) as e:
            LogConfig.from_props({"follower.replication.throttled.replicas": bad})
        assert str(e.value) == (
            f"Invalid value {bad} for configuration follower.replication.throttled.replicas: "
            "follower.replication.throttled.replicas must be the literal '*' or a list of "
            "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )


def test_a_simple_rate_is_measured_over_at_least_one_window():
    rate = SimpleRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(1000, 0)
    assert rate.rate(0) == 1000.0  # over one window, not over 0 s nor 10
    assert rate.rate(4000) == 250.0
    assert rate.rate(60_000) == 0.0  # everything older than 11 windows is forgotten


def _quotas(clock, per_broker=None, default=None) -> ReplicationQuotas:
    config = BrokerConfig({"broker.id": "1", "log.dirs": "/nonexistent"})
    quotas = ReplicationQuotas(config, clock)
    config.dynamic_broker = dict(per_broker or {})
    config.dynamic_default = dict(default or {})
    quotas.reconfigure()
    return quotas


def test_only_a_listed_replica_out_of_sync_is_held_back_and_only_over_the_rate():
    clock = Clock()
    quotas = _quotas(clock, {"leader.replication.throttled.rate": "1000"})
    leader = quotas.leader
    moving = _partition(0, **{"leader.replication.throttled.replicas": "0:1"})
    other = _partition(1, **{"leader.replication.throttled.replicas": "0:1"})
    assert leader.is_throttled(moving) and not leader.is_throttled(other)
    assert not leader.holds_back(moving, in_sync=False)  # nothing measured yet
    leader.record(5000)  # a burst: 5000 B over the first window
    assert leader.holds_back(moving, in_sync=False)
    assert not leader.holds_back(moving, in_sync=True)  # no ISR thrashing
    assert not leader.holds_back(other, in_sync=False)  # not in the list
    clock.now += 5.0  # 5000 B over 5 s: 1000 B/s, no longer over
    assert not leader.holds_back(moving, in_sync=False)
    assert leader.throttled_bytes == 5000
    # the follower side has no rate: it never holds anything back
    assert quotas.follower.bound is None
    quotas.follower.record(10**9)
    assert not quotas.follower.is_quota_exceeded()


def test_the_rates_follow_the_dynamic_configs_broker_first():
    clock = Clock()
    quotas = _quotas(
        clock,
        {"follower.replication.throttled.rate": "500"},
        {"follower.replication.throttled.rate": "9", "leader.replication.throttled.rate": "7"},
    )
    assert (quotas.leader.bound, quotas.follower.bound) == (7, 500)
    quotas.config.dynamic_broker = {}
    quotas.config.dynamic_default = {}
    quotas.reconfigure()
    assert (quotas.leader.bound, quotas.follower.bound) == (None, None)
    metrics = {m.name: m for m in quotas.collect()}
    assert metrics["logflume_broker_replication_throttled_rate_limit"].samples == []
    assert [
        s.labels["side"] for s in metrics["logflume_broker_replication_throttled_bytes"].samples
    ] == [
        "leader",
        "follower",
    ]


def test_zero_lets_nothing_more_through_once_anything_was_measured():
    clock = Clock()
    quotas = _quotas(clock, {"leader.replication.throttled.rate": "0"})
    moving = _partition(3, **{"leader.replication.throttled.replicas": "*"})
    assert not quotas.leader.holds_back(moving, in_sync=False)
    quotas.leader.record(1)
    assert quotas.leader.holds_back(moving, in_sync=False)


def test_reassign_throttles_the_sources_as_leaders_and_the_added_replicas_as_followers():
    current = {("t", 0): [0, 1], ("t", 1): [1, 2], ("u", 0): [2]}
    plan = {("t", 0): [1, 2], ("t", 1): [1, 2], ("u", 0): [0]}
    # a move of v-3 already in progress (from 2 to 0): its sources are the replicas
    # before it, and a new plan for it keeps them
    ongoing = {("v", 3): {"replicas": [0, 2], "adding_replicas": [0], "removing_replicas": [2]}}
    moves = move_map(ongoing, plan, current)
    assert moves == {
        "t": {0: ({0, 1}, {2}), 1: ({1, 2}, set())},
        "u": {0: ({2}, {0})},
        "v": {3: ({2}, {0})},
    }
    assert leader_throttles(moves) == {"t": "0:0,0:1,1:1,1:2", "u": "0:2", "v": "3:2"}
    assert follower_throttles(moves) == {"t": "0:2", "u": "0:0", "v": "3:0"}
    again = move_map(ongoing, {("v", 3): [1]}, {("v", 3): [0, 2]})
    assert again["v"] == {3: ({2}, {1})}
    # Kafka's order: the items sorted as text
    many = move_map({}, {("w", p): [9] for p in (2, 10)}, {("w", 2): [1], ("w", 10): [1]})
    assert leader_throttles(many) == {"w": "10:1,2:1"}
