"""One consumer group of the consumer protocol (KIP-848) and its members.

A group has a group epoch, bumped whenever what the assignment depends on changes (a
member joins or leaves, a subscription changes, a subscribed topic appears, gains
partitions or goes), and a target assignment computed at some group epoch (the
assignment epoch). Each member moves towards its part of the target on its own
heartbeats (reconcile.py), under its member epoch; `owners` says which member holds
every partition now (assigned or still being revoked), so a partition goes to its new
member only once the previous one let it go.

A member may speak the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup
with protocol type "consumer"): it then carries its `ClassicMetadata`, the session
timeout and protocols of its last JoinGroup (Kafka's ClassicMemberMetadata), and its
member epoch is the generation the classic requests carry (classic.py).

States as Kafka's ConsumerGroup: Empty (no members), Assigning (the target lags the
group epoch), Reconciling (some member has not reached the target), Stable.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping

from broker.groups.consumer.reconcile import MemberAssignment, MemberState

TopicId = uuid.UUID
Assignment = Mapping[TopicId, frozenset[int]]

EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
DEAD = "Dead"

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member using the classic protocol joined with: its session timeout and
    its (protocol name, embedded subscription) pairs in its order of preference."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup answer names (its first, as Kafka)."""
        return self.protocols[0][0]


@dataclasses.dataclass(slots=True)
class ConsumerMember:
    """A member; the coordinator replaces its `assignment` as it reconciles."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    assignment: MemberAssignment = dataclasses.field(default_factory=MemberAssignment)
    session_deadline: int = 0
    rebalance_deadline: int = 0  # while revoking: fenced if not done by then
    classic: ClassicMetadata | None = None  # set while it uses the classic protocol
    # a classic member told to rejoin (or just joined) must join (sync) by then
    classic_deadline: int = 0

    @property
    def epoch(self) -> int:
        return self.assignment.member_epoch

    def subscription(self) -> tuple:
        return (self.subscribed_names, self.subscribed_regex, self.server_assignor)


class ConsumerGroup:
    """Owned by ConsumerGroups (heartbeat.py); used on the event loop only."""

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, dict[TopicId, frozenset[int]]] = {}
        self.owners: dict[tuple[TopicId, int], str] = {}
        # {topic id: (name, partitions)} of the subscribed topics at `epoch`
        self.subscribed_topics: dict[TopicId, tuple[str, int]] = {}
        self.assignor_name = ""

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.epoch != self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.epoch != self.assignment_epoch or m.assignment.state is not MemberState.STABLE:
                return RECONCILING
        return STABLE

    def owner(self, topic: TopicId, partition: int) -> str | None:
        return self.owners.get((topic, partition))

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own(member)

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self._release(member)
        self.target.pop(member_id, None)
        return member

    def update_assignment(self, member: ConsumerMember, assignment: MemberAssignment) -> None:
        """Replace the member's assignment and the ownership of its partitions."""
        self._release(member)
        member.assignment = assignment
        self._own(member)

    def _release(self, member: ConsumerMember) -> None:
        for part in (member.assignment.assigned, member.assignment.revoking):
            for t, ps in part.items():
                for p in ps:
                    if self.owners.get((t, p)) == member.member_id:
                        del self.owners[(t, p)]

    def _own(self, member: ConsumerMember) -> None:
        for part in (member.assignment.assigned, member.assignment.revoking):
            for t, ps in part.items():
                for p in ps:
                    self.owners[(t, p)] = member.member_id

    def subscribed_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_names)
        return names

    def regexes(self) -> set[str]:
        return {m.subscribed_regex for m in self.members.values() if m.subscribed_regex}

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a classic member of `protocol_type` offering protocols `names` may
        join: protocol type "consumer" and, when classic members are present, a
        protocol every one of them offers (Kafka's supportsClassicProtocols)."""
        if protocol_type != "consumer" or not names:
            return False
        for m in self.classic_members():
            assert m.classic is not None  # classic_members() has only those
            names = names & {name for name, _ in m.classic.protocols}
        return bool(names)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still held by another member."""
        for t, ps in self.target.get(member.member_id, {}).items():
            have = member.assignment.assigned.get(t, frozenset())
            for p in ps - have:
                holder = self.owners.get((t, p))
                if holder is not None and holder != member.member_id:
                    return True
        return False

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members name (ties to the first name in sorted order), as
        Kafka's ConsumerGroup.computePreferredServerAssignor; else `default`."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))
