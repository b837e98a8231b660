"""Classic members in a consumer group (KIP-848): JoinGroup, SyncGroup, Heartbeat and
LeaveGroup of protocol type "consumer" sent to a consumer group with members, as
Kafka 4's GroupMetadataManager serves them (classicGroupJoinToConsumerGroup and its
siblings).

A classic member is a member of the consumer group like any other: its JoinGroup
subscription (the embedded ConsumerProtocolSubscription of its first protocol) is
its subscription, the group's server-side assignor computes its part of the target
assignment, and it is reconciled towards it with the partitions its subscription
says it owns (cooperative clients send them; eager ones revoked everything before
joining). Its member epoch is its generation. The JoinGroup is answered at once,
without a leader or members (no client-side assignment: the client's SyncGroup
assignments are ignored); the SyncGroup answers the member's assigned partitions as
a ConsumerProtocolAssignment. A Heartbeat answers REBALANCE_IN_PROGRESS when the
member must rejoin: the group epoch moved past its epoch, it must revoke
partitions, or partitions it waits for were released.

Timers, as Kafka's: the member's own session timeout (from its JoinGroup); after a
JoinGroup it must send SyncGroup, and once told to rejoin it must send JoinGroup,
within its rebalance timeout, else it is fenced (ConsumerGroups.tick).
"""

from __future__ import annotations

import logging

from broker.groups.consumer import embedded
from broker.groups.consumer import records as rec
from broker.groups.consumer.group import ClassicMetadata, ConsumerGroup, ConsumerMember
from broker.groups.consumer.heartbeat import ConsumerGroups, metadata_of
from broker.groups.consumer.migration import to_ids, to_names
from broker.groups.consumer.reconcile import MemberState
from broker.groups.consumer.request import new_member_id
from broker.groups.group import JoinResult, Member, SyncResult
from broker.groups.writer import RecordWriter
from broker.protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"


class ClassicMembers:
    """The classic requests of consumer groups' members. Owned by the
    GroupCoordinator; used on its event loop only."""

    def __init__(self, groups: ConsumerGroups, writer: RecordWriter, max_size: int):
        self._groups = groups
        self._writer = writer
        self._max_size = max_size

    # -- JoinGroup ---------------------------------------------------------------------

    async def join(
        self, group: ConsumerGroup, req: Member, require_known: bool, now_ms: int
    ) -> JoinResult:
        """A classic JoinGroup to `group` (which has members); `req` holds the
        request's fields, `require_known` is True from JoinGroup v4 (KIP-394)."""
        records: list = []
        try:
            member = self._join(group, req, require_known, now_ms, records)
        except ApiError as e:
            return JoinResult(ErrorCode(e.code), req.member_id)
        if member is None:
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, req.member_id)
        if records:
            err = await self._writer.write(group.group_id, records, now_ms)
            if err:
                return JoinResult(err, member.member_id)
        assert member.classic is not None  # just set by _join
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            member.epoch,
            PROTOCOL_TYPE,
            member.classic.protocol_name,
            "",
        )

    def _join(
        self, group: ConsumerGroup, req: Member, require_known: bool, now_ms: int, records: list
    ) -> ConsumerMember | None:
        """The member, joined; None when it must first learn its member id (then in
        `req.member_id`)."""
        unknown = not req.member_id
        member_id = req.member_id or new_member_id()
        if member_id not in group.members and len(group.members) >= self._max_size:
            raise ApiError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not group.supports_classic(req.protocol_type, set(req.protocol_names())):
            raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and require_known and req.group_instance_id is None:
            req.member_id = member_id
            return None
        try:
            subscription = embedded.decode_subscription(req.protocols[0][1])
        except embedded.MalformedProtocol as e:
            log.info(
                "consumer group %s: JoinGroup of %s with a malformed subscription: %s",
                group.group_id,
                member_id,
                e,
            )
            raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from None
        member, is_new = self._member(group, req, member_id, unknown, records)
        before = None if is_new else metadata_of(member)
        member.instance_id = req.group_instance_id
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.subscribed_names = tuple(sorted(set(subscription.topics)))
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = ClassicMetadata(req.session_timeout_ms, tuple(req.protocols))
        owned = to_ids(subscription.owned, self._groups.topics())
        self._groups.advance(group, member, is_new, before, owned, records)
        member.session_deadline = now_ms + req.session_timeout_ms
        member.classic_deadline = now_ms + req.rebalance_timeout_ms  # its SyncGroup is due
        return member

    def _member(
        self, group: ConsumerGroup, req: Member, member_id: str, unknown: bool, records: list
    ) -> tuple[ConsumerMember, bool]:
        """The member the JoinGroup speaks for, and whether it is new."""
        instance = req.group_instance_id
        if instance is None:
            member = group.members.get(member_id)
            return (member, False) if member is not None else (ConsumerMember(member_id), True)
        existing_id = group.static_members.get(instance)
        if existing_id is None:
            if not unknown:
                raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
            return ConsumerMember(member_id, instance_id=instance), True
        existing = group.members[existing_id]
        if unknown:
            return self._groups.replace_static(group, existing, member_id, records), False
        if existing_id != member_id:
            raise ApiError(ErrorCode.FENCED_INSTANCE_ID)
        return existing, False

    # -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------

    def sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        now_ms: int,
    ) -> SyncResult:
        """The member's assignment, once it caught up with the group epoch."""
        try:
            member = _classic_member(group, member_id, instance_id)
        except ApiError as e:
            return SyncResult(ErrorCode(e.code))
        assert member.classic is not None  # checked by _classic_member
        if generation_id != member.epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and protocol_name != member.classic.protocol_name:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.epoch > member.epoch and member.assignment.state is not (
            MemberState.UNREVOKED_PARTITIONS
        ):
            _rejoin_due(member, now_ms)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member.classic_deadline = 0
        member.session_deadline = now_ms + member.classic.session_timeout_ms
        partitions = to_names(member.assignment.assigned, self._groups.names_of())
        version = embedded.version_of(member.classic.protocols[0][1])
        return SyncResult(
            ErrorCode.NONE,
            embedded.encode_assignment(partitions, version),
            protocol_type,
            protocol_name,
        )

    def heartbeat(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> ErrorCode:
        try:
            member = _classic_member(group, member_id, instance_id)
        except ApiError as e:
            return ErrorCode(e.code)
        assert member.classic is not None  # checked by _classic_member
        if generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        member.session_deadline = now_ms + member.classic.session_timeout_ms
        state = member.assignment.state
        if (
            member.epoch < group.epoch
            or state is MemberState.UNREVOKED_PARTITIONS
            or (
                state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased(member)
            )
        ):
            _rejoin_due(member, now_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup of classic members: each gone, the group epoch bumped once;
        (the error of the write, each member's error)."""
        results = []
        records: list = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None and not member_id:
                    member = _static(group, instance_id)  # an administrative removal
                    if member.classic is None:
                        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = _classic_member(group, member_id, instance_id)
            except ApiError as e:
                results.append(ErrorCode(e.code))
                continue
            group.remove(member.member_id)
            log.info("consumer group %s: classic member %s left", group.group_id, member.member_id)
            records += rec.member_tombstones(group.group_id, member.member_id)
            results.append(ErrorCode.NONE)
        if not records:
            return ErrorCode.NONE, results
        group.epoch += 1
        records.append(rec.epoch_record(group.group_id, group.epoch))
        return await self._writer.write(group.group_id, records, now_ms), results


def _static(group: ConsumerGroup, instance_id: str) -> ConsumerMember:
    member_id = group.static_members.get(instance_id)
    if member_id is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    return group.members[member_id]


def _classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    else:
        member = _static(group, instance_id)
        if member.member_id != member_id:
            raise ApiError(ErrorCode.FENCED_INSTANCE_ID)
    if member.classic is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    return member


def _rejoin_due(member: ConsumerMember, now_ms: int) -> None:
    """Told to rejoin: it must within its rebalance timeout (unless already due)."""
    if not member.classic_deadline:
        member.classic_deadline = now_ms + max(member.rebalance_timeout_ms, 0)
