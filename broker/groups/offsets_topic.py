"""The `__consumer_offsets` topic: which partition holds a group, and its records.

A group lives in partition `abs(java String.hashCode(group_id)) % num_partitions`
(Kafka's formula, so a Kafka cluster and this broker place groups alike). The topic
is compacted; records are keyed so that the last value per key is the state:

    key version 0/1  OffsetCommitKey   group, topic, partition  -> OffsetCommitValue
    key version 2    GroupMetadataKey  group                    -> GroupMetadataValue

Keys start with their int16 version, values with theirs. Values are written in
Kafka's schemas (OffsetCommitValue v3, GroupMetadataValue v3), so Kafka tooling can
read the topic; values v0-3 are read. A null value is a tombstone: the offset or
the group is gone.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence

from broker.protocol.primitives import (
    INT16,
    INT32,
    INT64,
    read_bytes,
    read_nullable_string,
    read_string,
    write_bytes,
    write_string,
)
from broker.protocol.records import BatchBuilder

DEFAULT_NUM_PARTITIONS = 50

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
_TWO_INT32 = struct.Struct(">ii")


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units,
    as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """Kafka's Utils.abs(hashCode) % n; Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only in v1 records written by old Kafka versions


@dataclasses.dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


class UnknownRecordVersion(ValueError):
    """A record this broker does not understand (a newer Kafka's record type)."""


def encode_offset_key(key: OffsetKey) -> bytes:
    return (
        INT16.pack(OFFSET_KEY_VERSION)
        + write_string(key.group)
        + write_string(key.topic)
        + INT32.pack(key.partition)
    )


def encode_group_key(key: GroupKey) -> bytes:
    return INT16.pack(GROUP_KEY_VERSION) + write_string(key.group)


def decode_key(buf: bytes) -> OffsetKey | GroupKey:
    (version,) = INT16.unpack_from(buf, 0)
    if version in (0, 1):
        group, pos = read_string(buf, 2)
        topic, pos = read_string(buf, pos)
        (partition,) = INT32.unpack_from(buf, pos)
        return OffsetKey(group, topic, partition)
    if version == 2:
        group, _ = read_string(buf, 2)
        return GroupKey(group)
    raise UnknownRecordVersion(f"key version {version}")


def encode_offset_value(v: OffsetValue) -> bytes:
    return b"".join(
        (
            INT16.pack(OFFSET_VALUE_VERSION),
            INT64.pack(v.offset),
            INT32.pack(v.leader_epoch),
            write_string(v.metadata),
            INT64.pack(v.commit_timestamp),
        )
    )


def decode_offset_value(buf: bytes) -> OffsetValue:
    (version,) = INT16.unpack_from(buf, 0)
    if not 0 <= version <= 3:
        raise UnknownRecordVersion(f"offset value version {version}")
    (offset,) = INT64.unpack_from(buf, 2)
    pos = 10
    leader_epoch = -1
    if version >= 3:
        (leader_epoch,) = INT32.unpack_from(buf, pos)
        pos += 4
    metadata, pos = read_string(buf, pos)
    (commit_ts,) = INT64.unpack_from(buf, pos)
    expire_ts = INT64.unpack_from(buf, pos + 8)[0] if version == 1 else -1
    return OffsetValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def encode_group_value(v: GroupValue) -> bytes:
    out = [
        INT16.pack(GROUP_VALUE_VERSION),
        write_string(v.protocol_type),
        INT32.pack(v.generation),
        write_string(v.protocol),
        write_string(v.leader),
        INT64.pack(v.current_state_timestamp),
        INT32.pack(len(v.members)),
    ]
    for m in v.members:
        out += [
            write_string(m.member_id),
            write_string(m.group_instance_id),
            write_string(m.client_id),
            write_string(m.client_host),
            INT32.pack(m.rebalance_timeout),
            INT32.pack(m.session_timeout),
            write_bytes(m.subscription),
            write_bytes(m.assignment),
        ]
    return b"".join(out)


def decode_group_value(buf: bytes) -> GroupValue:
    (version,) = INT16.unpack_from(buf, 0)
    if not 0 <= version <= 3:
        raise UnknownRecordVersion(f"group value version {version}")
    protocol_type, pos = read_string(buf, 2)
    (generation,) = INT32.unpack_from(buf, pos)
    protocol, pos = read_nullable_string(buf, pos + 4)
    leader, pos = read_nullable_string(buf, pos)
    state_ts = -1
    if version >= 2:
        (state_ts,) = INT64.unpack_from(buf, pos)
        pos += 8
    (count,) = INT32.unpack_from(buf, pos)
    pos += 4
    members = []
    for _ in range(count):
        member_id, pos = read_string(buf, pos)
        instance_id = None
        if version >= 3:
            instance_id, pos = read_nullable_string(buf, pos)
        client_id, pos = read_string(buf, pos)
        client_host, pos = read_string(buf, pos)
        if version >= 1:
            rebalance_timeout, session_timeout = _TWO_INT32.unpack_from(buf, pos)
            pos += 8
        else:
            (session_timeout,) = INT32.unpack_from(buf, pos)
            rebalance_timeout = session_timeout
            pos += 4
        subscription, pos = read_bytes(buf, pos)
        assignment, pos = read_bytes(buf, pos)
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def decode_record(
    key: bytes, value: bytes | None
) -> tuple[OffsetKey, OffsetValue | None] | tuple[GroupKey, GroupValue | None]:
    """Decode one record of the topic; raises UnknownRecordVersion, struct.error or
    ProtocolError (a ValueError) on input it cannot read."""
    k = decode_key(key)
    if isinstance(k, OffsetKey):
        return k, None if value is None else decode_offset_value(value)
    return k, None if value is None else decode_group_value(value)


def build_batch(records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed record batch of (key, value) pairs, ready for append."""
    builder = BatchBuilder()
    for key, value in records:
        builder.append(value, key=key, timestamp_ms=timestamp_ms)
    return builder.build()


DECODE_ERRORS = (ValueError, struct.error)
