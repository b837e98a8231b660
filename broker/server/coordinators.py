"""Wiring of the two coordinators the broker hosts, for the composition root.

`broker.groups.GroupCoordinator` and `broker.transactions.TransactionCoordinator`
know nothing of partitions, purgatories or other brokers: they take small callables
(read a partition of their internal topic, wait until a write is replicated, find a
partition's leader, write a marker here or at another broker, reserve a producer id).
This module builds those callables from the broker's services; `BrokerCore` calls
it in its start-up order. Also here, because the core and request handlers share
them:

- loading the coordinator partitions this broker leads (`load_led_partitions`) and
  following leadership changes of `__consumer_offsets` and `__transaction_state`
  (`leadership_changed`, the replica manager's callback);
- `LocalMarkers`: transaction markers appended to partitions led here (the
  coordinator's own, and WriteTxnMarkers from coordinators elsewhere);
- the KIP-890 verifier a transactional produce awaits (`txn_verifier`).

Everything runs on the broker's event loop.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from broker.cluster.delayed_produce import wait_replicated
from broker.cluster.producer_ids import ProducerIdsUnavailable
from broker.cluster.replica_manager import ReplicaManager
from broker.cluster.view import ClusterView
from broker.config import BrokerConfig
from broker.features import FinalizedFeatures
from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.groups.group_config import GroupConfig
from broker.groups.storage import HostedPartition, PartitionOffsetsStore, StoreError
from broker.protocol import ErrorCode
from broker.protocol.errors import ApiError
from broker.server.purgatory import Purgatory
from broker.transactions.channel import BrokerChannels
from broker.transactions.config import TxnConfig
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.markers import MarkerWriter
from common.topic_names import CONSUMER_OFFSETS, TRANSACTION_STATE

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class TxnVerifier(Protocol):
    """KIP-890: `await verifier(transactional_id, producer_id, producer_epoch,
    [(topic, partition), ...]) -> {(topic, partition): ErrorCode}`; with `add`
    (transactions v2: Produce v12, TxnOffsetCommit v5) the coordinator adds the
    partitions to the transaction instead of checking they are in it."""

    def __call__(
        self,
        tid: str,
        pid: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        add: bool = False,
    ) -> Awaitable[dict[TopicPartition, ErrorCode]]: ...


def _now_ms() -> int:
    return int(time.time() * 1000)


def group_coordinator(
    config: BrokerConfig,
    replicas: ReplicaManager,
    purgatory: Purgatory,
    group_configs: Callable[[str], GroupConfig],
) -> GroupCoordinator:
    """The group coordinator over `__consumer_offsets`; commits wait for acks=all
    within `offsets.commit.timeout.ms`; `group_configs(group id)` the dynamic group
    configs its consumer groups follow."""
    timeout_s = config["offsets.commit.timeout.ms"] / 1000

    async def wait(partition: HostedPartition, end_offset: int) -> ErrorCode:
        return await wait_replicated(purgatory, partition, end_offset, timeout_s)

    def topics() -> dict[str, tuple[uuid.UUID, int]]:
        """The cluster's topics with a valid id, for the consumer protocol."""
        view = {}
        for name, meta in replicas.topics().items():
            try:
                view[name] = (uuid.UUID(hex=meta.topic_id), len(meta.assignments))
            except (TypeError, ValueError):
                continue
        return view

    store = PartitionOffsetsStore(lambda i: replicas.get_partition(CONSUMER_OFFSETS, i), wait)
    return GroupCoordinator(
        store, CoordinatorConfig.from_broker_config(config), topics, group_configs
    )


class LocalMarkers:
    """Appends transaction markers to partitions led here. Owned by the core."""

    def __init__(
        self, replicas: ReplicaManager, purgatory: Purgatory, groups: GroupCoordinator
    ) -> None:
        self.replicas = replicas
        self.purgatory = purgatory
        self.groups = groups

    async def write(
        self,
        tp: TopicPartition,
        pid: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        timeout_s: float,
    ) -> ErrorCode:
        """Append the marker to `tp` led here, wait for acks=all; for `__consumer_offsets`
        the group coordinator then completes the producer's pending offsets."""
        p = self.replicas.get_partition(*tp)
        if p is None:
            return self.replicas.missing_partition_error(*tp)
        try:
            info = p.append_txn_marker(pid, epoch, commit, coordinator_epoch)
        except ApiError as e:
            return ErrorCode(e.code)
        except OSError as e:
            log.error("%s-%d: marker write failed: %s", tp[0], tp[1], e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        err = await wait_replicated(self.purgatory, p, info.last_offset + 1, timeout_s)
        if err == ErrorCode.NONE and tp[0] == CONSUMER_OFFSETS:
            self.groups.complete_txn(tp[1], pid, commit)
        return err


def transaction_coordinator(
    config: BrokerConfig,
    cluster: ClusterView,
    replicas: ReplicaManager,
    markers: LocalMarkers,
    channels: Callable[[], BrokerChannels],
    features: FinalizedFeatures,
) -> TransactionCoordinator:
    """The transaction coordinator over `__transaction_state`: its writes and markers
    wait for acks=all within `transaction.marker.timeout` (TxnConfig); markers for
    partitions led elsewhere go out through `channels()`."""
    txn_config = TxnConfig.from_broker_config(config)
    timeout_s = txn_config.marker_timeout_ms / 1000

    async def wait(partition: HostedPartition, end_offset: int) -> ErrorCode:
        return await wait_replicated(markers.purgatory, partition, end_offset, timeout_s)

    async def next_producer_id() -> int:
        try:
            return await cluster.producer_ids.next_id()
        except ProducerIdsUnavailable:  # a retriable error for the client
            raise StoreError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None

    def leader_of(tp: TopicPartition) -> int | None:
        if replicas.topic(tp[0]) is None:
            return None
        return cluster.leader_of(*tp)

    async def write_remote(
        broker_id: int,
        pid: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        tps: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        return await channels().write_markers(broker_id, pid, epoch, commit, coordinator_epoch, tps)

    async def write_local(
        tp: TopicPartition, pid: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> ErrorCode:
        return await markers.write(tp, pid, epoch, commit, coordinator_epoch, timeout_s)

    store = PartitionOffsetsStore(lambda i: replicas.get_partition(TRANSACTION_STATE, i), wait)
    writer = MarkerWriter(cluster.broker_id, leader_of, write_local, write_remote)
    return TransactionCoordinator(
        store, writer, next_producer_id, txn_config, lambda: features.transaction_version
    )


def txn_verifier(
    coordinator: TransactionCoordinator,
    cluster: ClusterView,
    channels: Callable[[], BrokerChannels],
) -> TxnVerifier:
    """KIP-890's check of a transactional produce (or, `add`, transactions v2's
    implicit AddPartitionsToTxn): answered here when this broker coordinates the id,
    else by AddPartitionsToTxn v5 to the coordinator (NOT_COORDINATOR while this
    broker leads the id's partition but has not loaded it yet)."""

    async def verify(
        tid: str,
        pid: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        add: bool = False,
    ) -> dict[TopicPartition, ErrorCode]:
        tps = list(partitions)
        index = coordinator.partition_for(tid)
        if index in coordinator.owned:
            if add:
                err = await coordinator.add_partitions(
                    tid, pid, epoch, set(tps), _now_ms(), client_tv=2
                )
                return dict.fromkeys(tps, err)
            return coordinator.verify(tid, pid, epoch, tps, ErrorCode.TRANSACTION_ABORTABLE)
        leader = cluster.leader_of(TRANSACTION_STATE, index)
        if leader == cluster.broker_id:
            return dict.fromkeys(tps, ErrorCode.NOT_COORDINATOR)
        if leader < 0:
            return dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            answer = await channels().verify(leader, tid, pid, epoch, tps, verify_only=not add)
        except (OSError, EOFError, TimeoutError, LookupError, ValueError) as e:
            log.debug("verification at broker %d: %s", leader, e)
            return dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return {tp: answer.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in tps}

    return verify


def load_led_partitions(
    replicas: ReplicaManager, groups: GroupCoordinator, transactions: TransactionCoordinator
) -> None:
    """Load every coordinator partition led here and not loaded yet: at start-up, and
    when FindCoordinator created an internal topic."""
    load_offsets_partitions(replicas, groups)
    load_txn_partitions(replicas, transactions)


def load_offsets_partitions(replicas: ReplicaManager, groups: GroupCoordinator) -> None:
    meta = replicas.topic(CONSUMER_OFFSETS)
    if meta is None:
        return
    now = _now_ms()
    before = len(groups.owned)
    for index in range(meta.partitions):
        p = replicas.get_partition(CONSUMER_OFFSETS, index)
        if p is not None and p.is_leader and index not in groups.owned:
            groups.load_partition(index, now)
    if len(groups.owned) > before:
        log.info(
            "coordinating %d partition(s) of %s: %d group(s) loaded",
            len(groups.owned),
            CONSUMER_OFFSETS,
            len(groups.groups),
        )


def load_txn_partitions(replicas: ReplicaManager, transactions: TransactionCoordinator) -> None:
    meta = replicas.topic(TRANSACTION_STATE)
    if meta is None:
        return
    for index in range(meta.partitions):
        p = replicas.get_partition(TRANSACTION_STATE, index)
        if p is not None and p.is_leader and index not in transactions.owned:
            transactions.load_partition(index, p.leader_epoch)


def leadership_changed(
    replicas: ReplicaManager,
    groups: GroupCoordinator,
    transactions: TransactionCoordinator,
    topic: str,
    index: int,
    leader: bool,
) -> None:
    """Leading a coordinator partition makes this broker the coordinator of its
    groups or transactional ids (for transactions, in the partition's leader epoch);
    losing it unloads them. Called on every role change of a hosted partition."""
    if topic == TRANSACTION_STATE:
        transactions.unload_partition(index)
        if leader:
            part = replicas.get_partition(TRANSACTION_STATE, index)
            assert part is not None  # a role change names a hosted partition
            transactions.load_partition(index, part.leader_epoch)
    elif topic == CONSUMER_OFFSETS:
        if not leader:
            groups.unload_partition(index)
        elif index not in groups.owned:
            groups.load_partition(index, _now_ms())
