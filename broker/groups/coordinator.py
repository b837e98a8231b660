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
its own assignment and the group is Stable. A new group waits
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
import uuid
from collections.abc import Callable

from broker.groups.group import (
    Group,
    GroupState,
    GroupSummary,
    JoinResult,
    Member,
    SyncResult,
    resolve,
)
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
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
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


class GroupCoordinator(OffsetsMixin):
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

    # -- JoinGroup ----------------------------------------------------------------------

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        now_ms: int,
    ) -> JoinResult:
        """JoinGroup; `require_known_member_id` is True from v4 (KIP-394)."""
        member = Member(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            [(name, bytes(meta)) for name, meta in protocols],
        )
        outcome = self._join(group_id, member, require_known_member_id, now_ms)
        await self._flush(now_ms)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _join(self, group_id: str, req: Member, require_known: bool, now_ms: int):
        err = self.coordinator_error(group_id)
        if err:
            return JoinResult(err, req.member_id)
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self.groups.get(group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = self.groups[group_id] = Group(group_id, now_ms)
        if group.is_(DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if not req.member_id:
            req.member_id = f"{req.client_id}-{uuid.uuid4()}"
            if req.group_instance_id is not None:
                return self._join_static(group, req, now_ms)
            if require_known:
                group.pending_members[req.member_id] = now_ms + req.session_timeout_ms
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, req.member_id)
            return self._add_member_and_rebalance(group, req, now_ms)
        if req.member_id in group.pending_members:
            del group.pending_members[req.member_id]
            return self._add_member_and_rebalance(group, req, now_ms)
        err = self._validate_member(group, req.member_id, req.group_instance_id)
        if err:
            return JoinResult(err, req.member_id)
        member = group.members[req.member_id]
        if group.is_(PREPARING):
            return self._update_member_and_rebalance(group, member, req, now_ms)
        if group.is_(COMPLETING) and member.matches(req.protocols):
            return self._current_generation(group, member, now_ms)
        if group.is_(STABLE) and member.member_id != group.leader_id:
            if member.matches(req.protocols):
                return self._current_generation(group, member, now_ms)
        return self._update_member_and_rebalance(group, member, req, now_ms)

    def _join_static(self, group: Group, req: Member, now_ms: int):
        instance = req.group_instance_id
        if instance not in group.static_members:
            return self._add_member_and_rebalance(group, req, now_ms)
        old_id = group.static_members[instance]
        member = group.replace_static(instance, req.member_id)
        log.info("group %s: static member %s replaced %s", group.group_id, instance, old_id)
        if not group.is_(STABLE):
            return self._update_member_and_rebalance(group, member, req, now_ms)
        self._update_member(member, req)
        if group.select_protocol() != group.protocol:
            return self._update_member_and_rebalance(group, member, req, now_ms)
        # Same place, same assignment, no rebalance (as Kafka 2.4+ for a Stable group).
        self._queue_group(group)
        result = self._current_generation(group, member, now_ms)
        return dataclasses.replace(result, members=())

    def _validate_member(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None and instance_id in group.static_members:
            if group.static_members[instance_id] != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _current_generation(self, group: Group, member: Member, now_ms: int) -> JoinResult:
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            group.join_members() if is_leader else (),
        )

    def _add_member_and_rebalance(self, group: Group, member: Member, now_ms: int):
        member.is_new = True
        member.joined_at = now_ms
        fut = member.join_future = asyncio.get_running_loop().create_future()
        if group.is_(PREPARING) and group.initial_delay:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms)
        self._try_complete_join(group, now_ms)
        return fut

    @staticmethod
    def _update_member(member: Member, req: Member) -> None:
        member.protocols = req.protocols
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms

    def _update_member_and_rebalance(self, group: Group, member: Member, req: Member, now_ms):
        self._update_member(member, req)
        # A second JoinGroup while one waits: the client gave up on the first one.
        resolve(member.join_future, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        fut = member.join_future = asyncio.get_running_loop().create_future()
        self._maybe_prepare_rebalance(group, now_ms)
        self._try_complete_join(group, now_ms)
        return fut

    # -- rebalance ----------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_(COMPLETING):
            for m in group.members.values():
                m.assignment = b""
                resolve(m.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_future = None
        delay = self.config.initial_rebalance_delay_ms
        if group.is_(EMPTY) and delay > 0:
            group.initial_delay = True
            group.new_member_added = False
            group.initial_remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.join_deadline = now_ms + delay
        else:
            group.initial_delay = False
            group.join_deadline = now_ms + group.rebalance_timeout_ms
        group.transition(PREPARING, now_ms)
        log.info("group %s: preparing rebalance (generation %d)", group.group_id, group.generation)

    def _try_complete_join(self, group: Group, now_ms: int) -> None:
        if group.is_(PREPARING) and not group.initial_delay and group.all_members_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        for m in list(group.members.values()):
            if not m.awaiting_join:
                log.info("group %s: %s did not rejoin in time", group.group_id, m.member_id)
                group.remove(m.member_id)
        group.initial_delay = False
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.transition(EMPTY, now_ms)
            self._queue_group(group)
            return
        group.protocol = group.select_protocol()
        group.transition(COMPLETING, now_ms)
        log.info(
            "group %s: generation %d, protocol %s, %d members",
            group.group_id,
            group.generation,
            group.protocol,
            len(group.members),
        )
        for m in group.members.values():
            result = self._current_generation(group, m, now_ms)
            fut, m.join_future = m.join_future, None
            m.is_new = False
            resolve(fut, result)

    def _remove_member(self, group: Group, member: Member, now_ms: int) -> None:
        resolve(member.join_future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        resolve(member.sync_future, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.join_future = member.sync_future = None
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms)
        self._try_complete_join(group, now_ms)

    # -- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        assignments: dict[str, bytes],
        now_ms: int,
    ) -> SyncResult:
        err = self.coordinator_error(group_id)
        group = self.groups.get(group_id)
        if not err and group is None:
            err = ErrorCode.UNKNOWN_MEMBER_ID
        elif not err and group.is_(DEAD):
            err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not err:
            err = self._validate_member(group, member_id, group_instance_id)
        if not err and generation_id != group.generation:
            err = ErrorCode.ILLEGAL_GENERATION
        if not err and group.is_(PREPARING):
            err = ErrorCode.REBALANCE_IN_PROGRESS
        if err:
            return SyncResult(err)
        member = group.members[member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        if group.is_(STABLE):
            return SyncResult(
                ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol
            )
        resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        loop = asyncio.get_running_loop()
        fut = member.sync_future = loop.create_future()
        if member_id == group.leader_id:
            # A task of its own: the group moves on even if this request is cancelled.
            task = loop.create_task(self._store_assignment(group, dict(assignments), now_ms))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await fut

    async def _store_assignment(self, group: Group, assignments: dict[str, bytes], now_ms):
        generation = group.generation
        record = group.to_record(assignments)
        err = await self._store(
            self.partition_for(group.group_id),
            [(encode_group_key(GroupKey(group.group_id)), encode_group_value(record))],
            now_ms,
        )
        if not group.is_(COMPLETING) or group.generation != generation:
            return
        if err:
            for m in group.members.values():
                resolve(m.sync_future, SyncResult(err))
                m.sync_future = None
            self._prepare_rebalance(group, now_ms)
            self._try_complete_join(group, now_ms)
            return
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
            resolve(
                m.sync_future,
                SyncResult(ErrorCode.NONE, m.assignment, group.protocol_type, group.protocol),
            )
            m.sync_future = None
        group.transition(STABLE, now_ms)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> ErrorCode:
        err = self.coordinator_error(group_id)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup for (member_id, group_instance_id) pairs: (top error, per member).
        v0-2 send one member with no instance id; the top error is then its error."""
        err = self.coordinator_error(group_id)
        if err:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in members:
            if instance_id is not None:
                static_id = group.static_members.get(instance_id)
                if static_id is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != static_id:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = static_id
            if group.pending_members.pop(member_id, None) is not None:
                self._try_complete_join(group, now_ms)
                results.append(ErrorCode.NONE)
            elif member_id in group.members:
                log.info("group %s: %s left", group_id, member_id)
                self._remove_member(group, group.members[member_id], now_ms)
                results.append(ErrorCode.NONE)
            else:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
        await self._flush(now_ms)
        return ErrorCode.NONE, results

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
        """Expire sessions and pending members; end join phases past their deadline."""
        for group in list(self.groups.values()):
            self._expire_members(group, now_ms)
            if group.is_(PREPARING) and now_ms >= group.join_deadline:
                self._on_join_deadline(group, now_ms)
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
