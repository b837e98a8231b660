"""A member's way from its current assignment to its target (KIP-848), as Kafka's
CurrentAssignmentBuilder.

The coordinator never gives a partition to a member while another member may still
consume it. A member whose target lost partitions first gets an assignment without
them, keeps its member epoch and is UNREVOKED_PARTITIONS until a heartbeat shows it
no longer owns them; only then does it move to the target's epoch. A partition of
its target still held by another member is withheld (UNRELEASED_PARTITIONS) until
that member releases it. Members whose target did not change keep everything.

Pure: the group's ownership of partitions comes in as `partition_owner`.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable, Mapping

TopicId = uuid.UUID
Assignment = Mapping[TopicId, frozenset[int]]


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True, slots=True)
class MemberAssignment:
    """A member's reconciliation state: what it may consume (`assigned`), what it must
    give up first (`revoking`), under which epochs."""

    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = dataclasses.field(default_factory=dict)
    revoking: Assignment = dataclasses.field(default_factory=dict)


class FencedMember(Exception):
    """The member is in a state it cannot reconcile from (FENCED_MEMBER_EPOCH)."""


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still owns any of `partitions`; a heartbeat without its
    owned partitions (None) is taken as owning them all."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def reconcile(
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    partition_owner: Callable[[TopicId, int], object | None],
    member_id: str,
) -> MemberAssignment:
    """The member's next state, given its target assignment of `target_epoch`, the
    partitions its heartbeat says it owns (None: not sent) and who holds each
    partition of the group (`partition_owner(topic, partition)`: a member id or None)."""
    state = current.state
    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(
            current, current.member_epoch, target_epoch, target, owned, partition_owner, member_id
        )
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.revoking):
            return current
        return _next(
            current,
            current.member_epoch + 1,
            target_epoch,
            target,
            owned,
            partition_owner,
            member_id,
        )
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(
            current, current.member_epoch, target_epoch, target, owned, partition_owner, member_id
        )
    if owned is None or any(owned.values()):
        raise FencedMember("the member is in an unknown state; it must rejoin")
    return _next(current, target_epoch, target_epoch, target, owned, partition_owner, member_id)


def _next(
    current: MemberAssignment,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    partition_owner: Callable[[TopicId, int], object | None],
    member_id: str,
) -> MemberAssignment:
    assigned: dict[TopicId, frozenset[int]] = {}
    revoking: dict[TopicId, frozenset[int]] = {}
    pending: dict[TopicId, frozenset[int]] = {}
    unreleased = False
    for t in set(target) | set(current.assigned):
        want = target.get(t, frozenset())
        have = current.assigned.get(t, frozenset())
        keep = have & want
        free = set()
        for p in want - keep:
            holder = partition_owner(t, p)
            if holder is None or holder == member_id:
                free.add(p)
            else:
                unreleased = True
        if keep:
            assigned[t] = keep
        if have - keep:
            revoking[t] = have - keep
        if free:
            pending[t] = frozenset(free)
    if revoking and _owns_any(owned, revoking):
        return MemberAssignment(
            MemberState.UNREVOKED_PARTITIONS,
            epoch,
            current.member_epoch,
            assigned,
            revoking,
        )
    for t, ps in pending.items():
        assigned[t] = assigned.get(t, frozenset()) | ps
    return MemberAssignment(
        MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        target_epoch,
        current.member_epoch,
        assigned,
        {},
    )
