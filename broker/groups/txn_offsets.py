"""Transactional offset commits (KIP-98): TxnOffsetCommit, and the markers that
make them visible or drop them.

A transactional producer's offsets are appended to the group's `__consumer_offsets`
partition as a transactional batch carrying the producer's id and epoch, and held
pending per (group, producer id) until the transaction coordinator writes the end
marker to that partition (`complete`): on commit they become the group's committed
offsets, on abort they are dropped. While an offset is pending, OffsetFetch with
`require_stable` answers UNSTABLE_OFFSET_COMMIT for its partition.

Sequences: the batches carry real sequence numbers per producer id and epoch (0, 1,
... per batch of one epoch), so the partition's producer state accepts them as any
idempotent producer's; `note_sequence` learns the last one on load.

Replay on load (`replay`): transactional records are held per producer id until the
producer's marker in the log; committed ones are applied at the marker, aborted ones
dropped, and those still without a marker become pending again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from broker.groups.offsets_topic import (
    DECODE_ERRORS,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
)
from broker.groups.table import GroupTable
from broker.groups.writer import RecordWriter
from broker.protocol.control import ControlType, control_type
from broker.protocol.errors import ErrorCode
from broker.protocol.records import BatchBuilder

TopicPartition = tuple[str, int]
Records = list[tuple[bytes, bytes | None]]


class TxnOffsets:
    """Pending transactional offsets of the groups in `table`. Owned by the
    GroupCoordinator; used on its event loop only."""

    def __init__(self, table: GroupTable, writer: RecordWriter, metadata_max_bytes: int):
        self._table = table
        self._writer = writer
        self._metadata_max_bytes = metadata_max_bytes
        # group id -> producer id -> {tp: value}
        self.pending: dict[str, dict[int, dict[TopicPartition, OffsetValue]]] = {}
        # (partition, producer id) -> (epoch, next sequence)
        self._sequences: dict[tuple[int, int], tuple[int, int]] = {}

    def note_sequence(self, partition: int, producer_id: int, epoch: int, last: int) -> None:
        self._sequences[(partition, producer_id)] = (epoch, last + 1)

    def _next_sequence(self, partition: int, producer_id: int, epoch: int, count: int) -> int:
        """The base sequence of the producer's next batch of `count` records in
        `partition` (sequences count records per partition and restart at 0 with a
        new epoch)."""
        key = (partition, producer_id)
        known_epoch, seq = self._sequences.get(key, (epoch, 0))
        if known_epoch != epoch:
            seq = 0
        self._sequences[key] = (epoch, (seq + count) & 0x7FFFFFFF)
        return seq

    def is_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in offsets for offsets in self.pending.get(group_id, {}).values())

    async def commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, tuple[int, int, str | None]],
        now_ms: int,
        check_member,
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit of {tp: (offset, leader_epoch, metadata)}; `check_member()`
        is the group/member validation (an ErrorCode)."""
        err = self._table.coordinator_error(group_id) or check_member()
        if err:
            return dict.fromkeys(offsets, err)
        results: dict[TopicPartition, ErrorCode] = {}
        values: dict[TopicPartition, OffsetValue] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode()) > self._metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                values[tp] = OffsetValue(offset, metadata, now_ms, leader_epoch)
        if values:
            partition = self._table.partition_for(group_id)
            builder = BatchBuilder(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=self._next_sequence(
                    partition, producer_id, producer_epoch, len(values)
                ),
                is_transactional=True,
            )
            for tp, v in values.items():
                builder.append(
                    encode_offset_value(v),
                    key=encode_offset_key(OffsetKey(group_id, *tp)),
                    timestamp_ms=now_ms,
                )
            err = await self._writer.write_batch(group_id, builder.build())
            if err:
                self._sequences.pop((partition, producer_id), None)
            else:
                self.pending.setdefault(group_id, {}).setdefault(producer_id, {}).update(values)
            results.update(dict.fromkeys(values, err))
        return results

    def complete(self, partition: int, producer_id: int, commit: bool) -> None:
        """The end marker of `producer_id`'s transaction is in `partition`."""
        for group_id in list(self.pending):
            if self._table.partition_for(group_id) != partition:
                continue
            offsets = self.pending[group_id].pop(producer_id, None)
            if not self.pending[group_id]:
                del self.pending[group_id]
            if offsets and commit:
                group = self._table.get(group_id) or self._table.create(group_id, 0)
                group.offsets.update(offsets)

    def unload(self, partition: int) -> None:
        for group_id in [g for g in self.pending if self._table.partition_for(g) == partition]:
            del self.pending[group_id]
        for key in [k for k in self._sequences if k[0] == partition]:
            del self._sequences[key]

    def replay(self, partition: int, batches: Iterable) -> Iterator[tuple[bytes, bytes | None]]:
        """The (key, value) records of `batches` (RecordBatch views in offset order) a
        group table loads: plain records as they come, transactional ones when their
        commit marker comes; transactions without a marker become pending."""
        held: dict[int, Records] = {}
        for batch in batches:
            pid = batch.producer_id
            if batch.is_transactional and batch.base_sequence >= 0:
                self.note_sequence(partition, pid, batch.producer_epoch, batch.last_sequence)
            if batch.is_control:
                records = batch.records()
                if not records:
                    continue
                try:
                    kind = control_type(records[0].key)
                except ValueError:
                    continue
                done = held.pop(pid, [])
                if kind == ControlType.COMMIT:
                    yield from done
                continue
            for r in batch.records():
                if r.key is None:
                    continue
                if batch.is_transactional:
                    held.setdefault(pid, []).append((r.key, r.value))
                else:
                    yield r.key, r.value
        for pid, records in held.items():
            for key, value in records:
                try:
                    k = decode_key(key)
                    if isinstance(k, OffsetKey) and value is not None:
                        tp = (k.topic, k.partition)
                        group = self.pending.setdefault(k.group, {}).setdefault(pid, {})
                        group[tp] = decode_offset_value(value)
                except DECODE_ERRORS:
                    continue
