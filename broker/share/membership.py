"""A share group's members, their epochs and assignments (Kafka's share group
heartbeat, KIP-932), without I/O.

A member joins with epoch 0 and its subscribed topics, heartbeats with the epoch it
was given, and leaves with epoch -1 (or is removed when no heartbeat came within the
session timeout). The group epoch moves up whenever the membership, a subscription
or an assignment changes; a member whose assignment changes takes the group epoch
as its own. Share groups have no revocation phase: a member goes straight to its new
assignment.

Assignor ("simple", server-side): every member gets every partition of the topics
it subscribes to. Several members of a share group may read one partition; the
share-partition on the partition's leader hands each record to one of them.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from broker.protocol import ErrorCode

# topic name -> (topic id, partition count), or None when the topic does not exist
TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]
Assignment = dict[str, list[int]]  # topic name -> partitions

ASSIGNOR = "simple"
LEAVE_EPOCH = -1


@dataclasses.dataclass(slots=True)
class ShareMember:
    member_id: str
    epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: list[str]
    assignment: Assignment
    deadline_ms: int
    sent_epoch: int = -1  # the epoch whose assignment the member was last sent
    previous_epoch: int = -1  # the member's epoch before its last assignment change


@dataclasses.dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged since the last one sent


class ShareGroup:
    """One share group coordinated here."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        # the share-partitions the group has had (assigned, or given a start offset by
        # AlterShareGroupOffsets): whose durable state DeleteGroups deletes, and what
        # DescribeShareGroupOffsets shows when it names no topics
        self.initialized: dict[str, set[int]] = {}

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
        lookup: TopicLookup,
        session_timeout_ms: int,
        now_ms: int,
    ) -> HeartbeatResult:
        if member_epoch == LEAVE_EPOCH:
            if self.members.pop(member_id, None) is not None:
                self.epoch += 1
            return HeartbeatResult(ErrorCode.NONE, member_id=member_id, epoch=LEAVE_EPOCH)
        member = self.members.get(member_id)
        if member_epoch == 0:
            if topics is None and member is None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames must be set in the first heartbeat of a member",
                )
            if member is None:
                member = ShareMember(
                    member_id or uuid.uuid4().hex,
                    0,
                    client_id,
                    client_host,
                    rack_id,
                    [],
                    {},
                    0,
                )
                self.members[member.member_id] = member
                self.epoch += 1
            member.sent_epoch = -1  # a (re)joining member gets its assignment
        elif member is None:
            return HeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in the group"
            )
        elif member_epoch != member.epoch:
            return HeartbeatResult(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"member epoch {member_epoch} is not the current one, {member.epoch}",
            )
        member.deadline_ms = now_ms + session_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if topics is not None and sorted(set(topics)) != member.subscribed:
            member.subscribed = sorted(set(topics))
            self.epoch += 1
        self._assign(member, lookup)
        assignment = None
        if member.sent_epoch != member.epoch:
            assignment = member.assignment
            member.sent_epoch = member.epoch
        return HeartbeatResult(
            ErrorCode.NONE, member_id=member.member_id, epoch=member.epoch, assignment=assignment
        )

    def _assign(self, member: ShareMember, lookup: TopicLookup) -> None:
        """The simple assignor's answer for `member` from the topics as they are now; a
        change (a topic created, partitions added, a new subscription) moves the
        group epoch and the member's epoch to it."""
        target: Assignment = {}
        for topic in member.subscribed:
            found = lookup(topic)
            if found is not None:
                target[topic] = list(range(found[1]))
        for topic, partitions in target.items():
            self.initialized.setdefault(topic, set()).update(partitions)
        if target != member.assignment or member.epoch == 0:
            if target != member.assignment:
                self.epoch += 1
            member.assignment = target
            member.previous_epoch, member.epoch = member.epoch, self.epoch
            self.assignment_epoch = self.epoch

    def expire(self, now_ms: int) -> list[str]:
        """Remove the members whose session timed out; returns their ids."""
        gone = [m.member_id for m in self.members.values() if m.deadline_ms <= now_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self.epoch += 1
        return gone
