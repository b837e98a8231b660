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
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from broker.groups.group import (
    Group,
    GroupState,
    GroupSummary,
    JoinResult,
    SyncResult,
    resolve,
)
from broker.groups.membership import MembershipMixin
from broker.groups.offsets import OffsetsMixin
from broker.groups.offsets_topic import (
    DECODE_ERRORS,
    GroupKey,
    OffsetKey,
    build_batch,
    decode_record,
    encode_group_key,
    encode_group_value,
    partition_for,
)
from broker.groups.storage import OffsetsStore, StoreError
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
DEAD = GroupState.DEAD


@dataclasses.dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    num_partitions: int = 50  # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    new_member_join_timeout_ms: int = 300_000  # Kafka's fixed NewMemberJoinTimeoutMs
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes

    @classmethod
    def from_broker_config(cls, cfg) -> CoordinatorConfig:
        """From a BrokerConfig (broker/config.py)."""
        return cls(
            num_partitions=cfg.get("offsets.topic.num.partitions"),
            initial_rebalance_delay_ms=cfg.get("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=cfg.get("group.min.session.timeout.ms"),
            max_session_timeout_ms=cfg.get("group.max.session.timeout.ms"),
            offsets_retention_ms=cfg.get("offsets.retention.minutes") * 60_000,
        )


class GroupCoordinator(MembershipMixin, OffsetsMixin):
    """All classic groups whose `__consumer_offsets` partition this broker leads.

    Owned by the broker; lives on the server's event loop (it creates asyncio
    Futures) and is not thread-safe.
    """

    def __init__(self, store: OffsetsStore, config: CoordinatorConfig | None = None):
        self.store = store
        self.config = config or CoordinatorConfig()
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self._outbox: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []
        self._tasks: set[asyncio.Task] = set()
        self.latest_ms = 0  # the newest time `tick` was given

    # -- ownership and loading --------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        if self.partition_for(group_id) not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def load_partition(self, partition: int, now_ms: int) -> None:
        """Become coordinator of `partition`: replay its records into memory."""
        for key, value in self.store.read_all(partition):
            try:
                k, v = decode_record(key, value)
            except DECODE_ERRORS as e:
                log.warning("__consumer_offsets-%d: skipping unreadable record: %s", partition, e)
                continue
            group = self.groups.get(k.group)
            if group is None:
                if v is None:
                    continue
                group = self.groups[k.group] = Group(k.group, now_ms)
            if isinstance(k, OffsetKey):
                if v is None:
                    group.offsets.pop((k.topic, k.partition), None)
                else:
                    group.offsets[(k.topic, k.partition)] = v
            elif v is None:  # the group's metadata was deleted; its offsets have their own
                if group.offsets:
                    fresh = self.groups[k.group] = Group(k.group, now_ms)
                    fresh.offsets = group.offsets
                else:
                    del self.groups[k.group]
            else:
                group.restore(v, now_ms)
        self.owned.add(partition)
        log.debug("loaded __consumer_offsets-%d", partition)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition` (leadership moved): waiting requests get
        NOT_COORDINATOR and its groups are dropped from memory."""
        self.owned.discard(partition)
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(gid)
            for m in group.members.values():
                resolve(m.join_future, JoinResult(ErrorCode.NOT_COORDINATOR, m.member_id))
                resolve(m.sync_future, SyncResult(ErrorCode.NOT_COORDINATOR))
            group.transition(DEAD, 0)

    # -- DescribeGroups, ListGroups ---------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        dead = GroupSummary(group_id, DEAD.value, "", "", ())
        err = self.coordinator_error(group_id)
        if err:
            return err, dead
        group = self.groups.get(group_id)
        return ErrorCode.NONE, group.summary() if group is not None else dead

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) of every group this broker coordinates."""
        return [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()]

    # -- timers -------------------------------------------------------------------------

    async def tick(self, now_ms: int) -> None:
        """Expire sessions, pending members and pending syncs; end join phases past
        their deadline."""
        self.latest_ms = max(self.latest_ms, now_ms)
        for group in list(self.groups.values()):
            self._expire_members(group, now_ms)
            if group.is_(PREPARING) and now_ms >= group.join_deadline:
                self._on_join_deadline(group, now_ms)
            elif group.pending_sync and now_ms >= group.sync_deadline:
                self._expire_pending_sync(group, now_ms)
        await self._flush(now_ms)

    def _expire_members(self, group: Group, now_ms: int) -> None:
        for mid, deadline in list(group.pending_members.items()):
            if now_ms >= deadline:
                del group.pending_members[mid]
                self._try_complete_join(group, now_ms)
        for m in list(group.members.values()):
            if m.awaiting_join:
                expired = (
                    m.is_new and now_ms >= m.joined_at + self.config.new_member_join_timeout_ms
                )
            else:
                expired = m.sync_future is None and now_ms >= m.heartbeat_deadline
            if expired and m.member_id in group.members:
                log.info("group %s: session of %s expired", group.group_id, m.member_id)
                self._remove_member(group, m, now_ms)

    def _on_join_deadline(self, group: Group, now_ms: int) -> None:
        if group.initial_delay and group.new_member_added and group.initial_remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining)
            group.initial_remaining -= delay
            group.join_deadline = now_ms + delay
            return
        self._complete_join(group, now_ms)

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

    # -- persistence ------------------------------------------------------------------

    def _queue_group(self, group: Group) -> None:
        value = encode_group_value(group.to_record())
        key = encode_group_key(GroupKey(group.group_id))
        self._outbox.append((self.partition_for(group.group_id), [(key, value)]))

    async def _flush(self, now_ms: int) -> None:
        """Write queued records nobody waits for (group became Empty, tombstones)."""
        while self._outbox:
            partition, records = self._outbox.pop(0)
            err = await self._store(partition, records, now_ms)
            if err:
                log.warning("__consumer_offsets-%d: write failed: %s", partition, err.name)

    async def _store(
        self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int
    ) -> ErrorCode:
        """Append records; the ErrorCode Kafka gives clients when that fails."""
        try:
            await asyncio.shield(self.store.append(partition, build_batch(records, now_ms)))
        except StoreError as e:
            if e.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR):
                return ErrorCode.NOT_COORDINATOR
            if e.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                return ErrorCode.UNKNOWN_SERVER_ERROR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE
