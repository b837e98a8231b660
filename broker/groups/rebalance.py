"""The rebalance: what moves a group through its states, on requests and on time.

Membership (broker/groups/membership.py) asks for a rebalance when a member joins,
rejoins, leaves or changes its subscription; `tick` applies the time-driven events
(session expiry, the end of the join phase, the initial delay, the pending-sync
timeout). Every state change of a group is made here, through `Group.transition`,
except the Dead of a group that is forgotten (GroupTable.drop). The theory of
operation is in `broker.groups.coordinator`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from broker.groups.config import CoordinatorConfig
from broker.groups.group import Group, GroupState, JoinResult, Member, SyncResult, resolve
from broker.groups.writer import RecordWriter
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY


def current_generation(group: Group, member: Member, now_ms: int) -> JoinResult:
    """The JoinGroup answer of `member` in the group's generation (the member list
    for the leader only); it counts as a heartbeat."""
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


class Rebalance:
    """The rebalances of every group of the coordinator. Owned by the GroupCoordinator;
    lives on its event loop (it starts tasks) and is not thread-safe."""

    def __init__(self, writer: RecordWriter, config: CoordinatorConfig):
        self._writer = writer
        self._config = config
        self._latest_ms = 0  # the newest time `tick` was given
        self.completed = 0  # rebalances completed (generations started), for metrics
        self._tasks: set[asyncio.Task] = set()

    # -- asked by members ------------------------------------------------------------

    def request(self, group: Group, now_ms: int) -> None:
        """A member (re)joined and waits: rebalance unless one is under way, and end
        the join phase if that member was the last one missing."""
        if group.state in (STABLE, COMPLETING, EMPTY):
            self._prepare(group, now_ms)
        self.try_complete_join(group, now_ms)

    def try_complete_join(self, group: Group, now_ms: int) -> None:
        if group.is_(PREPARING) and not group.initial_delay and group.all_members_joined():
            self._complete_join(group, now_ms)

    def remove_member(self, group: Group, member: Member, now_ms: int) -> None:
        """`member` left or its session expired: its waiting requests get
        UNKNOWN_MEMBER_ID and the group rebalances without it."""
        member.fail_waiting(ErrorCode.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._prepare(group, now_ms)
        self.try_complete_join(group, now_ms)

    def store_assignment(self, group: Group, assignments: dict[str, bytes], now_ms: int) -> None:
        """The leader's SyncGroup: store the assignment, then answer every waiting
        SyncGroup and make the group Stable. A task of its own, so that the group
        moves on even if the leader's request is cancelled."""
        task = asyncio.get_running_loop().create_task(
            self._store_assignment(group, dict(assignments), now_ms)
        )
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("storing a group assignment failed", exc_info=task.exception())

    # -- time ------------------------------------------------------------------------

    def tick(self, groups: Iterable[Group], now_ms: int) -> None:
        """Expire sessions, pending members and pending syncs; end join phases past
        their deadline."""
        self._latest_ms = max(self._latest_ms, now_ms)
        for group in list(groups):
            self._expire_members(group, now_ms)
            if group.is_(PREPARING) and now_ms >= group.join_deadline:
                self._on_join_deadline(group, now_ms)
            elif group.pending_sync and now_ms >= group.sync_deadline:
                self._expire_pending_sync(group, now_ms)

    def _expire_members(self, group: Group, now_ms: int) -> None:
        for mid, deadline in list(group.pending_members.items()):
            if now_ms >= deadline:
                del group.pending_members[mid]
                self.try_complete_join(group, now_ms)
        for m in list(group.members.values()):
            if m.awaiting_join:
                expired = (
                    m.is_new and now_ms >= m.joined_at + self._config.new_member_join_timeout_ms
                )
            else:
                expired = m.sync_future is None and now_ms >= m.heartbeat_deadline
            if expired and m.member_id in group.members:
                log.info("group %s: session of %s expired", group.group_id, m.member_id)
                self.remove_member(group, m, now_ms)

    def _on_join_deadline(self, group: Group, now_ms: int) -> None:
        if group.initial_delay and group.new_member_added and group.initial_remaining > 0:
            group.new_member_added = False
            delay = min(self._config.initial_rebalance_delay_ms, group.initial_remaining)
            group.initial_remaining -= delay
            group.join_deadline = now_ms + delay
            return
        self._complete_join(group, now_ms)

    def _expire_pending_sync(self, group: Group, now_ms: int) -> None:
        """Members that got the new generation but never sent SyncGroup within the
        rebalance timeout are removed and the group rebalances (Kafka 3.x)."""
        late = [mid for mid in group.members if mid in group.pending_sync]
        log.info("group %s: %s sent no SyncGroup in time", group.group_id, ", ".join(late))
        for mid in late:
            group.remove(mid)
        self._prepare(group, now_ms)
        self.try_complete_join(group, now_ms)

    # -- the state changes -------------------------------------------------------------

    def _prepare(self, group: Group, now_ms: int) -> None:
        if group.is_(COMPLETING):
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        group.pending_sync.clear()
        delay = self._config.initial_rebalance_delay_ms
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

    def _complete_join(self, group: Group, now_ms: int) -> None:
        for m in list(group.members.values()):
            # Static members keep their place (KIP-345): their session decides.
            if not m.awaiting_join and m.group_instance_id is None:
                log.info("group %s: %s did not rejoin in time", group.group_id, m.member_id)
                group.remove(m.member_id)
        group.initial_delay = False
        if group.members and not group.elect_joined_leader():
            log.warning("group %s: no member rejoined; waiting for the rest", group.group_id)
            group.join_deadline = now_ms + group.rebalance_timeout_ms
            return
        group.generation += 1
        self.completed += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol = None
            group.transition(EMPTY, now_ms)
            self._writer.queue_group(group.group_id, group.to_record())
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
            result = current_generation(group, m, now_ms)
            fut, m.join_future = m.join_future, None
            m.is_new = False
            group.pending_sync.add(m.member_id)
            resolve(fut, result)
        group.sync_deadline = now_ms + group.rebalance_timeout_ms

    async def _store_assignment(self, group: Group, assignments: dict[str, bytes], now_ms):
        generation = group.generation
        err = await self._writer.write_group(group.group_id, group.to_record(assignments), now_ms)
        if not group.is_(COMPLETING) or group.generation != generation:
            return
        now_ms = max(now_ms, self._latest_ms)  # the write may have taken a while
        if err:
            self._propagate_assignment(group, err, now_ms)
            self._prepare(group, now_ms)
            self.try_complete_join(group, now_ms)
            return
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE, now_ms)
        group.transition(STABLE, now_ms)

    @staticmethod
    def _propagate_assignment(group: Group, err: ErrorCode, now_ms: int) -> None:
        """Answer every waiting SyncGroup with its assignment (or `err`, which also
        clears the assignments) and restart those members' session timers: a member
        that waited long for the leader must not expire right after its answer."""
        for m in group.members.values():
            if err:
                m.assignment = b""
            if m.sync_future is None:
                continue
            if err:
                resolve(m.sync_future, SyncResult(err))
            else:
                resolve(
                    m.sync_future,
                    SyncResult(ErrorCode.NONE, m.assignment, group.protocol_type, group.protocol),
                )
            m.sync_future = None
            m.heartbeat_deadline = now_ms + m.session_timeout_ms
