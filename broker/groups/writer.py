"""How the group coordinator writes `__consumer_offsets`: record batches appended to
the group's partition through an `OffsetsStore`, and the ErrorCode clients get when
an append fails.

A write someone waits for (a commit, the leader's assignment) is `write`; a record
nobody waits for (a group that became Empty, tombstones) is queued and written by
the next `flush`, which the coordinator runs after each request and timer tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from broker.groups.offsets_topic import (
    GroupKey,
    GroupValue,
    build_batch,
    encode_group_key,
    encode_group_value,
    partition_for,
)
from broker.groups.storage import OffsetsStore, StoreError
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Records = Sequence[tuple[bytes, bytes | None]]


def group_records(group_id: str, value: GroupValue) -> Records:
    return [(encode_group_key(GroupKey(group_id)), encode_group_value(value))]


class RecordWriter:
    """Owned by the GroupCoordinator; used on its event loop only."""

    def __init__(self, store: OffsetsStore, num_partitions: int):
        self._store = store
        self._num_partitions = num_partitions
        self._outbox: list[tuple[int, Records]] = []

    async def write(self, group_id: str, records: Records, now_ms: int) -> ErrorCode:
        """Append `records` to the group's partition; the ErrorCode Kafka gives
        clients when that fails."""
        return await self._append(partition_for(group_id, self._num_partitions), records, now_ms)

    async def write_group(self, group_id: str, value: GroupValue, now_ms: int) -> ErrorCode:
        return await self.write(group_id, group_records(group_id, value), now_ms)

    def queue(self, group_id: str, records: Records) -> None:
        """Write `records` with the next flush."""
        self._outbox.append((partition_for(group_id, self._num_partitions), records))

    def queue_group(self, group_id: str, value: GroupValue) -> None:
        self.queue(group_id, group_records(group_id, value))

    async def flush(self, now_ms: int) -> None:
        """Write the queued records; a failure is logged (nobody waits for them)."""
        while self._outbox:
            partition, records = self._outbox.pop(0)
            err = await self._append(partition, records, now_ms)
            if err:
                log.warning("__consumer_offsets-%d: write failed: %s", partition, err.name)

    async def write_batch(self, group_id: str, batch: bytes) -> ErrorCode:
        """Append one ready-made batch (a transactional offset commit)."""
        return await self._append_batch(partition_for(group_id, self._num_partitions), batch)

    async def _append(self, partition: int, records: Records, now_ms: int) -> ErrorCode:
        return await self._append_batch(partition, build_batch(records, now_ms))

    async def _append_batch(self, partition: int, batch: bytes) -> ErrorCode:
        """The append completes even if the caller is cancelled."""
        try:
            await asyncio.shield(self._store.append(partition, batch))
        except StoreError as e:
            # the mapping of Kafka's GroupMetadataManager.storeGroup
            if e.code in (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.KAFKA_STORAGE_ERROR,
            ):
                return ErrorCode.NOT_COORDINATOR
            if e.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                return ErrorCode.UNKNOWN_SERVER_ERROR
            if e.code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                return ErrorCode.PRODUCER_FENCED  # a transactional commit of a zombie
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE
