"""The records of share groups (KIP-932) in `__consumer_offsets`, in the schemas of
Kafka 4.1, so that the coordinator that takes a group over knows it: its epochs, its
members and their assignments, and the share-partitions whose durable state it has.

    key version  key                                      value (version 0, flexible)
    10           ShareGroupMemberMetadataKey       member  rack, client, subscribed topics
    11           ShareGroupMetadataKey             group   Epoch, MetadataHash
    12           ShareGroupTargetAssignmentMetadataKey     AssignmentEpoch
    13           ShareGroupTargetAssignmentMemberKey       the member's target
    14           ShareGroupCurrentMemberAssignmentKey      the member's epochs, state and
                                                            assigned partitions
    15           ShareGroupStatePartitionMetadataKey group the initializing, initialized
                                                            and deleting topics

Kafka 4.0's ShareGroupPartitionMetadata (key version 9) is gone in 4.1 (the
subscribed topics became the MetadataHash of the group record): it is read and
ignored. logflume writes MetadataHash 0, since it notices topic changes by
recomputing assignments; a Kafka coordinator reading the records sees a changed
hash and moves the group epoch once. The share-partitions a group has are written as
initialized (logflume's leaders write a share-partition's first state when they load
it), none as initializing or deleting: a deletion removes them from the record only
once their durable state is deleted, so a deletion cut short is done again by the next.

Keys are not flexible (int16 version, then int16-length strings); values start with
their int16 version. A null value is a tombstone; the last record of each key is the
state. The records of a change are the difference between the group's records
before and after it (`snapshot`, `changes`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping

from broker.groups.coordinator_records import GroupRecord, RecordFamily
from broker.protocol.primitives import INT16
from broker.protocol.schema import INT8, INT32, INT64, STRING, UUID, Array, F
from broker.share.membership import ShareGroup, ShareMember, TopicLookup

PARTITION_METADATA = 9  # Kafka 4.0 only: read and ignored
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_METADATA = 12
TARGET_MEMBER = 13
CURRENT_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
KEY_VERSIONS = frozenset(range(PARTITION_METADATA, STATE_PARTITION_METADATA + 1))
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
STABLE = 0  # MemberState.STABLE: share groups have no revocation phase

_TOPIC_PARTITIONS = [F("topic_id", UUID), F("partitions", Array(INT32))]
_TOPIC_INFO = [F("topic_id", UUID), F("topic_name", STRING), F("partitions", Array(INT32))]

_VALUES = {
    MEMBER_METADATA: [
        F("rack_id", STRING, nullable="0+"),
        F("client_id", STRING),
        F("client_host", STRING),
        F("subscribed_topic_names", Array(STRING)),
    ],
    GROUP_METADATA: [F("epoch", INT32), F("metadata_hash", INT64)],
    TARGET_METADATA: [F("assignment_epoch", INT32)],
    TARGET_MEMBER: [F("topic_partitions", _TOPIC_PARTITIONS)],
    CURRENT_ASSIGNMENT: [
        F("member_epoch", INT32),
        F("previous_member_epoch", INT32),
        F("state", INT8),
        F("assigned_partitions", _TOPIC_PARTITIONS),
    ],
    STATE_PARTITION_METADATA: [
        F("initializing_topics", _TOPIC_INFO),
        F("initialized_topics", _TOPIC_INFO),
        F("deleting_topics", [F("topic_id", UUID), F("topic_name", STRING)]),
    ],
}
_FAMILY = RecordFamily(
    "share group", _VALUES, _MEMBER_KEYS, ignored=frozenset({PARTITION_METADATA})
)
ShareRecord = GroupRecord
key = _FAMILY.key
value = _FAMILY.value
decode = _FAMILY.decode

Record = tuple[bytes, bytes | None]
Snapshot = dict[bytes, bytes]  # key -> value, in the order Kafka writes them


def _by_id(assignment: Mapping[str, Iterable[int]], lookup: TopicLookup) -> list[dict]:
    """An assignment by topic name as Kafka writes it, by topic id (topics that no
    longer exist are left out)."""
    out = []
    for topic, partitions in sorted(assignment.items()):
        found = lookup(topic)
        if found is not None:
            out.append({"topic_id": found[0], "partitions": sorted(partitions)})
    return out


def _member_record(group_id: str, m: ShareMember) -> tuple[bytes, bytes]:
    return key(MEMBER_METADATA, group_id, m.member_id), value(
        MEMBER_METADATA,
        {
            "rack_id": m.rack_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed),
        },
    )


def snapshot(group: ShareGroup | None, lookup: TopicLookup) -> Snapshot:
    """Every record of `group` as it is now (None: a group that does not exist), in
    Kafka's order: members, epoch, targets, assignment epoch, current assignments,
    share-partitions."""
    if group is None:
        return {}
    gid = group.group_id
    members = list(group.members.values())
    out: Snapshot = dict(_member_record(gid, m) for m in members)
    out[key(GROUP_METADATA, gid)] = value(
        GROUP_METADATA, {"epoch": group.epoch, "metadata_hash": 0}
    )
    for m in members:
        out[key(TARGET_MEMBER, gid, m.member_id)] = value(
            TARGET_MEMBER, {"topic_partitions": _by_id(m.assignment, lookup)}
        )
    out[key(TARGET_METADATA, gid)] = value(
        TARGET_METADATA, {"assignment_epoch": group.assignment_epoch}
    )
    for m in members:
        out[key(CURRENT_ASSIGNMENT, gid, m.member_id)] = value(
            CURRENT_ASSIGNMENT,
            {
                "member_epoch": m.epoch,
                "previous_member_epoch": m.previous_epoch,
                "state": STABLE,
                "assigned_partitions": _by_id(m.assignment, lookup),
            },
        )
    initialized = []
    for topic, partitions in sorted(group.initialized.items()):
        found = lookup(topic)
        if found is not None:
            initialized.append(
                {"topic_id": found[0], "topic_name": topic, "partitions": sorted(partitions)}
            )
    out[key(STATE_PARTITION_METADATA, gid)] = value(
        STATE_PARTITION_METADATA,
        {"initializing_topics": [], "initialized_topics": initialized, "deleting_topics": []},
    )
    return out


# the order of tombstones: a member's current assignment, target and metadata (Kafka's
# order), then the group's own records
_TOMBSTONE_ORDER = {
    CURRENT_ASSIGNMENT: 0,
    TARGET_MEMBER: 1,
    MEMBER_METADATA: 2,
    TARGET_METADATA: 3,
    STATE_PARTITION_METADATA: 4,
    GROUP_METADATA: 5,
}


def changes(before: Snapshot, after: Snapshot) -> list[Record]:
    """The records that take `before` to `after`: new and changed records in
    `after`'s order, then tombstones of the keys gone, members' first."""
    records: list[Record] = [(k, v) for k, v in after.items() if before.get(k) != v]
    gone = [k for k in before if k not in after]
    gone.sort(key=lambda k: _TOMBSTONE_ORDER[INT16.unpack_from(k, 0)[0]])
    return records + [(k, None) for k in _members_first(gone)]


def _members_first(keys: list[bytes]) -> list[bytes]:
    """Tombstone keys grouped per member (current, target, metadata), then the
    group's."""
    per_member: dict[bytes, list[bytes]] = {}
    group_keys = []
    for k in keys:
        kind = INT16.unpack_from(k, 0)[0]
        if kind in _MEMBER_KEYS:
            member = k[2:]
            per_member.setdefault(member, []).append(k)
        else:
            group_keys.append(k)
    return [k for ks in per_member.values() for k in ks] + group_keys


@dataclasses.dataclass(slots=True)
class _Loading:
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, dict] = dataclasses.field(default_factory=dict)
    current: dict[str, dict] = dataclasses.field(default_factory=dict)
    initialized: dict[str, set[int]] = dataclasses.field(default_factory=dict)


def rebuild(
    records: Iterable[ShareRecord], lookup: TopicLookup, deadline_ms: int
) -> dict[str, ShareGroup]:
    """The share groups that `records` (in offset order) leave behind. Members keep
    their ids and epochs (they go on heartbeating as before the move) and get a new
    session, until `deadline_ms`."""
    loading: dict[str, _Loading] = {}
    for r in records:
        v = r.value
        if r.kind == PARTITION_METADATA:
            continue
        if r.kind == GROUP_METADATA and v is None:
            loading.pop(r.group_id, None)
            continue
        g = loading.setdefault(r.group_id, _Loading())
        if r.kind == GROUP_METADATA:
            g.epoch = v["epoch"] if v is not None else g.epoch
        elif r.kind == TARGET_METADATA:
            g.assignment_epoch = v["assignment_epoch"] if v is not None else 0
        elif r.kind == STATE_PARTITION_METADATA:
            g.initialized = {}
            for t in (v or {}).get("initializing_topics", []) + (v or {}).get(
                "initialized_topics", []
            ):
                g.initialized.setdefault(t["topic_name"], set()).update(t["partitions"])
        elif r.kind in (MEMBER_METADATA, CURRENT_ASSIGNMENT) and r.member_id is not None:
            table = g.members if r.kind == MEMBER_METADATA else g.current
            if v is None:
                table.pop(r.member_id, None)
            else:
                table[r.member_id] = v
    groups = {}
    for gid, g in loading.items():
        group = groups[gid] = ShareGroup(gid)
        group.epoch, group.assignment_epoch = g.epoch, g.assignment_epoch
        group.initialized = g.initialized
        names: dict[uuid.UUID, str] = {}
        for m in g.members.values():
            for topic in m["subscribed_topic_names"]:
                found = lookup(topic)
                if found is not None:
                    names[found[0]] = topic
        for mid, m in g.members.items():
            current = g.current.get(mid, {})
            assignment = {
                names[t["topic_id"]]: sorted(t["partitions"])
                for t in current.get("assigned_partitions", [])
                if t["topic_id"] in names
            }
            epoch = current.get("member_epoch", 0)
            group.members[mid] = ShareMember(
                mid,
                epoch,
                m["client_id"],
                m["client_host"],
                m["rack_id"],
                sorted(set(m["subscribed_topic_names"])),
                assignment,
                deadline_ms,
                sent_epoch=epoch,
                previous_epoch=current.get("previous_member_epoch", -1),
            )
    return groups
