"""One share-partition's in-flight records, as Kafka's SharePartition keeps them.

A share-partition is a (share group, topic, partition) seen by the partition's
leader. Its records from the share-partition start offset (SPSO, `start`) up to
the share-partition end offset (SPEO, `end`, the first offset never acquired) are
in flight, each in one state:

    AVAILABLE     may be acquired (again)
    ACQUIRED      locked for one member until its deadline
    ACKNOWLEDGED  accepted by the member that held it
    ARCHIVED      rejected, past the delivery count limit, or not a record (a gap
                  of a compacted log, a control batch): never delivered again

Acquiring a record counts a delivery. A record released (RELEASE, a lock that
expired, its member's session closed) becomes AVAILABLE again unless it was
delivered `delivery_limit` times already, then it is ARCHIVED. The start moves up
over the ACKNOWLEDGED and ARCHIVED records at its head; offsets below it are done
for the group. At most `max_in_flight` offsets are in flight
(`group.share.partition.max.record.locks`): no record past `start + max_in_flight`
is acquired until the start moves.

Pure: the caller passes the clock (milliseconds) and the batches of the log it read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from enum import IntEnum

from broker.protocol import ErrorCode


class RecordState(IntEnum):
    """Kafka's RecordState ids (the ones its share state records carry)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """AcknowledgeTypes of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclasses.dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class LogBatch:
    """What acquisition needs of one batch of the log: its offsets, and whether it
    holds records a consumer gets (a control batch does not)."""

    base_offset: int
    last_offset: int
    is_control: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Acquired:
    """A run of offsets acquired by one fetch, with their delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartitionState:
    """Event-loop only (or any single thread); never shared between threads."""

    def __init__(
        self,
        start: int,
        lock_duration_ms: int,
        delivery_limit: int,
        max_in_flight: int,
    ) -> None:
        self.start = start
        self.end = start
        self.state_epoch = 0  # the durable state's (broker.share.state_store)
        self.lock_duration_ms = lock_duration_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}

    # -- reading -----------------------------------------------------------------

    def next_fetch_offset(self) -> int | None:
        """Where a read of the log for this share-partition starts: the first AVAILABLE
        record in flight, else the end; None when the in-flight window is full and
        nothing in it is available."""
        for offset in range(self.start, self.end):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end if self.end < self.start + self.max_in_flight else None

    def state_of(self, offset: int) -> RecordState:
        """ACKNOWLEDGED below the start (done for the group), AVAILABLE past the end."""
        if offset < self.start:
            return RecordState.ACKNOWLEDGED
        entry = self.records.get(offset)
        return RecordState.AVAILABLE if entry is None else entry.state

    def acquired_by(self, member: str) -> int:
        return sum(
            1
            for r in self.records.values()
            if r.state is RecordState.ACQUIRED and r.member == member
        )

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            r.deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    # -- acquiring -----------------------------------------------------------------

    def acquire(
        self, member: str, batches: Iterable[LogBatch], max_records: int, now_ms: int
    ) -> list[Acquired]:
        """Acquire for `member` the available records of `batches` (read from the log at
        `next_fetch_offset()`, in offset order), whole batches at a time, until at
        least `max_records` are acquired. Returns the runs acquired."""
        acquired: list[Acquired] = []
        count = 0
        for batch in batches:
            if count >= max_records:
                break
            self._archive_gap(batch.base_offset)
            for offset in range(max(batch.base_offset, self.start), batch.last_offset + 1):
                if offset >= self.start + self.max_in_flight:
                    break
                if offset >= self.end:
                    self.records[offset] = InFlight(RecordState.AVAILABLE)
                    self.end = offset + 1
                    if batch.is_control:
                        self.records[offset].state = RecordState.ARCHIVED
                        continue
                entry = self.records[offset]
                if entry.state is not RecordState.AVAILABLE:
                    continue
                entry.state = RecordState.ACQUIRED
                entry.delivery_count += 1
                entry.member = member
                entry.deadline_ms = now_ms + self.lock_duration_ms
                _extend(acquired, offset, entry.delivery_count)
                count += 1
        self._advance()
        return acquired

    def _archive_gap(self, base_offset: int) -> None:
        """Offsets between the end and the next batch are not records (a compacted
        log's gaps): archived, so that the start can pass them."""
        while self.end < base_offset and self.end < self.start + self.max_in_flight:
            self.records[self.end] = InFlight(RecordState.ARCHIVED)
            self.end += 1

    # -- acknowledging and releasing -----------------------------------------------------

    def acknowledge(self, member: str, first: int, last: int, types: list[int]) -> ErrorCode:
        """Apply one acknowledgement batch: one type for every offset of first..last, or
        one type per offset. Every offset must be ACQUIRED by `member` (a GAP may name
        an offset that was no record); nothing changes otherwise
        (INVALID_RECORD_STATE), or when the batch is malformed (INVALID_REQUEST)."""
        if last < first or len(types) not in (1, last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in AckType._value2member_map_ for t in types):
            return ErrorCode.INVALID_REQUEST
        for offset, ack in self._each(first, last, types):
            entry = self.records.get(offset)
            if entry is None or offset < self.start:
                return ErrorCode.INVALID_RECORD_STATE
            if entry.state is RecordState.ACQUIRED and entry.member == member:
                continue
            if ack == AckType.GAP and entry.state is RecordState.ARCHIVED:
                continue
            return ErrorCode.INVALID_RECORD_STATE
        for offset, ack in self._each(first, last, types):
            entry = self.records[offset]
            if entry.state is not RecordState.ACQUIRED:
                continue
            if ack == AckType.ACCEPT:
                self._settle(entry, RecordState.ACKNOWLEDGED)
            elif ack == AckType.RELEASE:
                self._release(entry)
            else:
                self._settle(entry, RecordState.ARCHIVED)
        self._advance()
        return ErrorCode.NONE

    @staticmethod
    def _each(first: int, last: int, types: list[int]) -> Iterator[tuple[int, int]]:
        if len(types) == 1:
            return ((offset, types[0]) for offset in range(first, last + 1))
        return zip(range(first, last + 1), types, strict=True)

    def release_member(self, member: str) -> int:
        """Release every record `member` holds (its share session closed); returns how
        many."""
        released = 0
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.member == member:
                self._release(entry)
                released += 1
        self._advance()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release the records whose lock passed its deadline; returns how many."""
        released = 0
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.deadline_ms <= now_ms:
                self._release(entry)
                released += 1
        self._advance()
        return released

    def move_start(self, offset: int) -> None:
        """The log no longer holds records below `offset` (retention, DeleteRecords):
        they are out of the share-partition too."""
        while self.start < offset:
            self.records.pop(self.start, None)
            self.start += 1
        self.end = max(self.end, self.start)

    def _release(self, entry: InFlight) -> None:
        if entry.delivery_count >= self.delivery_limit:
            self._settle(entry, RecordState.ARCHIVED)
        else:
            self._settle(entry, RecordState.AVAILABLE)

    @staticmethod
    def _settle(entry: InFlight, state: RecordState) -> None:
        entry.state = state
        entry.member = None
        entry.deadline_ms = 0

    def _advance(self) -> None:
        while self.start < self.end and self.records[self.start].state in (
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVED,
        ):
            del self.records[self.start]
            self.start += 1

    # -- durable form ------------------------------------------------------------------

    def snapshot(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(start, [(first, last, state, delivery count), ...]): the in-flight records in
        runs, an ACQUIRED record saved as AVAILABLE (a lock does not outlive the
        leader that granted it), as Kafka's share state batches."""
        runs: list[tuple[int, int, int, int]] = []
        for offset in range(self.start, self.end):
            entry = self.records[offset]
            state = RecordState.AVAILABLE if entry.state is RecordState.ACQUIRED else entry.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (state, entry.delivery_count):
                runs[-1] = (runs[-1][0], offset, state, entry.delivery_count)
            else:
                runs.append((offset, offset, int(state), entry.delivery_count))
        return self.start, runs

    def restore(self, start: int, runs: Iterable[tuple[int, int, int, int]]) -> None:
        """Load a `snapshot()`; replaces what is in memory."""
        self.start = self.end = start
        self.records = {}
        for first, last, state, count in runs:
            for offset in range(max(first, start), last + 1):
                while self.end < offset:  # a hole in the runs: nothing known, available
                    self.records[self.end] = InFlight(RecordState.AVAILABLE)
                    self.end += 1
                self.records[offset] = InFlight(RecordState(state), count)
                self.end = offset + 1
        self._advance()


def _extend(runs: list[Acquired], offset: int, delivery_count: int) -> None:
    if runs and runs[-1].last_offset == offset - 1 and runs[-1].delivery_count == delivery_count:
        runs[-1] = Acquired(runs[-1].first_offset, offset, delivery_count)
    else:
        runs.append(Acquired(offset, offset, delivery_count))
