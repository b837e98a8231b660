"""Membership half of GroupCoordinator: JoinGroup, the rebalance, SyncGroup, Heartbeat
and LeaveGroup. The theory of operation is in `broker.groups.coordinator`.

`MembershipMixin` is part of `GroupCoordinator` (same owner, same event loop).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from broker.groups.group import Group, GroupState, JoinResult, Member, SyncResult, resolve
from broker.groups.offsets_topic import GroupKey, encode_group_key, encode_group_value
from broker.protocol.errors import ErrorCode

log = logging.getLogger("broker.groups.coordinator")

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD


class MembershipMixin:
    """Group membership of GroupCoordinator; see the coordinator's module docstring."""

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
        old_leader = group.leader_id
        member = group.replace_static(instance, req.member_id)
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        log.info("group %s: static member %s replaced %s", group.group_id, instance, old_id)
        if not group.is_(STABLE):
            return self._update_member_and_rebalance(group, member, req, now_ms)
        before = self._member_settings(member)
        self._update_member(member, req)
        if group.select_protocol() != group.protocol:
            return self._update_member_and_rebalance(group, member, req, now_ms)
        return self._store_static_replacement(group, member, old_id, before, old_leader, now_ms)

    async def _store_static_replacement(
        self, group: Group, member: Member, old_id: str, before: tuple, old_leader, now_ms
    ) -> JoinResult:
        """Stable group, same protocol: persist the new member id, then answer with
        the current generation and no rebalance (as Kafka 2.4+). The answer names the
        leader as it was before the replacement, so a restarted static leader does
        not run a trivial assignment that a Stable group would ignore (Kafka's
        behaviour before JoinGroup v9's skip_assignment). If the write fails, the
        replacement is undone and the member gets the error."""
        new_id, instance = member.member_id, member.group_instance_id
        err = await self._store(
            self.partition_for(group.group_id),
            [(encode_group_key(GroupKey(group.group_id)), encode_group_value(group.to_record()))],
            now_ms,
        )
        if err and group.static_members.get(instance) == new_id:
            log.warning(
                "group %s: could not store static member %s: %s", group.group_id, instance, err.name
            )
            group.replace_static(instance, old_id)
            self._restore_member_settings(member, before)
        if err:
            return JoinResult(
                err, "", group.generation, group.protocol_type, group.protocol, old_leader or ""
            )
        return JoinResult(
            ErrorCode.NONE,
            new_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            old_leader or "",
        )

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's validateCurrentMember: a given instance id must be mapped to this
        member id (FENCED_INSTANCE_ID if mapped to another, UNKNOWN_MEMBER_ID if not
        mapped at all); otherwise the member id must belong to the group."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.FENCED_INSTANCE_ID if current != member_id else ErrorCode.NONE
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
        if group.is_(PREPARING) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms)
        self._try_complete_join(group, now_ms)
        return fut

    @staticmethod
    def _member_settings(member: Member) -> tuple:
        return (
            member.protocols,
            member.client_id,
            member.client_host,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
        )

    @staticmethod
    def _restore_member_settings(member: Member, settings: tuple) -> None:
        (
            member.protocols,
            member.client_id,
            member.client_host,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
        ) = settings

    @classmethod
    def _update_member(cls, member: Member, req: Member) -> None:
        cls._restore_member_settings(member, cls._member_settings(req))

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
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        group.pending_sync.clear()
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
        group.pending_sync.clear()
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
            group.pending_sync.add(m.member_id)
            resolve(fut, result)
        group.sync_deadline = now_ms + group.rebalance_timeout_ms

    def _expire_pending_sync(self, group: Group, now_ms: int) -> None:
        """Members that got the new generation but never sent SyncGroup within the
        rebalance timeout are removed and the group rebalances (Kafka 3.x)."""
        late = [mid for mid in group.members if mid in group.pending_sync]
        log.info("group %s: %s sent no SyncGroup in time", group.group_id, ", ".join(late))
        for mid in late:
            group.remove(mid)
        self._prepare_rebalance(group, now_ms)
        self._try_complete_join(group, now_ms)

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
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult:
        """SyncGroup; `protocol_type`/`protocol_name` are sent from v5 (KIP-559) and
        must then match the group's."""
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
        if not err and protocol_type is not None and protocol_type != group.protocol_type:
            err = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if not err and protocol_name is not None and protocol_name != group.protocol:
            err = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if not err and group.is_(PREPARING):
            err = ErrorCode.REBALANCE_IN_PROGRESS
        if err:
            return SyncResult(err)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if group.is_(STABLE):
            member.heartbeat_deadline = now_ms + member.session_timeout_ms
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
        now_ms = max(now_ms, self.latest_ms)  # the write may have taken a while
        if err:
            self._propagate_assignment(group, err, now_ms)
            self._prepare_rebalance(group, now_ms)
            self._try_complete_join(group, now_ms)
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
