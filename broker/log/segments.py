"""LogSegments: the ordered segments of one partition log (Kafka's LogSegments).

It owns the list and the one question every layer asks of it, "which segment holds
offset X": `floor(offset)` bisects a list of base offsets that is kept in step with
the segments (never rebuilt per call), so reads, flushes, the read_committed search
of aborted transactions and producer-state replays all find their starting segment
the same way. Offsets below the first segment's base resolve to the first segment.

What it does not own: deciding when to roll, delete or truncate (the local log and
the partition log do) and the files themselves (each `LogSegment` does).

Owned by one LocalLog (its event loop); not thread-safe.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from typing import overload

from broker.log.segment import LogSegment
from broker.protocol.records import RecordBatch


class LogSegments:
    """Segments in base-offset order, the last one active; never empty once a log
    is open."""

    def __init__(self, segments: list[LogSegment]):
        self._segments = list(segments)
        self._bases = [s.base_offset for s in self._segments]

    # -- the list ------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    @overload
    def __getitem__(self, i: int) -> LogSegment: ...

    @overload
    def __getitem__(self, i: slice) -> list[LogSegment]: ...

    def __getitem__(self, i: int | slice) -> LogSegment | list[LogSegment]:
        return self._segments[i]

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first(self) -> LogSegment:
        return self._segments[0]

    def add(self, segment: LogSegment) -> None:
        """Append a new last (active) segment; its base must be above every other."""
        if self._bases and segment.base_offset <= self._bases[-1]:
            raise ValueError(f"segment {segment.base_offset} does not follow {self._bases[-1]}")
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def remove_first(self) -> LogSegment:
        self._bases.pop(0)
        return self._segments.pop(0)

    def remove_last(self) -> LogSegment:
        self._bases.pop()
        return self._segments.pop()

    def replace(self, i: int, segment: LogSegment) -> LogSegment:
        """Put `segment` (same base offset) in place of segment `i`; returns the old one."""
        old = self._segments[i]
        if segment.base_offset != old.base_offset:
            raise ValueError(f"segment {segment.base_offset} cannot replace {old.base_offset}")
        self._segments[i] = segment
        return old

    def reset(self, segment: LogSegment) -> None:
        """Make `segment` the only one (the others deleted by the caller)."""
        self._segments = [segment]
        self._bases = [segment.base_offset]

    # -- lookup ----------------------------------------------------------------------

    def floor_index(self, offset: int) -> int:
        """Index of the last segment whose base offset is <= `offset` (0 below the first)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def floor(self, offset: int) -> LogSegment:
        """The segment that holds `offset`, if any segment does."""
        return self._segments[self.floor_index(offset)]

    def from_floor(self, offset: int) -> list[LogSegment]:
        """The segment holding `offset` and every later one."""
        return self._segments[self.floor_index(offset) :]

    def batches_from(self, offset: int) -> Iterator[tuple[LogSegment, RecordBatch]]:
        """(segment, batch) from the batch holding `offset` to the log end: headers
        read 61 bytes at a time (producer state needs no records), control batches
        whole (their record says commit or abort)."""
        for seg in self.from_floor(offset):
            found = seg.find_batch(max(offset, seg.base_offset))
            if found is None:
                continue
            pos = found[0]
            while (header := seg.read_header(pos)) is not None:
                if header.is_control:
                    header = RecordBatch(os.pread(seg.file.fileno(), header.size, pos))
                yield seg, header
                pos += header.size
