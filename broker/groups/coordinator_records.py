"""The layout every record of the new group coordinator shares in `__consumer_offsets`
(Kafka's CoordinatorRecord for KIP-848 consumer groups and KIP-932 share groups): the
key is its int16 key version, the group id and, for member records, the member id; the
value is the int16 value version 0 and then the key version's fields, flexible v0. A
family (broker.groups.consumer.records, broker.share.records) gives its schemas."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from broker.protocol.primitives import INT16, read_string, write_string
from broker.protocol.schema import compile_message


@dataclasses.dataclass(frozen=True, slots=True)
class GroupRecord:
    """One decoded record: its key version, group, member (member keys) and value
    (None: a tombstone, or a key version the family reads and ignores)."""

    kind: int
    group_id: str
    member_id: str | None
    value: dict | None


class RecordFamily:
    """The records of one group type: `values` maps each key version to its value's
    fields; `member_keys` are the key versions whose key names a member; `ignored`
    ones decode without their value (a record type an older Kafka wrote)."""

    def __init__(
        self,
        name: str,
        values: Mapping[int, list],
        member_keys: frozenset[int],
        ignored: frozenset[int] = frozenset(),
    ):
        self.name = name
        self._codecs = {k: compile_message(f, 0, flexible=True) for k, f in values.items()}
        self._member_keys = member_keys
        self._ignored = ignored

    def key(self, kind: int, group_id: str, member_id: str | None = None) -> bytes:
        out = INT16.pack(kind) + write_string(group_id)
        return out + write_string(member_id) if member_id is not None else out

    def value(self, kind: int, fields: dict) -> bytes:
        out: list = [INT16.pack(0)]
        self._codecs[kind].encode(fields, out)
        return b"".join(out)

    def decode(self, key: bytes, value: bytes | None) -> GroupRecord:
        """A record of this family; raises ValueError or struct.error on input it
        cannot read."""
        (kind,) = INT16.unpack_from(key, 0)
        group_id, pos = read_string(key, 2)
        member_id = read_string(key, pos)[0] if kind in self._member_keys else None
        if value is None or kind in self._ignored:
            return GroupRecord(kind, group_id, member_id, None)
        (version,) = INT16.unpack_from(value, 0)
        if version != 0:
            raise ValueError(f"{self.name} record {kind}: value version {version}")
        fields, _ = self._codecs[kind].decode(memoryview(value), 2)
        return GroupRecord(kind, group_id, member_id, fields)
