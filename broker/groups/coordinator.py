"""GroupCoordinator: Kafka's classic group protocol as a state machine.

Theory of operation. Every public method takes the current time `now_ms`; state
changes happen synchronously inside the call, so the coordinator is deterministic
and testable without sockets or sleeps. Requests that Kafka answers later (JoinGroup
until the rebalance completes, SyncGroup of followers until the leader's assignment
is stored) are coroutines that wait on an `asyncio.Future` the coordinator creates
and completes; the coordinator must therefore live on the server's event loop and
be called only from it. Time-driven events (session expiry, the rebalance timeout,
`group.initial.rebalance.delay.ms`, offset retention) happen in `tick(now_ms)` and
`expire_offsets(now_ms)`, which `run()` calls periodically.

Rebalance: a join of a new member, a leave, a session expiry or a changed
subscription moves the group to PreparingRebalance; it completes when every known
member has rejoined (or the largest rebalance timeout expired, dropping the ones that
did not). Completing bumps the generation, selects the protocol, picks the leader
(the first member to join) and answers every waiting JoinGroup; only the leader gets
the member list. The leader's SyncGroup stores the group (members and their
assignments) in `__consumer_offsets`, then every member's SyncGroup is answered with
its own assignment, its session timer restarts, and the group is Stable. Members
that send no SyncGroup within the rebalance timeout are removed and the group
rebalances again (pending sync). Dynamic members that did not rejoin in time are
dropped when the join phase ends; static members keep their place until their
session expires, and the leader is then one of the members that did rejoin. A new group waits
`initial_rebalance_delay_ms` (extended while new members keep arriving, up to the
rebalance timeout) so that a fleet starting together forms one generation.

JoinGroup v4+ (KIP-394): a member without id gets MEMBER_ID_REQUIRED and its id,
and must join again with it. Static members (`group.instance.id`, KIP-345) skip that
round trip, and rejoining with the same instance id hands the old member's place and
assignment to the new member id: no rebalance when the group is Stable; requests
still using the old member id get FENCED_INSTANCE_ID.

Persistence: group metadata and committed offsets go to the `__consumer_offsets`
partition of the group (see offsets_topic.py) through an `OffsetsStore`;
`load_partition` rebuilds groups and offsets from it.

Shape: `GroupCoordinator` is the public face (the request handlers and the broker
call only it) and owns one object per concept, each given only what it uses:

    GroupTable    table.py       the groups, by id, and the partitions owned
    RecordWriter  writer.py      appends to `__consumer_offsets`, queued writes
    Rebalance     rebalance.py   the state changes of live groups, on requests and time
    Membership    membership.py  JoinGroup, SyncGroup, Heartbeat, LeaveGroup
    Offsets       offsets.py     OffsetCommit, OffsetFetch, retention, DeleteGroups,
                                 OffsetDelete
    TxnOffsets    txn_offsets.py TxnOffsetCommit, pending offsets until the marker
    ConsumerGroups consumer/     the consumer protocol (KIP-848): ConsumerGroupHeartbeat,
                                 its groups' records, member checks of their commits

Classic and consumer groups share the table and `__consumer_offsets`; one group id
is one kind at a time. A consumer group's committed offsets are kept by an Empty
classic `Group` of the same id (the holder the offset code knows); ListGroups and
DescribeGroups show the id as the consumer group. Classic requests (protocol type
"consumer") for a consumer group with members are served by its classic members
(consumer/classic.py). A ConsumerGroupHeartbeat joining a classic group with
members converts it to a consumer group, and the last consumer-protocol member
leaving a group of classic members converts it back (consumer/migration.py, as
`group.consumer.migration.policy` allows); an Empty group of either kind is
converted by the other kind's first join.

A group's state changes only along Kafka's table of valid transitions (group.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from broker.groups.config import CoordinatorConfig
from broker.groups.consumer.classic import ClassicMembers
from broker.groups.consumer.group import ConsumerGroup
from broker.groups.consumer.heartbeat import ConsumerGroups, TopicsView
from broker.groups.group import Group, GroupState, GroupSummary
from broker.groups.group_config import GroupConfig
from broker.groups.membership import Membership
from broker.groups.offsets import Offsets
from broker.groups.rebalance import Rebalance
from broker.groups.storage import OffsetsStore
from broker.groups.table import GroupTable
from broker.groups.txn_offsets import TxnOffsets
from broker.groups.writer import Records, RecordWriter
from broker.protocol.errors import ErrorCode
from broker.share.records import ShareRecord

__all__ = ["CoordinatorConfig", "GroupCoordinator"]

log = logging.getLogger(__name__)


class GroupCoordinator:
    """All classic groups whose `__consumer_offsets` partition this broker leads.

    Owned by the broker; lives on the server's event loop (it creates asyncio
    Futures) and is not thread-safe.
    """

    def __init__(
        self,
        store: OffsetsStore,
        config: CoordinatorConfig | None = None,
        topics: TopicsView | None = None,
        group_configs: Callable[[str], GroupConfig] | None = None,
    ):
        """`topics()` gives {name: (topic id, partition count)} of the cluster's topics
        (the consumer protocol assigns by topic id); `group_configs(group id)` a group's
        dynamic configs (broker.groups.group_config; None: the coordinator's own
        session timeout and heartbeat interval for every group)."""
        self.config = config or CoordinatorConfig()
        self._store = store
        self._table = GroupTable(self.config.num_partitions)
        self._writer = RecordWriter(store, self.config.num_partitions)
        self._rebalance = Rebalance(self._writer, self.config)
        self.consumer = ConsumerGroups(
            self._table,
            self._writer,
            self.config,
            topics or dict,
            self._rebalance.request,
            group_configs,
        )
        classic = ClassicMembers(self.consumer, self._writer, self.config.consumer_max_size)
        membership = Membership(self._table, self._rebalance, self._writer, self.config, classic)
        offsets = Offsets(self._table, self._writer, self.config, self.consumer)
        self._offsets = offsets
        self._txn = TxnOffsets(self._table, self._writer, self.config.offset_metadata_max_bytes)
        # The requests, answered by the part that owns them.
        self.join_group = membership.join_group
        self.sync_group = membership.sync_group
        self.heartbeat = membership.heartbeat
        self.leave_group = membership.leave_group
        self.commit_offsets = offsets.commit_offsets
        self.fetch_offsets = offsets.fetch_offsets
        self.is_pending = self._txn.is_pending
        self.complete_txn = self._txn.complete
        self.delete_group = offsets.delete_group
        self.delete_offsets = offsets.delete_offsets
        self.expire_offsets = offsets.expire_offsets
        # the share groups (broker.share.manager) kept in the same partitions: the
        # broker connects them (records of a partition loaded, a partition unloaded)
        self.share_groups_loaded: Callable[[list[ShareRecord], int], None] = lambda _r, _t: None
        self.share_groups_unloaded: Callable[[], None] = lambda: None

    # -- ownership and loading --------------------------------------------------------

    @property
    def groups(self) -> dict[str, Group]:
        """The groups coordinated here, by id (read them; the parts change them)."""
        return self._table.groups

    @property
    def rebalances_completed(self) -> int:
        return self._rebalance.completed

    @property
    def owned(self) -> set[int]:
        """The `__consumer_offsets` partitions coordinated here."""
        return self._table.owned

    def partition_for(self, group_id: str) -> int:
        return self._table.partition_for(group_id)

    def load_partition(self, partition: int, now_ms: int) -> None:
        """Become coordinator of `partition`: replay its records into memory
        (transactional offsets as their markers say); its share groups' records go to
        `share_groups_loaded`."""
        records = self._txn.replay(partition, self._store.read_batches(partition))
        share: list[ShareRecord] = []
        self.consumer.loaded(self._table.load(partition, records, now_ms, share), now_ms)
        self.share_groups_loaded(share, now_ms)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition` (leadership moved): waiting requests get
        NOT_COORDINATOR and its groups are dropped from memory."""
        self._table.unload(partition)
        self._txn.unload(partition)
        self.share_groups_unloaded()

    async def write_records(self, group_id: str, records: Records) -> ErrorCode:
        """Append `records` of another kind of group (share groups: broker.share) to
        the group's partition; the ErrorCode clients get when that fails."""
        return await self._writer.write(group_id, records, int(time.time() * 1000))

    # -- transactional offsets --------------------------------------------------

    def unstable(self, group_id: str, partitions) -> set:
        """OffsetFetch `require_stable`: the partitions of `partitions` with a pending
        transactional offset (answered UNSTABLE_OFFSET_COMMIT)."""
        return {tp for tp in partitions if self._txn.is_pending(group_id, tp)}

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets,
        now_ms: int,
    ):
        """TxnOffsetCommit: the error of each partition."""

        def check_member() -> ErrorCode:
            if generation_id >= 0 or member_id:
                consumer = self.consumer.commit_error(
                    group_id, member_id, generation_id, 9, transactional=True
                )
                if consumer is not None:
                    return consumer
            return self._offsets.txn_commit_error(
                group_id, member_id, group_instance_id, generation_id, now_ms
            )

        return await self._txn.commit(
            group_id, producer_id, producer_epoch, offsets, now_ms, check_member
        )

    # -- DescribeGroups, ListGroups ---------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """DescribeGroups (classic); a consumer group's id answers Dead, as Kafka does
        for versions before 6."""
        dead = GroupSummary(group_id, GroupState.DEAD.value, "", "", ())
        err = self._table.coordinator_error(group_id)
        if err:
            return err, dead
        if group_id in self._table.consumer:
            return ErrorCode.NONE, dead
        group = self._table.get(group_id)
        return ErrorCode.NONE, group.summary() if group is not None else dead

    def partition_error(self, group_id: str) -> ErrorCode:
        """NOT_COORDINATOR unless this broker coordinates `group_id`."""
        return self._table.coordinator_error(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer-protocol group `group_id` (read it; ConsumerGroups changes it)."""
        return self._table.consumer.get(group_id)

    def list_groups(self) -> list[tuple[str, str, str, str]]:
        """(group_id, protocol_type, state, group type) of every group this broker
        coordinates; group type "classic" or "consumer" (ListGroups v5)."""
        consumer = self._table.consumer
        listed = [
            (g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self._table.groups.values()
            if g.group_id not in consumer
        ]
        return listed + [(gid, "consumer", g.state, "consumer") for gid, g in consumer.items()]

    # -- timers -------------------------------------------------------------------------

    async def tick(self, now_ms: int) -> None:
        """Expire sessions, pending members and pending syncs; end join phases past
        their deadline."""
        self._rebalance.tick(self._table.groups.values(), now_ms)
        self.consumer.tick(now_ms)
        await self._writer.flush(now_ms)

    async def run(self, clock: Callable[[], float] = time.time, interval_s: float = 0.1) -> None:
        """Drive `tick` and `expire_offsets` until cancelled (a task the server starts)."""
        next_expiry = 0
        while True:
            await asyncio.sleep(interval_s)
            now = int(clock() * 1000)
            try:
                await self.tick(now)
                if now >= next_expiry:
                    next_expiry = now + self.config.offsets_retention_check_interval_ms
                    await self.expire_offsets(now)
            except Exception:
                log.exception("group coordinator timer failed")
