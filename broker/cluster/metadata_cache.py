"""MetadataCache: the cluster as this broker last read it from ZooKeeper.

Live brokers and their endpoints, every topic's assignment and config, every
partition's state {leader, leader epoch, ISR} and the controller's id: what Metadata,
FindCoordinator and the replica fetchers need (Kafka's MetadataCache, filled here by
the cluster node's ZooKeeper watches instead of UpdateMetadata requests).

Partition states arrive from watches, re-reads and this broker's own writes, in any
order: `record_state` keeps the newest (higher leader epoch, then higher znode
version) and tells whether the one given is it. A leader counts only while it is a
live broker, and none does while this broker is fenced (it may not trust what it
last read). Owned by the cluster node; event-loop only.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.cluster.metadata_store import TopicMeta
from broker.cluster.view import PartitionView
from broker.cluster.zk import BrokerInfo, Moving, PartitionState

TopicPartition = tuple[str, int]


class MetadataCache:
    def __init__(self, fenced: Callable[[], bool] = lambda: False):
        self.fenced = fenced
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMeta] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        self.moving: dict[str, dict[int, Moving]] = {}  # partitions being reassigned
        self.controller_id = -1

    def record_state(self, key: TopicPartition, state: PartitionState) -> bool:
        """Keep `state` unless a newer one is known; whether it was kept."""
        known = self.states.get(key)
        if known is not None and (known.leader_epoch, known.version) > (
            state.leader_epoch,
            state.version,
        ):
            return False
        self.states[key] = state
        return True

    def record_moving(self, topic: str, moves: dict[int, Moving]) -> None:
        """The topic znode's partitions being reassigned."""
        self.moving[topic] = moves

    def removing(self, topic: str, index: int) -> tuple[int, ...]:
        """The replicas a reassignment is removing from the partition."""
        moving = self.moving.get(topic, {}).get(index)
        return moving.removing if moving else ()

    def forget_topic(self, name: str, partitions: int) -> None:
        self.moving.pop(name, None)
        for index in range(partitions):
            self.states.pop((name, index), None)

    def leader_of(self, topic: str, index: int) -> int:
        """The partition's leader if it is live and this broker is not fenced, else -1."""
        state = self.states.get((topic, index))
        if state is None or state.leader not in self.brokers or self.fenced():
            return -1
        return state.leader

    def partition_view(self, topic: str, index: int) -> PartitionView:
        state = self.states.get((topic, index))
        replicas = list(self.topics[topic].assignments[index])
        return PartitionView(
            self.leader_of(topic, index),
            state.leader_epoch if state is not None else -1,
            replicas,
            list(state.isr) if state is not None else [],
            [r for r in replicas if r not in self.brokers],
        )

    def serves(self, meta: TopicMeta) -> bool:
        """Whether the topic is known as `meta` has it and every partition has a leader."""
        known = self.topics.get(meta.name)
        return (
            known is not None
            and known.partitions == meta.partitions
            and all(self.leader_of(meta.name, i) >= 0 for i in range(meta.partitions))
        )

    def offline_partitions(self) -> int:
        """Partitions whose leader is not a live broker (-1 included)."""
        live = set(self.brokers)
        return sum(1 for s in self.states.values() if s.leader not in live)
