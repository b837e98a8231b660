"""The share coordinator: durable share-partition state on `__share_group_state`.

Kafka keeps a share-partition's state (start offset, state epoch, and the delivery
state and count of the records in flight) in `__share_group_state`, behind the
share-coordinator RPCs; logflume does the same with a record format of its own. The
state of (group, topic id, partition) lives in the partition of
`__share_group_state` chosen by the hash of "group:topic id:partition" (Kafka's
share coordinator key), and the leader of that partition is its share coordinator:
it answers ReadShareGroupState and WriteShareGroupState (broker/server/handlers/
share_state.py), and the share-partition's leader (broker.share.persister) calls it,
here or on another broker.

A write merges the batches it carries over the stored state (a later batch wins for
the offsets it covers; offsets below the start offset are dropped), appends the
result as one record (key: the JSON [group, topic id hex, partition]; value: the
JSON state, null for a deleted one) through the partition's leader with acks=all
(`broker.groups.storage.PartitionOffsetsStore`, as the group coordinator writes
`__consumer_offsets`), and answers once it is replicated: the state survives the
failure of any broker but the last in-sync replica. The topic is compacted: the last
record of a key is its state. A new leader of a partition replays it (`load_partition`).

Fencing, as Kafka's share coordinator: a read or write from an older leader epoch of
the data partition than one seen already answers FENCED_LEADER_EPOCH (a read with
leader epoch -1, the admin's, is never fenced), a write or an initialization of an
older state epoch FENCED_STATE_EPOCH. `initialize` replaces a state (AlterShareGroup-
Offsets, through InitializeShareGroupState) and `delete` forgets one
(DeleteShareGroupState).

Event-loop only.
"""

from __future__ import annotations

import dataclasses
import logging

import orjson

from broker.groups.offsets_topic import java_string_hashcode
from broker.groups.storage import OffsetsStore, StoreError
from broker.protocol import ErrorCode
from broker.protocol.records import BatchBuilder

log = logging.getLogger(__name__)

StateKey = tuple[str, str, int]  # (group id, topic id hex, partition)
Batch = tuple[int, int, int, int]  # (first offset, last offset, delivery state, count)


@dataclasses.dataclass(slots=True)
class ShareState:
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1  # -1: never initialized
    batches: list[Batch] = dataclasses.field(default_factory=list)

    def to_json(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> ShareState:
        raw = orjson.loads(data)
        return cls(
            int(raw["state_epoch"]),
            int(raw["leader_epoch"]),
            int(raw["start_offset"]),
            [(int(a), int(b), int(c), int(d)) for a, b, c, d in raw["batches"]],
        )


def state_partition(group_id: str, topic_id_hex: str, partition: int, num_partitions: int) -> int:
    """Kafka's share coordinator key "group:topicId:partition", hashed as group ids are."""
    h = java_string_hashcode(f"{group_id}:{topic_id_hex}:{partition}")
    return (0 if h == -(2**31) else abs(h)) % num_partitions


def merge(old: list[Batch], new: list[Batch], start: int) -> list[Batch]:
    """`new` over `old` offset by offset, cut below `start`, back into runs."""
    per_offset: dict[int, tuple[int, int]] = {}
    for batches in (old, new):
        for first, last, state, count in batches:
            for offset in range(max(first, start), last + 1):
                per_offset[offset] = (state, count)
    runs: list[Batch] = []
    for offset in sorted(per_offset):
        state, count = per_offset[offset]
        if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (state, count):
            runs[-1] = (runs[-1][0], offset, state, count)
        else:
            runs.append((offset, offset, state, count))
    return runs


class ShareStateStore:
    """The share states of the `__share_group_state` partitions led here."""

    def __init__(self, store: OffsetsStore, num_partitions: int) -> None:
        self.store = store
        self.num_partitions = num_partitions
        self.owned: set[int] = set()
        self.states: dict[StateKey, ShareState] = {}

    def partition_for(self, key: StateKey) -> int:
        return state_partition(key[0], key[1], key[2], self.num_partitions)

    def load_partition(self, partition: int) -> None:
        """Become the share coordinator of `partition`: replay its records."""
        for key, value in self.store.read_all(partition):
            group, topic_id, index = orjson.loads(key)
            skey = (str(group), str(topic_id), int(index))
            if value is None:
                self.states.pop(skey, None)
            else:
                self.states[skey] = ShareState.from_json(value)
        self.owned.add(partition)

    def unload_partition(self, partition: int) -> None:
        self.owned.discard(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]

    def read(self, key: StateKey, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        if self.partition_for(key) not in self.owned:
            return ErrorCode.NOT_COORDINATOR, None
        state = self.states.get(key)
        if state is None:
            return ErrorCode.NONE, ShareState()
        if leader_epoch != -1 and leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        return ErrorCode.NONE, state

    async def write(
        self,
        key: StateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[Batch],
    ) -> ErrorCode:
        partition = self.partition_for(key)
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        old = self.states.get(key) or ShareState()
        if leader_epoch < old.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        start = start_offset if start_offset >= 0 else old.start_offset
        new = ShareState(state_epoch, leader_epoch, start, merge(old.batches, batches, start))
        return await self._append(key, partition, new)

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState: replace the share-partition's state by a fresh one
        (`start_offset`, -1: the share-partition's leader starts it as
        `share.auto.offset.reset` says; no records in flight) of `state_epoch`, which
        must not be older than the stored one. The group coordinator's
        AlterShareGroupOffsets, with the stored epoch + 1: a leader still writing under
        the old epoch is fenced."""
        partition = self.partition_for(key)
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        new = ShareState(state_epoch, old.leader_epoch if old else -1, start_offset, [])
        return await self._append(key, partition, new)

    async def delete(self, key: StateKey) -> ErrorCode:
        """Forget a share-partition's state (DeleteShareGroupState: its group, or the
        group's offsets of its topic, were deleted): a tombstone. A state never written
        is gone already."""
        partition = self.partition_for(key)
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        if key not in self.states:
            return ErrorCode.NONE
        return await self._append(key, partition, None)

    async def _append(self, key: StateKey, partition: int, state: ShareState | None) -> ErrorCode:
        """Write `state` (None: a tombstone) with acks=all, then hold it here."""
        builder = BatchBuilder()
        builder.append(None if state is None else state.to_json(), key=orjson.dumps(list(key)))
        try:
            await self.store.append(partition, builder.build())
        except StoreError as e:
            log.warning("share state %s not written: %s", key, e)
            return e.code
        if partition in self.owned:
            if state is None:
                self.states.pop(key, None)
            else:
                self.states[key] = state
        return ErrorCode.NONE
