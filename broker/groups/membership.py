"""Group membership requests: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Each request is checked against the group as Kafka does (coordinator, member,
generation, protocol), then changes the membership and asks the `Rebalance` to move
the group on. Requests for a consumer group (KIP-848) go to its classic members
(consumer/classic.py). Static members (KIP-345) replacing themselves in a Stable group are
handled here without a rebalance. The theory of operation is in
`broker.groups.coordinator`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from broker.groups.config import CoordinatorConfig
from broker.groups.consumer.classic import ClassicMembers
from broker.groups.group import Group, GroupState, JoinResult, Member, SyncResult, resolve
from broker.groups.rebalance import Rebalance, current_generation
from broker.groups.table import GroupTable
from broker.groups.writer import RecordWriter
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


def _member_settings(member: Member) -> tuple:
    return (
        member.protocols,
        member.client_id,
        member.client_host,
        member.session_timeout_ms,
        member.rebalance_timeout_ms,
    )


def _restore_member_settings(member: Member, settings: tuple) -> None:
    (
        member.protocols,
        member.client_id,
        member.client_host,
        member.session_timeout_ms,
        member.rebalance_timeout_ms,
    ) = settings


def _update_member(member: Member, req: Member) -> None:
    _restore_member_settings(member, _member_settings(req))


class Membership:
    """The membership requests of every group in `table`. Owned by the
    GroupCoordinator; lives on its event loop (it creates asyncio Futures) and is not
    thread-safe."""

    def __init__(
        self,
        table: GroupTable,
        rebalance: Rebalance,
        writer: RecordWriter,
        config: CoordinatorConfig,
        classic: ClassicMembers,
    ):
        """`classic` answers the requests of classic members of consumer groups."""
        self._table = table
        self._rebalance = rebalance
        self._writer = writer
        self._config = config
        self._classic = classic

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
        await self._writer.flush(now_ms)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _join(self, group_id: str, req: Member, require_known: bool, now_ms: int):
        err = self._table.coordinator_error(group_id)
        if err:
            return JoinResult(err, req.member_id)
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id)
        cfg = self._config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        consumer = self._table.consumer.get(group_id)
        if consumer is not None:
            if consumer.members:
                return self._classic.join(consumer, req, require_known, now_ms)
            self._writer.queue(group_id, self._table.drop_consumer(group_id))
        group = self._table.get(group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = self._table.create(group_id, now_ms)
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
        err = group.validate_member(req.member_id, req.group_instance_id)
        if err:
            return JoinResult(err, req.member_id)
        member = group.members[req.member_id]
        if group.is_(PREPARING):
            return self._update_member_and_rebalance(group, member, req, now_ms)
        if group.is_(COMPLETING) and member.matches(req.protocols):
            return current_generation(group, member, now_ms)
        if group.is_(STABLE) and member.member_id != group.leader_id:
            if member.matches(req.protocols):
                return current_generation(group, member, now_ms)
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
        before = _member_settings(member)
        _update_member(member, req)
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
        assert instance is not None  # a static member was replaced
        err = await self._writer.write_group(group.group_id, group.to_record(), now_ms)
        if err and group.static_members.get(instance) == new_id:
            log.warning(
                "group %s: could not store static member %s: %s", group.group_id, instance, err.name
            )
            group.replace_static(instance, old_id)
            _restore_member_settings(member, before)
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

    def _add_member_and_rebalance(self, group: Group, member: Member, now_ms: int):
        member.is_new = True
        member.joined_at = now_ms
        fut = member.join_future = asyncio.get_running_loop().create_future()
        if group.is_(PREPARING) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._rebalance.request(group, now_ms)
        return fut

    def _update_member_and_rebalance(self, group: Group, member: Member, req: Member, now_ms):
        _update_member(member, req)
        # A second JoinGroup while one waits: the client gave up on the first one.
        resolve(member.join_future, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        fut = member.join_future = asyncio.get_running_loop().create_future()
        self._rebalance.request(group, now_ms)
        return fut

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
        err = self._table.coordinator_error(group_id)
        consumer = self._table.consumer.get(group_id)
        if not err and consumer is not None:
            return self._classic.sync(
                consumer,
                member_id,
                group_instance_id,
                generation_id,
                protocol_type,
                protocol_name,
                now_ms,
            )
        group = self._table.get(group_id)
        if err or group is None:
            return SyncResult(err or ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(DEAD):
            err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not err:
            err = group.validate_member(member_id, group_instance_id)
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
        fut = member.sync_future = asyncio.get_running_loop().create_future()
        if member_id == group.leader_id:
            self._rebalance.store_assignment(group, assignments, now_ms)
        return await fut

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> ErrorCode:
        err = self._table.coordinator_error(group_id)
        if err:
            return err
        consumer = self._table.consumer.get(group_id)
        if consumer is not None:
            return self._classic.heartbeat(
                consumer, member_id, group_instance_id, generation_id, now_ms
            )
        group = self._table.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        err = group.validate_member(member_id, group_instance_id)
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
        err = self._table.coordinator_error(group_id)
        if err:
            return err, []
        consumer = self._table.consumer.get(group_id)
        if consumer is not None:
            return await self._classic.leave(consumer, members, now_ms)
        group = self._table.get(group_id)
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
                self._rebalance.try_complete_join(group, now_ms)
                results.append(ErrorCode.NONE)
            elif member_id in group.members:
                log.info("group %s: %s left", group_id, member_id)
                self._rebalance.remove_member(group, group.members[member_id], now_ms)
                results.append(ErrorCode.NONE)
            else:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
        await self._writer.flush(now_ms)
        return ErrorCode.NONE, results
