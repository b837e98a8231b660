"""ConsumerGroups: the consumer group protocol (KIP-848) on the group coordinator, as
Kafka 4's GroupMetadataManager serves it.

A member joins with member epoch 0 (v0: the coordinator makes its member id; v1: the
client brings one), heartbeats with its current epoch and the partitions it owns, and
leaves with epoch -1 (-2: a static member leaving for a while, keeping its
assignment until its session ends). Each heartbeat may change the member's
subscription; a new member, a changed subscription or a change of the subscribed
topics' metadata bumps the group epoch, and the target assignment is recomputed by
the group's server-side assignor (assignors.py) at the new epoch. The member is then
reconciled towards its target (reconcile.py): it is told to revoke what it must give
up, and gets a partition only once its previous owner released it. The response
carries the member's epoch, the heartbeat interval and, when it changed or the
request was a full one, its assignment as topic ids (the ids Metadata v10+ shows).

Errors as Kafka: UNKNOWN_MEMBER_ID for a member the group does not know (removed
after its session timeout without a heartbeat (the group's `consumer.session.timeout.ms`,
a dynamic group config, else `group.consumer.session.timeout.ms`), or after its rebalance
timeout while still owning partitions it should have revoked), FENCED_MEMBER_EPOCH
for an epoch that is not the member's (nor its previous one with a subset of its
partitions), GROUP_ID_NOT_FOUND for a group that does not exist (epoch > 0) or is a
classic group with members that cannot be upgraded, UNRELEASED_INSTANCE_ID /
FENCED_INSTANCE_ID for static members, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, INVALID_REQUEST.

Migration (migration.py): a member joining a classic group with members upgrades it
(the classic members stay, as classic members: classic.py serves their requests);
the last consumer-protocol member leaving or fenced downgrades the group to a
classic group of the remaining members, which rebalances.

Every change is written to `__consumer_offsets` in Kafka's records (records.py)
before the heartbeat is answered; changes made by timers are written with the next
flush. `rebuild` (records.py) gives them back to the next coordinator.

Offsets stay where the classic groups keep theirs (a classic `Group` of the same id
holds them, Empty); `commit_error` and `fetch_error` check a consumer group's member
and epoch for OffsetCommit v9 / OffsetFetch v9 (a classic member's generation, with
any version).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping

from broker.groups.config import CoordinatorConfig
from broker.groups.consumer import embedded, migration
from broker.groups.consumer import records as rec
from broker.groups.consumer import regex as rx
from broker.groups.consumer.assignors import MemberSpec, assignors_from_config
from broker.groups.consumer.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
)
from broker.groups.consumer.reconcile import (
    FencedMember,
    MemberAssignment,
    MemberState,
    reconcile,
)
from broker.groups.consumer.request import (
    HeartbeatRequest,
    HeartbeatResult,
    check_epoch,
    new_member_id,
    validate,
)
from broker.groups.group import Group
from broker.groups.group_config import GroupConfig
from broker.groups.table import GroupTable
from broker.groups.writer import RecordWriter
from broker.protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)

TopicId = uuid.UUID
# {topic name: (topic id, partition count)} of every topic the cluster has
TopicsView = Callable[[], Mapping[str, tuple[TopicId, int]]]


def metadata_of(m: ConsumerMember) -> tuple:
    """What a member's metadata record holds; the first three bump the group epoch."""
    return (
        m.subscription(),
        m.instance_id,
        m.rack_id,
        m.rebalance_timeout_ms,
        m.client_id,
        m.client_host,
        m.classic,
    )


def _epoch_error(member: ConsumerMember, epoch: int) -> ErrorCode:
    """A commit's or fetch's epoch against the member's (a classic member's
    generation is its member epoch: ILLEGAL_GENERATION, as Kafka)."""
    if epoch == member.epoch:
        return ErrorCode.NONE
    return (
        ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
    )


class ConsumerGroups:
    """The consumer groups of the partitions the coordinator owns. Owned by the
    GroupCoordinator; used on its event loop only."""

    def __init__(
        self,
        table: GroupTable,
        writer: RecordWriter,
        config: CoordinatorConfig,
        topics: TopicsView,
        rebalance: Callable[[Group, int], None],
        group_configs: Callable[[str], GroupConfig] | None = None,
    ):
        """`rebalance(group, now_ms)` starts a rebalance of a classic group (one just
        downgraded); `group_configs(group id)` the group's dynamic configs, whose
        session timeout and heartbeat interval its members get (None: `config`'s)."""
        self._table = table
        self._writer = writer
        self._config = config
        default = GroupConfig(
            consumer_session_timeout_ms=config.consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.consumer_heartbeat_interval_ms,
        )
        self._group_config = group_configs or (lambda _group_id: default)
        self._topics = topics
        self._rebalance = rebalance
        self._assignors = assignors_from_config(list(config.consumer_assignors))
        self._default_assignor = next(iter(self._assignors))

    # -- ConsumerGroupHeartbeat -----------------------------------------------------

    async def heartbeat(self, r: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        try:
            validate(r, self._assignors)
            err = self._table.coordinator_error(r.group_id)
            if err:
                return HeartbeatResult(err)
            if r.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result, records = self._leave(r, now_ms)
            else:
                existed = r.group_id in self._table.consumer
                try:
                    result, records = self._heartbeat(r, now_ms)
                except ApiError:
                    if not existed:  # a group created by a refused join is not kept
                        self._table.consumer.pop(r.group_id, None)
                    raise
        except ApiError as e:
            return HeartbeatResult(ErrorCode(e.code), str(e) if str(e) != e.code.name else None)
        except rx.InvalidRegex as e:
            return HeartbeatResult(ErrorCode.INVALID_REGULAR_EXPRESSION, str(e))
        if records:
            err = await self._writer.write(r.group_id, records, now_ms)
            if err:
                return HeartbeatResult(err)
        return result

    def _heartbeat(self, r: HeartbeatRequest, now_ms: int) -> tuple[HeartbeatResult, list]:
        records: list = []
        group = self._group(r, records, now_ms)
        member_id = r.member_id or new_member_id()
        if member_id not in group.members and len(group.members) >= self._config.consumer_max_size:
            raise ApiError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self._config.consumer_max_size} members.",
            )
        member, is_new = self._member(group, r, member_id, records)
        before = None if is_new else metadata_of(member)
        if r.instance_id is not None:
            member.instance_id = r.instance_id
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        if r.server_assignor is not None:
            member.server_assignor = r.server_assignor
        if r.subscribed_topic_names is not None:
            member.subscribed_names = tuple(sorted(set(r.subscribed_topic_names)))
        if r.subscribed_topic_regex is not None:
            member.subscribed_regex = r.subscribed_topic_regex or None
        member.client_id, member.client_host = r.client_id, r.client_host
        previous, after = self.advance(group, member, is_new, before, r.owned, records)
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if (
                previous.state is not MemberState.UNREVOKED_PARTITIONS
                or not member.rebalance_deadline
            ):
                member.rebalance_deadline = now_ms + max(member.rebalance_timeout_ms, 0)
        else:
            member.rebalance_deadline = 0
        settings = self._group_config(group.group_id)
        member.session_deadline = now_ms + settings.consumer_session_timeout_ms
        full = r.member_epoch == 0 or (
            r.rebalance_timeout_ms != -1
            and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None)
            and r.owned is not None
        )
        changed = after.assigned != previous.assigned
        return (
            HeartbeatResult(
                ErrorCode.NONE,
                member_id=member_id,
                member_epoch=after.member_epoch,
                heartbeat_interval_ms=settings.consumer_heartbeat_interval_ms,
                assignment=after.assigned if full or changed else None,
            ),
            records,
        )

    def advance(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        is_new: bool,
        before: tuple | None,
        owned: Mapping[TopicId, frozenset[int]] | None,
        records: list,
    ) -> tuple[MemberAssignment, MemberAssignment]:
        """Kafka's three steps of a heartbeat or of a classic member's JoinGroup, once
        the member's fields are updated (`before`: its metadata before, None if new):
        record the member, bump the group epoch if what the assignment depends on
        changed, recompute the target at a new epoch, reconcile the member with
        `owned` (what it says it owns). Its assignment before and after."""
        after_meta = metadata_of(member)
        bump = before is None or before[:3] != after_meta[:3]
        if is_new:
            group.add(member)
        if before != after_meta:
            records.append(rec.member_record(group.group_id, member))
        if self._refresh_topics(group):
            bump = True
            records.append(rec.partition_metadata_record(group.group_id, group.subscribed_topics))
        if bump:
            group.epoch += 1
            records.append(rec.epoch_record(group.group_id, group.epoch))
        if group.epoch > group.assignment_epoch:
            records += self._assign(group)
        previous = member.assignment
        try:
            after = reconcile(
                previous,
                group.assignment_epoch,
                group.target.get(member.member_id, {}),
                owned,
                group.owner,
                member.member_id,
            )
        except FencedMember as e:
            raise ApiError(ErrorCode.FENCED_MEMBER_EPOCH, str(e)) from None
        if after != previous:
            group.update_assignment(member, after)
            records.append(rec.current_record(group.group_id, member.member_id, after))
        return previous, after

    def _group(self, r: HeartbeatRequest, records: list, now_ms: int) -> ConsumerGroup:
        """The request's group; created by a join (epoch 0), or upgraded from a classic
        group with members."""
        group_id, create = r.group_id, r.member_epoch == 0
        group = self._table.consumer.get(group_id)
        if group is not None:
            return group
        classic = self._table.get(group_id)
        if classic is not None and classic.members:
            if create and migration.may_upgrade(classic, self._config):
                self._check_joinable(classic, r)
                return self._upgrade(classic, records, now_ms)
            raise ApiError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        if not create:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        group = self._table.consumer[group_id] = ConsumerGroup(group_id)
        records.append(rec.epoch_record(group_id, 0))
        return group

    def _check_joinable(self, classic: Group, r: HeartbeatRequest) -> None:
        """The errors the join would meet once the group is upgraded, raised before
        it is (an upgrade is not undone)."""
        if len(classic.members) >= self._config.consumer_max_size:
            raise ApiError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self._config.consumer_max_size} members.",
            )
        if r.instance_id is not None and r.instance_id in classic.static_members:
            raise ApiError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {classic.static_members[r.instance_id]} with instance id "
                f"{r.instance_id} is not released.",
            )

    def _upgrade(self, classic: Group, records: list, now_ms: int) -> ConsumerGroup:
        try:
            group, converted = migration.upgrade(self._table, classic, self._topics(), now_ms)
        except embedded.MalformedProtocol as e:
            log.warning("cannot upgrade classic group %s: %s", classic.group_id, e)
            raise ApiError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {classic.group_id} to consumer group "
                "because the embedded consumer protocol is malformed.",
            ) from None
        records += converted
        return group

    def _member(
        self, group: ConsumerGroup, r: HeartbeatRequest, member_id: str, records: list
    ) -> tuple[ConsumerMember, bool]:
        """The member the request speaks for, and whether it is new (Kafka's
        getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember)."""
        joining = r.member_epoch == 0
        if r.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise ApiError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerMember(member_id), True
            if not joining:
                check_epoch(member, r)
            return member, False
        existing_id = group.static_members.get(r.instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if joining:
            if existing is None:
                member = group.members.get(member_id)
                return (member, False) if member is not None else (ConsumerMember(member_id), True)
            if existing.epoch != STATIC_LEAVE_EPOCH and existing.member_id != member_id:
                raise ApiError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {existing.member_id} with instance id {r.instance_id} "
                    "is not released.",
                )
            if existing.member_id == member_id:
                return existing, False
            return self.replace_static(group, existing, member_id, records), False
        if existing is None:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise ApiError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {r.instance_id} was fenced by "
                f"member {existing.member_id}.",
            )
        check_epoch(existing, r)
        return existing, False

    def replace_static(
        self, group: ConsumerGroup, existing: ConsumerMember, member_id: str, records: list
    ) -> ConsumerMember:
        """A static member comes back under a new member id: it takes the old
        member's place, assignment and target."""
        target = group.target.get(existing.member_id)
        group.remove(existing.member_id)
        records += rec.member_tombstones(group.group_id, existing.member_id)
        member = dataclasses.replace(
            existing,
            member_id=member_id,
            assignment=dataclasses.replace(
                existing.assignment, member_epoch=0, previous_member_epoch=0, revoking={}
            ),
        )
        group.add(member)
        if target is not None:
            group.target[member_id] = target
            records.append(rec.target_record(group.group_id, member_id, target))
        records.append(rec.member_record(group.group_id, member))
        return member

    def _leave(self, r: HeartbeatRequest, now_ms: int) -> tuple[HeartbeatResult, list]:
        group = self._table.consumer.get(r.group_id)
        if group is None:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {r.group_id} not found.")
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if member is None:
                raise ApiError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {r.member_id} is not a member of group {r.group_id}.",
                )
            records = self._remove(group, member, now_ms)
        else:
            current = group.static_members.get(r.instance_id)
            member = group.members.get(current) if current is not None else None
            if member is None:
                raise ApiError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown."
                )
            if member.member_id != r.member_id:
                raise ApiError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced "
                    f"by member {member.member_id}.",
                )
            if r.member_epoch == STATIC_LEAVE_EPOCH:
                # away for a while: it keeps its assignment until its session ends
                away = dataclasses.replace(
                    member.assignment, member_epoch=STATIC_LEAVE_EPOCH, revoking={}
                )
                group.update_assignment(member, away)
                member.rebalance_deadline = 0
                records = [rec.current_record(group.group_id, member.member_id, away)]
            else:
                records = self._remove(group, member, now_ms)
        return HeartbeatResult(
            ErrorCode.NONE, member_id=r.member_id, member_epoch=r.member_epoch
        ), records

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> list:
        """Fence `member` out of the group: its partitions are free, the epoch bumps;
        or, when it was the last consumer-protocol member, the group becomes a
        classic group (Kafka's consumerGroupFenceMember)."""
        if migration.may_downgrade(group, member, self._config):
            classic, records = migration.downgrade(
                self._table, group, member.member_id, self.names_of(), now_ms
            )
            self._rebalance(classic, now_ms)
            return records
        group.remove(member.member_id)
        group.epoch += 1
        log.info(
            "consumer group %s: member %s left; group epoch %d",
            group.group_id,
            member.member_id,
            group.epoch,
        )
        return [
            *rec.member_tombstones(group.group_id, member.member_id),
            rec.epoch_record(group.group_id, group.epoch),
        ]

    # -- subscriptions and the target assignment -------------------------------------

    def _member_topics(self, member: ConsumerMember, topics: Mapping[str, tuple[TopicId, int]]):
        names = set(member.subscribed_names)
        if member.subscribed_regex:
            names |= rx.matching(member.subscribed_regex, topics)
        return {topics[n][0] for n in names if n in topics}

    def _refresh_topics(self, group: ConsumerGroup) -> bool:
        """Recompute the subscribed topics' metadata; True when it changed (a topic
        created, deleted or given partitions, a regex matching a new topic)."""
        topics = self._topics()
        names = group.subscribed_names()
        for expression in group.regexes():
            names |= rx.matching(expression, topics)
        now = {topics[n][0]: (n, topics[n][1]) for n in names if n in topics}
        if now == group.subscribed_topics:
            return False
        group.subscribed_topics = now
        return True

    def _assign(self, group: ConsumerGroup) -> list:
        """The target assignment at the group epoch; records of what changed."""
        topics = self._topics()
        assignor = self._assignors[group.preferred_assignor(self._default_assignor)]
        specs = {
            mid: MemberSpec(frozenset(self._member_topics(m, topics)), group.target.get(mid, {}))
            for mid, m in group.members.items()
        }
        counts = {t: n for t, (_, n) in group.subscribed_topics.items()}
        target = assignor.assign(specs, counts)
        records = [
            rec.target_record(group.group_id, mid, a)
            for mid, a in target.items()
            if a != group.target.get(mid)
        ]
        group.target = target
        group.assignment_epoch = group.epoch
        group.assignor_name = assignor.name
        records.append(rec.target_epoch_record(group.group_id, group.epoch))
        return records

    # -- timers -------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Fence members past their session or rebalance timeout; their records go
        out with the next flush."""
        for group in list(self._table.consumer.values()):
            for member in list(group.members.values()):
                if self._table.consumer.get(group.group_id) is not group:
                    break  # downgraded by the member fenced before
                expired = member.session_deadline and now_ms > member.session_deadline
                stuck = member.rebalance_deadline and now_ms > member.rebalance_deadline
                late = member.classic_deadline and now_ms > member.classic_deadline
                if expired or stuck or late:
                    log.info(
                        "consumer group %s: member %s fenced (%s timeout)",
                        group.group_id,
                        member.member_id,
                        "session" if expired else "rebalance" if stuck else "join or sync",
                    )
                    self._writer.queue(group.group_id, self._remove(group, member, now_ms))

    def loaded(self, group_ids, now_ms: int) -> None:
        """Start the session timers of the members of groups just loaded."""
        for gid in group_ids:
            for member in self._table.consumer[gid].members.values():
                timeout = self._group_config(gid).consumer_session_timeout_ms
                if member.classic is not None:
                    timeout = member.classic.session_timeout_ms
                member.session_deadline = now_ms + timeout

    # -- offsets ------------------------------------------------------------------------

    def commit_error(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        api_version: int,
        transactional: bool = False,
    ) -> ErrorCode | None:
        """OffsetCommit against a consumer group (Kafka's ConsumerGroup
        validateOffsetCommit); None when `group_id` is not one."""
        group = self._table.consumer.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and member.classic is None and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return _epoch_error(member, member_epoch)

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9 with a member (Kafka's ConsumerGroup validateOffsetFetch)."""
        group = self._table.consumer.get(group_id)
        if group is None or (member_epoch < 0 and member_id is None):
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _epoch_error(member, member_epoch)

    # -- the cluster's topics -----------------------------------------------------------------

    def topics(self) -> Mapping[str, tuple[TopicId, int]]:
        return self._topics()

    def names_of(self) -> dict[TopicId, str]:
        return {tid: name for name, (tid, _) in self._topics().items()}
