"""One classic consumer group: its members, generation, state and committed offsets.

States (Kafka's classic group state machine):

    Empty ──join──> PreparingRebalance ──all joined / timeout──> CompletingRebalance
      ^                 ^      |                                     |
      |                 |      └──no members left──> Empty           | leader's SyncGroup
      |                 └──join/leave/expiry──────── Stable <────────┘
    Dead: the group was removed (offsets expired, partition unloaded); a coroutine
    still holding the object sees Dead and answers COORDINATOR_NOT_AVAILABLE.

The legal transitions are data: `VALID_PREVIOUS_STATES` is Kafka's table (each
state's `validPreviousStates` in GroupMetadata.scala), and `Group.transition`
raises IllegalStateError for any other; the state cannot be assigned. A group
loaded from `__consumer_offsets` starts in its stored state (`Group.from_record`),
as Kafka's loadGroup builds it, without a transition.

This module is data plus pure decisions (protocol selection, membership checks,
summaries, conversion to and from `__consumer_offsets` records); the transitions
are driven by `Rebalance` (broker/groups/rebalance.py) and, for Dead, `GroupTable`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import struct
import types
from collections import Counter

from broker.groups.offsets_topic import GroupValue, MemberRecord, OffsetValue
from broker.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class IllegalStateError(RuntimeError):
    """A group was asked for a transition its state does not allow: a coordinator
    bug (Kafka's IllegalStateException), never a client's error."""


# target state -> the states it may be entered from (Kafka's validPreviousStates)
VALID_PREVIOUS_STATES: types.MappingProxyType[GroupState, frozenset[GroupState]] = (
    types.MappingProxyType(
        {
            GroupState.PREPARING_REBALANCE: frozenset(
                {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
            ),
            GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
            GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
            GroupState.DEAD: frozenset(GroupState),  # from any state, Dead included
            GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
        }
    )
)


@dataclasses.dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class JoinResult:
    """The body of a JoinGroup response (protocol_name None is sent as "")."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups' view: metadata and assignments only while Stable, as Kafka."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


class Member:
    """A member of a group. Owned by its Group; used on the event loop only."""

    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_future",
        "sync_future",
        "heartbeat_deadline",
        "joined_at",
        "is_new",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = list(protocols)
        self.assignment = b""
        self.join_future: asyncio.Future | None = None
        self.sync_future: asyncio.Future | None = None
        self.heartbeat_deadline = 0
        self.joined_at = 0
        self.is_new = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)

    def fail_waiting(self, error: ErrorCode) -> None:
        """Answer this member's waiting JoinGroup and SyncGroup with `error`."""
        resolve(self.join_future, JoinResult(error, self.member_id))
        resolve(self.sync_future, SyncResult(error))
        self.join_future = self.sync_future = None


def resolve(fut: asyncio.Future | None, value) -> None:
    """Complete a pending response unless its requester already gave up."""
    if fut is not None and not fut.done():
        fut.set_result(value)


class Group:
    """Membership and offsets of one group id. Owned by the GroupCoordinator; used
    on its event loop only, never across threads."""

    def __init__(self, group_id: str, now_ms: int):
        self.group_id = group_id
        self._state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> expiry (KIP-394)
        # Members of the current generation that have not sent SyncGroup yet; they
        # are removed when `sync_deadline` passes (Kafka's pending-sync timeout).
        self.pending_sync: set[str] = set()
        self.sync_deadline = 0
        self.offsets: dict[tuple[str, int], OffsetValue] = {}
        # OffsetCommits waiting for their append: the group is not expired meanwhile
        # (Kafka's hasOffsets counts pending commits), or a first commit could find
        # its new, still offset-less group dropped under it.
        self.pending_commits = 0
        # Rebalance timing: the join phase ends at `join_deadline`; while
        # `initial_delay` is set, the group waits for more first members
        # (group.initial.rebalance.delay.ms) with `initial_remaining` ms to go.
        self.join_deadline = 0
        self.initial_delay = False
        self.initial_remaining = 0
        self.new_member_added = False

    @property
    def state(self) -> GroupState:
        return self._state

    def is_(self, state: GroupState) -> bool:
        return self._state is state

    def transition(self, state: GroupState, now_ms: int) -> None:
        """Enter `state`; IllegalStateError unless VALID_PREVIOUS_STATES allows it."""
        if self._state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateError(
                f"group {self.group_id}: no transition from {self._state.value} to {state.value}"
            )
        self._state = state
        self.state_timestamp = now_ms

    @property
    def leader(self) -> Member | None:
        return None if self.leader_id is None else self.members.get(self.leader_id)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined (a static member may have
        stayed without rejoining); False when no member rejoined."""
        leader = self.leader
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    def replace_static(self, instance_id: str, new_member_id: str) -> Member:
        """Give the member holding `instance_id` a new member id (KIP-345); the old
        id's waiting requests are fenced."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.fail_waiting(ErrorCode.FENCED_INSTANCE_ID)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member_id)
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's validateCurrentMember: a given instance id must be mapped to this
        member id (FENCED_INSTANCE_ID if mapped to another, UNKNOWN_MEMBER_ID if not
        mapped at all); otherwise the member id must belong to the group."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.FENCED_INSTANCE_ID if current != member_id else ErrorCode.NONE
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer; ties go to
        the leader's preference order."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.leader or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def join_members(self) -> tuple[JoinMember, ...]:
        return tuple(
            JoinMember(m.member_id, m.group_instance_id, m.metadata(self.protocol))
            for m in self.members.values()
        )

    def subscribed_topics(self) -> set[str]:
        """The topics the members of a consumer group subscribe to, read from their
        metadata of the selected protocol (ConsumerProtocolSubscription: version,
        then the topic names); a member whose metadata does not parse adds none."""
        topics: set[str] = set()
        for member in self.members.values():
            topics |= _subscription_topics(member.metadata(self.protocol))
        return topics

    def summary(self) -> GroupSummary:
        stable = self.is_(GroupState.STABLE)
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        protocol = (self.protocol or "") if stable else ""
        return GroupSummary(
            self.group_id, self.state.value, self.protocol_type or "", protocol, members
        )

    # -- persistence --------------------------------------------------------------------

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupValue:
        """The group as a GroupMetadataValue; `assignments` overrides the members'
        current ones (the leader's SyncGroup, before it takes effect)."""
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol),
                (assignments or {}).get(m.member_id, b"")
                if assignments is not None
                else m.assignment,
            )
            for m in self.members.values()
        )
        return GroupValue(
            self.protocol_type or "",
            self.generation,
            self.protocol,
            self.leader_id,
            self.state_timestamp,
            members,
        )

    @classmethod
    def converted(cls, group_id: str, generation: int, members: list[Member], now_ms: int) -> Group:
        """A Stable group of protocol type "consumer" made of the classic members of a
        consumer group being downgraded (KIP-848), as Kafka's
        ClassicGroup.fromConsumerGroup builds it: no transition is involved, and the
        caller sets the members' assignments, then asks for a rebalance."""
        group = cls(group_id, now_ms)
        group.generation = generation
        for m in members:
            group.add(m)
        group.protocol_type = "consumer"
        group.protocol = group.select_protocol()
        group._state = GroupState.STABLE
        return group

    @classmethod
    def from_record(cls, group_id: str, value: GroupValue, now_ms: int) -> Group:
        """The group a stored record describes (coordinator load): Stable with its
        members, Empty without, as Kafka's loadGroup; no transition is involved."""
        group = cls(group_id, now_ms)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol = value.protocol
        group.leader_id = value.leader
        for r in value.members:
            m = Member(
                r.member_id,
                r.group_instance_id,
                r.client_id,
                r.client_host,
                r.rebalance_timeout,
                r.session_timeout,
                value.protocol_type,
                [(value.protocol or "", r.subscription)],
            )
            m.assignment = r.assignment
            m.heartbeat_deadline = now_ms + r.session_timeout
            group.add(m)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group._state = GroupState.STABLE if group.members else GroupState.EMPTY
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        return group


def _subscription_topics(metadata: bytes) -> set[str]:
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, pos)
            topics.add(metadata[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()
