"""The records of consumer groups (KIP-848) in `__consumer_offsets`, in Kafka's
schemas, so that the coordinator that takes a group over resumes its epochs, members
and assignments.

    key version  key                               value (version 0, flexible)
    3            ConsumerGroupMetadataKey          group   ConsumerGroupMetadataValue: Epoch
    4            ConsumerGroupPartitionMetadataKey group   the subscribed topics' ids, names
                                                            and partition counts (no racks)
    5            ConsumerGroupMemberMetadataKey    member  subscription, client, timeouts;
                                                            a classic member's session timeout
                                                            and protocols (tagged field 0)
    6            ConsumerGroupTargetAssignmentMetadataKey  AssignmentEpoch
    7            ConsumerGroupTargetAssignmentMemberKey    the member's target
    8            ConsumerGroupCurrentMemberAssignmentKey   the member's epochs, state,
                                                            assigned and revoking partitions

Keys are not flexible (int16 version, then int16-length strings); values start with
their int16 version. A null value is a tombstone. The last record of each key is the
state, as with the classic records (offsets_topic.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from broker.groups.consumer.group import ClassicMetadata, ConsumerGroup, ConsumerMember
from broker.groups.consumer.reconcile import MemberAssignment, MemberState
from broker.groups.coordinator_records import GroupRecord, RecordFamily
from broker.protocol.schema import (
    BYTES,
    INT8,
    INT32,
    STRING,
    UUID,
    Array,
    F,
    Struct,
)

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1))
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})

_TOPIC_PARTITIONS = [F("topic_id", UUID), F("partitions", Array(INT32))]

_VALUES = {
    GROUP_METADATA: [F("epoch", INT32)],
    PARTITION_METADATA: [
        F(
            "topics",
            [
                F("topic_id", UUID),
                F("topic_name", STRING),
                F("num_partitions", INT32),
                F("partition_metadata", [F("partition", INT32), F("racks", Array(STRING))]),
            ],
        )
    ],
    MEMBER_METADATA: [
        F("instance_id", STRING, nullable="0+"),
        F("rack_id", STRING, nullable="0+"),
        F("client_id", STRING),
        F("client_host", STRING),
        F("subscribed_topic_names", Array(STRING)),
        F("subscribed_topic_regex", STRING, nullable="0+"),
        F("rebalance_timeout_ms", INT32, default=-1),
        F("server_assignor", STRING, nullable="0+"),
        F(
            "classic_member_metadata",
            Struct(
                (
                    F("session_timeout_ms", INT32),
                    F("supported_protocols", [F("name", STRING), F("metadata", BYTES)]),
                )
            ),
            default=None,
            tag=0,
        ),
    ],
    TARGET_METADATA: [F("assignment_epoch", INT32)],
    TARGET_MEMBER: [F("topic_partitions", _TOPIC_PARTITIONS)],
    CURRENT_ASSIGNMENT: [
        F("member_epoch", INT32),
        F("previous_member_epoch", INT32),
        F("state", INT8),
        F("assigned_partitions", _TOPIC_PARTITIONS),
        F("partitions_pending_revocation", _TOPIC_PARTITIONS),
    ],
}
_FAMILY = RecordFamily("consumer group", _VALUES, _MEMBER_KEYS)
ConsumerRecord = GroupRecord
_key = _FAMILY.key
_value = _FAMILY.value
decode = _FAMILY.decode

_STATE_BYTES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
    MemberState.UNKNOWN: 127,
}
_BYTE_STATES = {v: k for k, v in _STATE_BYTES.items()}

Record = tuple[bytes, bytes | None]


def _partitions(assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[dict]:
    return [
        {"topic_id": t, "partitions": sorted(ps)}
        for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
    ]


def assignment_of(items: list[dict]) -> dict[uuid.UUID, frozenset[int]]:
    return {i["topic_id"]: frozenset(i["partitions"]) for i in items if i["partitions"]}


def epoch_record(group_id: str, epoch: int) -> Record:
    return _key(GROUP_METADATA, group_id), _value(GROUP_METADATA, {"epoch": epoch})


def member_record(group_id: str, member) -> Record:
    """ConsumerGroupMemberMetadata of a ConsumerMember (group.py)."""
    return _key(MEMBER_METADATA, group_id, member.member_id), _value(
        MEMBER_METADATA,
        {
            "instance_id": member.instance_id,
            "rack_id": member.rack_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": list(member.subscribed_names),
            "subscribed_topic_regex": member.subscribed_regex,
            "rebalance_timeout_ms": member.rebalance_timeout_ms,
            "server_assignor": member.server_assignor,
            "classic_member_metadata": None
            if member.classic is None
            else {
                "session_timeout_ms": member.classic.session_timeout_ms,
                "supported_protocols": [
                    {"name": n, "metadata": m} for n, m in member.classic.protocols
                ],
            },
        },
    )


def partition_metadata_record(group_id: str, topics: Mapping[uuid.UUID, tuple[str, int]]) -> Record:
    """The subscribed topics the group epoch was computed from."""
    return _key(PARTITION_METADATA, group_id), _value(
        PARTITION_METADATA,
        {
            "topics": [
                {"topic_id": t, "topic_name": n, "num_partitions": c, "partition_metadata": []}
                for t, (n, c) in sorted(topics.items(), key=lambda i: str(i[0]))
            ]
        },
    )


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(TARGET_METADATA, group_id), _value(TARGET_METADATA, {"assignment_epoch": epoch})


def target_record(group_id: str, member_id: str, assignment) -> Record:
    return _key(TARGET_MEMBER, group_id, member_id), _value(
        TARGET_MEMBER, {"topic_partitions": _partitions(assignment)}
    )


def current_record(group_id: str, member_id: str, a: MemberAssignment) -> Record:
    return _key(CURRENT_ASSIGNMENT, group_id, member_id), _value(
        CURRENT_ASSIGNMENT,
        {
            "member_epoch": a.member_epoch,
            "previous_member_epoch": a.previous_member_epoch,
            "state": _STATE_BYTES[a.state],
            "assigned_partitions": _partitions(a.assigned),
            "partitions_pending_revocation": _partitions(a.revoking),
        },
    )


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member gone: its current assignment, target and metadata, in Kafka's order."""
    return [
        (_key(CURRENT_ASSIGNMENT, group_id, member_id), None),
        (_key(TARGET_MEMBER, group_id, member_id), None),
        (_key(MEMBER_METADATA, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Record]:
    return [
        (_key(TARGET_METADATA, group_id), None),
        (_key(PARTITION_METADATA, group_id), None),
        (_key(GROUP_METADATA, group_id), None),
    ]


def state_of(byte: int) -> MemberState:
    return _BYTE_STATES.get(byte, MemberState.UNKNOWN)


def _classic(v: dict | None) -> ClassicMetadata | None:
    if v is None or not v["supported_protocols"]:
        return None
    return ClassicMetadata(
        v["session_timeout_ms"],
        tuple((p["name"], bytes(p["metadata"])) for p in v["supported_protocols"]),
    )


def rebuild(records: list[ConsumerRecord]) -> dict[str, ConsumerGroup]:
    """The consumer groups that `records` (in offset order) leave behind."""
    epochs: dict[str, int] = {}
    assignment_epochs: dict[str, int] = {}
    subscribed: dict[str, dict[uuid.UUID, tuple[str, int]]] = {}
    members: dict[str, dict[str, ConsumerMember]] = {}
    targets: dict[str, dict[str, dict]] = {}
    current: dict[str, dict[str, MemberAssignment]] = {}
    for r in records:
        v = r.value
        if r.kind == GROUP_METADATA:
            if v is None:
                for d in (epochs, assignment_epochs, subscribed, members, targets, current):
                    d.pop(r.group_id, None)
            else:
                epochs[r.group_id] = v["epoch"]
        elif r.kind == TARGET_METADATA and v is not None:
            assignment_epochs[r.group_id] = v["assignment_epoch"]
        elif r.kind == PARTITION_METADATA and v is not None:
            subscribed[r.group_id] = {
                t["topic_id"]: (t["topic_name"], t["num_partitions"]) for t in v["topics"]
            }
        elif r.member_id is not None:
            tables: dict[int, dict[str, dict]] = {
                MEMBER_METADATA: members,
                TARGET_MEMBER: targets,
                CURRENT_ASSIGNMENT: current,
            }
            per_group = tables[r.kind].setdefault(r.group_id, {})
            if v is None:
                per_group.pop(r.member_id, None)
            elif r.kind == MEMBER_METADATA:
                per_group[r.member_id] = ConsumerMember(
                    r.member_id,
                    v["instance_id"],
                    v["rack_id"],
                    v["client_id"],
                    v["client_host"],
                    v["rebalance_timeout_ms"],
                    tuple(v["subscribed_topic_names"]),
                    v["subscribed_topic_regex"],
                    v["server_assignor"],
                    classic=_classic(v["classic_member_metadata"]),
                )
            elif r.kind == TARGET_MEMBER:
                per_group[r.member_id] = assignment_of(v["topic_partitions"])
            else:
                per_group[r.member_id] = MemberAssignment(
                    state_of(v["state"]),
                    v["member_epoch"],
                    v["previous_member_epoch"],
                    assignment_of(v["assigned_partitions"]),
                    assignment_of(v["partitions_pending_revocation"]),
                )
    groups = {}
    for gid, epoch in epochs.items():
        group = groups[gid] = ConsumerGroup(gid)
        group.epoch = epoch
        group.assignment_epoch = assignment_epochs.get(gid, 0)
        group.subscribed_topics = subscribed.get(gid, {})
        for mid, member in members.get(gid, {}).items():
            member.assignment = current.get(gid, {}).get(mid, MemberAssignment())
            group.add(member)
            if mid in targets.get(gid, {}):
                group.target[mid] = targets[gid][mid]
    return groups


def created_records(group: ConsumerGroup) -> list[Record]:
    """Every record of a group made whole at once (a classic group upgraded), in
    Kafka's order: members, epoch, target, assignment epoch, current assignments."""
    gid = group.group_id
    records = [member_record(gid, m) for m in group.members.values()]
    records.append(epoch_record(gid, group.epoch))
    records += [target_record(gid, mid, a) for mid, a in group.target.items()]
    records.append(target_epoch_record(gid, group.assignment_epoch))
    records += [current_record(gid, m.member_id, m.assignment) for m in group.members.values()]
    return records
