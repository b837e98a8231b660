"""Where the group coordinator keeps `__consumer_offsets`: a small storage interface.

The coordinator needs two operations per offsets-topic partition: append one record
batch (and wait until it is durable as the topic's acks require), and read back every
(key, value) record on load. `OffsetsStore` is that interface;
`PartitionOffsetsStore` implements it over the broker's partitions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

from broker.log.common import AppendInfo
from broker.log.partition import PartitionLog
from broker.protocol.errors import ApiError, ErrorCode
from broker.protocol.records import iter_batches

_READ_CHUNK = 8 << 20


class StoreError(ApiError):
    """An append to `__consumer_offsets` failed with `code` (an ErrorCode)."""


class OffsetsStore(Protocol):
    async def append(self, partition: int, records: bytes) -> int:
        """Append one record batch; return its base offset once durable.
        Raises StoreError."""

    def read_all(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) record of the partition in offset order."""

    def read_batches(self, partition: int) -> Iterable:
        """Every record batch (RecordBatch views, control batches too) in offset order."""


def records_of(batches: Iterable) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every keyed data record in RecordBatch views."""
    for batch in batches:
        if batch.is_control:
            continue
        for r in batch.records():
            if r.key is not None:
                yield r.key, r.value


def records_in(buf) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every keyed record in a buffer of concatenated batches."""
    return records_of(iter_batches(buf))


class HostedPartition(Protocol):
    """What the store uses of a hosted Partition (broker/cluster/partition.py)."""

    @property
    def log(self) -> PartitionLog: ...

    def append_as_leader(self, records: bytes, required_acks: int) -> AppendInfo: ...


class PartitionOffsetsStore:
    """OffsetsStore over the broker's partitions of `__consumer_offsets`.

    `get_partition(index)` returns the hosted Partition (broker/cluster/partition.py)
    or None. Appends are acks=all: `wait_replicated(partition, end_offset)` is awaited
    after each one (the server's delayed-produce purgatory) and returns an ErrorCode.
    Owned by the broker; use on its event loop only.
    """

    def __init__(
        self,
        get_partition: Callable[[int], HostedPartition | None],
        wait_replicated: Callable[[HostedPartition, int], Awaitable[ErrorCode]],
    ):
        self._get_partition = get_partition
        self._wait_replicated = wait_replicated

    async def append(self, partition: int, records: bytes) -> int:
        p = self._get_partition(partition)
        if p is None:
            raise StoreError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"partition {partition} not here")
        try:
            info = p.append_as_leader(records, required_acks=-1)
        except ApiError as e:  # the partition's and the log's refusals
            raise StoreError(e.code, str(e)) from None
        except OSError as e:  # a failed write (disk full): the log stays as it was
            raise StoreError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        code = await self._wait_replicated(p, info.last_offset + 1)
        if code != ErrorCode.NONE:
            raise StoreError(ErrorCode(code))
        return info.first_offset

    def read_all(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        return records_of(self.read_batches(partition))

    def read_batches(self, partition: int) -> Iterator:
        p = self._get_partition(partition)
        if p is None:
            return
        plog = p.log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            batches = plog.read_batches(offset, _READ_CHUNK)
            if not batches:
                break
            yield from batches
            offset = batches[-1].next_offset
