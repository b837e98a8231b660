"""Online migration of a group between the protocols (KIP-848's upgrade and
downgrade), as Kafka 4's GroupMetadataManager does it.

Upgrade: a consumer-protocol member joining a classic group with members (protocol
type "consumer") turns it into a consumer group: every classic member becomes a
classic member of the consumer group, Stable at the classic generation, its
subscription read from its metadata of the group's protocol and its current and
target assignment from its last SyncGroup assignment; the group epoch and
assignment epoch are the generation. The joining member then bumps the epoch, so
the classic members are told to rejoin (REBALANCE_IN_PROGRESS) and get their part
of the new target assignment.

Downgrade: when the last consumer-protocol member of a consumer group leaves (or is
fenced) and classic members remain, the group becomes a classic group at the group
epoch, Stable with those members, their target assignments as their assignments
and the protocol they vote for, then rebalances.

`group.consumer.migration.policy` says which way is allowed (Kafka's
ConsumerGroupMigrationPolicy): bidirectional (Kafka's default), upgrade, downgrade
or disabled. Offsets stay with the group id (the classic holder of both kinds).
`upgrade` and `downgrade` change the coordinator's table and give the records that
say so; the cluster's topics come in as arguments.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from broker.groups.config import CoordinatorConfig
from broker.groups.consumer import embedded
from broker.groups.consumer import records as rec
from broker.groups.consumer.group import ClassicMetadata, ConsumerGroup, ConsumerMember
from broker.groups.consumer.reconcile import MemberAssignment
from broker.groups.group import Group, GroupState, Member
from broker.groups.offsets_topic import GroupKey, encode_group_key
from broker.groups.table import GroupTable
from broker.groups.writer import group_records
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# policy -> (upgrade allowed, downgrade allowed)
MIGRATION_POLICIES = {
    "bidirectional": (True, True),
    "upgrade": (True, False),
    "downgrade": (False, True),
    "disabled": (False, False),
}

TopicId = uuid.UUID


def upgrade_allowed(policy: str) -> bool:
    return MIGRATION_POLICIES.get(policy.lower(), (False, False))[0]


def downgrade_allowed(policy: str) -> bool:
    return MIGRATION_POLICIES.get(policy.lower(), (False, False))[1]


def to_ids(
    partitions: Mapping[str, frozenset[int]], topics: Mapping[str, tuple[TopicId, int]]
) -> dict[TopicId, frozenset[int]]:
    """Partitions by topic name to partitions by topic id; unknown topics dropped."""
    return {topics[t][0]: ps for t, ps in partitions.items() if t in topics and ps}


def to_names(
    partitions: Mapping[TopicId, frozenset[int]], names: Mapping[TopicId, str]
) -> dict[str, frozenset[int]]:
    return {names[t]: ps for t, ps in partitions.items() if t in names and ps}


def to_consumer(classic: Group, topics: Mapping[str, tuple[TopicId, int]]) -> ConsumerGroup:
    """The consumer group a classic group with members becomes (Kafka's
    ConsumerGroup.fromClassicGroup); MalformedProtocol when a member's metadata or
    assignment is not the consumer's embedded protocol."""
    group = ConsumerGroup(classic.group_id)
    group.epoch = group.assignment_epoch = classic.generation
    for m in classic.members.values():
        subscription = embedded.decode_subscription(m.metadata(classic.protocol))
        assigned = to_ids(embedded.decode_assignment(m.assignment), topics)
        member = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_names=tuple(sorted(set(subscription.topics))),
            assignment=MemberAssignment(
                member_epoch=classic.generation,
                previous_member_epoch=classic.generation,
                assigned=assigned,
            ),
            classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.add(member)
        group.target[member.member_id] = dict(assigned)
    return group


def to_classic(
    group: ConsumerGroup, leaving: str, names: Mapping[TopicId, str], now_ms: int
) -> Group:
    """The classic group a consumer group becomes once `leaving`, its last
    consumer-protocol member, is gone (Kafka's ClassicGroup.fromConsumerGroup); each
    member's assignment is its target, in the version of its subscription."""
    members = []
    for m in group.members.values():
        if m.member_id == leaving or m.classic is None:
            continue
        member = Member(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.classic.session_timeout_ms,
            "consumer",
            list(m.classic.protocols),
        )
        member.heartbeat_deadline = now_ms + m.classic.session_timeout_ms
        members.append(member)
    classic = Group.converted(group.group_id, group.epoch, members, now_ms)
    for member in members:
        version = embedded.version_of(member.metadata(classic.protocol))
        target = to_names(group.target.get(member.member_id, {}), names)
        member.assignment = embedded.encode_assignment(target, version)
    return classic


def may_upgrade(classic: Group, config: CoordinatorConfig) -> bool:
    """Kafka's validateOnlineUpgrade."""
    why = None
    if not upgrade_allowed(config.consumer_migration_policy):
        why = "the online upgrade is disabled"
    elif classic.protocol_type != "consumer":
        why = "the group does not use the consumer embedded protocol"
    elif len(classic.members) > config.consumer_max_size:
        why = "the group size exceeds the consumer group maximum size"
    if why:
        log.info("cannot upgrade classic group %s: %s", classic.group_id, why)
    return why is None


def upgrade(
    table: GroupTable, classic: Group, topics: Mapping[str, tuple[TopicId, int]], now_ms: int
) -> tuple[ConsumerGroup, list]:
    """Replace the classic group by the consumer group it becomes; its waiting
    JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS, an Empty
    classic group keeps its offsets. The group and its records; MalformedProtocol
    (nothing changed) when a member's metadata does not parse."""
    gid = classic.group_id
    group = to_consumer(classic, topics)
    for m in classic.members.values():
        m.fail_waiting(ErrorCode.REBALANCE_IN_PROGRESS)
    holder = Group(gid, now_ms)
    holder.offsets = dict(classic.offsets)
    classic.transition(GroupState.DEAD, now_ms)
    table.groups[gid] = holder
    table.consumer[gid] = group
    for member in group.members.values():
        assert member.classic is not None  # every member of a converted group
        member.session_deadline = now_ms + member.classic.session_timeout_ms
    log.info("classic group %s upgraded to a consumer group at epoch %d", gid, group.epoch)
    records = [(encode_group_key(GroupKey(gid)), None), *rec.created_records(group)]
    return group, records


def may_downgrade(group: ConsumerGroup, leaving: ConsumerMember, config: CoordinatorConfig) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: `leaving` is the last member
    of the consumer protocol, others remain, and the policy allows it."""
    if leaving.classic is not None or len(group.members) <= 1:
        return False
    if len(group.classic_members()) != len(group.members) - 1:
        return False
    if not downgrade_allowed(config.consumer_migration_policy):
        log.info(
            "cannot downgrade consumer group %s: the online downgrade is disabled", group.group_id
        )
        return False
    return True


def downgrade(
    table: GroupTable,
    group: ConsumerGroup,
    leaving: str,
    names: Mapping[TopicId, str],
    now_ms: int,
) -> tuple[Group, list]:
    """Replace the consumer group by the classic group its classic members make
    (the caller starts its rebalance); the classic group and the records."""
    gid = group.group_id
    classic = to_classic(group, leaving, names, now_ms)
    holder = table.get(gid)
    if holder is not None:
        classic.offsets = holder.offsets
    records = table.drop_consumer(gid)
    table.groups[gid] = classic
    records += group_records(gid, classic.to_record())
    log.info(
        "consumer group %s: member %s left; downgraded to a classic group at generation %d",
        gid,
        leaving,
        classic.generation,
    )
    return classic, records
