"""Sparse segment indexes, memory-mapped like Kafka's.

`OffsetIndex` maps (offset - segment base) int32 -> file position int32 of the batch
that starts at that offset; `TimeIndex` maps timestamp int64 -> relative offset int32
of the first batch whose max timestamp reached it. Both are big-endian fixed-size
entries, strictly increasing in their key, appended at most once per
`index.interval.bytes` of log.

The active segment's index file is preallocated to `segment.index.bytes` and mapped
read-write, so an append is a `pack_into` with no system call; the number of valid
entries is kept in memory. The preallocation is sparse, and a store through the
mapping into a hole on a full file system is a SIGBUS that kills the broker, so the
first entry in each file-system block goes through `pwrite` (ENOSPC then arrives as
an OSError the segment rolls back) and the rest of that block, now allocated,
through the mapping. On roll or close the file is trimmed to its entries, so a
closed index's length tells how many entries it has. After a crash the active
segment's index is rebuilt from the log (recovery), never trusted. Closed indexes
are mapped lazily on first lookup; loading checks them with `pread`, unmapped.

An index holds no descriptor of its own, as Kafka's: the file is opened to map it,
resize it, write a block's first entry or fsync it, and closed again, so a broker
keeps one descriptor per segment (its `.log`) plus one per mapped index. The mapping
needs that one: CPython before 3.13 keeps a duplicate of the file's descriptor for
each mmap (3.13's `trackfd=False` keeps none, and is used there). Thousands of
partitions fit under a process's open-file limit this way.
"""

import mmap
import os
import struct
import sys
from pathlib import Path

PAGE = mmap.PAGESIZE
# Python 3.13+: the mapping keeps no duplicate of the file's descriptor.
_MMAP_OPTIONS: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class CorruptIndexError(ValueError):
    """An index file failed its sanity check; the segment's indexes must be rebuilt."""


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int, active: bool):
        self.path = Path(path)
        self.base_offset = base_offset
        size = self.ENTRY.size
        self.max_entries = max(1, max_bytes // size)
        self._mm: mmap.mmap | None = None
        self._closed = False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            self._unit = min(PAGE, os.fstatvfs(fd).f_frsize or PAGE)  # allocation unit
        finally:
            os.close(fd)
        self.entries = length // size
        self._length_ok = length % size == 0
        self._mapped_length = 0
        self._backed = 0  # bytes from the start known to be allocated (not a hole)
        if active:
            self.resize(self.max_entries * size)

    # -- mapping -------------------------------------------------------------------

    def _open(self) -> int:
        """A descriptor of the file, for one operation: the caller closes it."""
        assert not self._closed, f"{self.path.name} is closed"
        return os.open(self.path, os.O_RDWR)

    def _map(self) -> mmap.mmap | None:
        if self._mm is None and not self._closed:
            fd = self._open()
            try:
                length = os.fstat(fd).st_size
                if length:
                    self._mm = mmap.mmap(fd, length, **_MMAP_OPTIONS)
                    self._mapped_length = length
            finally:
                os.close(fd)
        return self._mm

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
            self._mapped_length = 0

    def resize(self, length: int, remap: bool = True) -> None:
        """Set the file length (preallocate when active, trim when closed); mapped
        again at once unless `remap` is false (then at the next lookup)."""
        self._unmap()
        fd = self._open()
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)
        self._backed = min(self._backed, length // self._unit * self._unit)
        if remap:
            self._map()

    def trim(self) -> None:
        """Cut the file to its entries as the segment closes; the mapping goes (a
        closed segment's index is mapped again on its first lookup)."""
        self.resize(self.entries * self.ENTRY.size, remap=False)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def flush(self) -> None:
        if not self._closed:
            fd = self._open()
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def open_for_sync(self) -> int:
        """A new read-only descriptor of the file, for an fsync on another thread,
        which closes it (fsync through any descriptor of a file makes it durable)."""
        assert not self._closed, f"{self.path.name} is closed"
        return os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        self._unmap()
        self._closed = True

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def reset(self) -> None:
        self.entries = 0
        self._length_ok = True

    def truncate_to_entries(self, n: int) -> None:
        self.entries = min(self.entries, n)

    # -- reading -------------------------------------------------------------------

    def entry(self, i: int) -> tuple:
        mm = self._map()
        assert mm is not None, "an entry of an empty index"
        return self.ENTRY.unpack_from(mm, i * self.ENTRY.size)

    def peek(self, i: int) -> tuple:
        """Entry `i` without mapping the file (loading checks every closed segment's
        index, most of which no fetch will ever look up)."""
        if self._mm is not None:
            return self.ENTRY.unpack_from(self._mm, i * self.ENTRY.size)
        fd = self._open()
        try:
            data = os.pread(fd, self.ENTRY.size, i * self.ENTRY.size)
        finally:
            os.close(fd)
        if len(data) != self.ENTRY.size:
            raise CorruptIndexError(f"{self.path.name}: entry {i} is past the end")
        return self.ENTRY.unpack(data)

    def _floor(self, target: int, field: int) -> int:
        """Index of the last entry whose `field` is <= target, or -1."""
        n = self.entries
        if n == 0:
            return -1
        mm = self._map()
        assert mm is not None  # it has entries
        unpack = self.ENTRY.unpack_from
        size = self.ENTRY.size
        lo, hi = 0, n - 1
        if unpack(mm, 0)[field] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size)[field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _append_entry(self, *values) -> None:
        if self.entries >= self.max_entries:
            raise CorruptIndexError(f"index {self.path.name} is full")
        pos = self.entries * self.ENTRY.size
        mm = self._map()
        if mm is None or pos + self.ENTRY.size > self._mapped_length:
            self.resize(self.max_entries * self.ENTRY.size)
            mm = self._mm
            assert mm is not None  # resized to max_entries >= 1 entries
        self._store(mm, pos, values)
        self.entries += 1

    def _store(self, mm: mmap.mmap, pos: int, values: tuple) -> None:
        end = pos + self.ENTRY.size
        if end <= self._backed:
            self.ENTRY.pack_into(mm, pos, *values)
            return
        data = self.ENTRY.pack(*values)
        fd = self._open()
        try:
            written = os.pwrite(fd, data, pos)
        finally:
            os.close(fd)
        if written != len(data):
            raise OSError(f"short write to {self.path.name}")
        self._backed = -(-end // self._unit) * self._unit


class OffsetIndex(_Index):
    """Offset -> position index of one segment. Owned by its LogSegment; not thread-safe."""

    ENTRY = struct.Struct(">ii")

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.entries and self.entry(self.entries - 1)[0] >= rel:
            raise CorruptIndexError(f"offset {offset} is not above the last indexed offset")
        self._append_entry(rel, position)

    def append_unchecked(self, offset: int, position: int) -> None:
        """Append for callers that guarantee increasing offsets (the segment)."""
        pos = self.entries * 8
        if self.entries >= self.max_entries or pos + 8 > min(self._mapped_length, self._backed):
            self._append_entry(offset - self.base_offset, position)
            return
        assert self._mm is not None  # within the mapped length
        self.ENTRY.pack_into(self._mm, pos, offset - self.base_offset, position)
        self.entries += 1

    def last_entry(self) -> tuple[int, int]:
        if not self.entries:
            return self.base_offset, 0
        rel, pos = self.peek(self.entries - 1)
        return self.base_offset + rel, pos

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before `offset`, else (base, 0)."""
        i = self._floor(offset - self.base_offset, 0)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry whose position is <= `position`."""
        i = self._floor(position, 1)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        self.truncate_to_entries(self._floor(offset - self.base_offset - 1, 0) + 1)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at file positions >= `position` (the log file is
        cut there)."""
        self.truncate_to_entries(self._floor(position - 1, 1) + 1)

    def sanity_check(self, log_size: int) -> None:
        if not self._length_ok:
            raise CorruptIndexError(f"{self.path.name}: length is not a multiple of 8")
        if self.entries:
            rel, pos = self.peek(self.entries - 1)
            first_rel, first_pos = self.peek(0)
            if rel < first_rel or pos < first_pos or first_rel < 0 or pos >= log_size:
                raise CorruptIndexError(f"{self.path.name}: last entry {rel},{pos} is invalid")


class TimeIndex(_Index):
    """Timestamp -> offset index of one segment. Owned by its LogSegment; not thread-safe."""

    ENTRY = struct.Struct(">qi")

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset)."""
        if not self.entries:
            return -1, self.base_offset
        ts, rel = self.peek(self.entries - 1)
        return ts, self.base_offset + rel

    last_timestamp = -1  # cache of the last entry's timestamp, -1 when unknown

    def truncate_to_entries(self, n: int) -> None:
        super().truncate_to_entries(n)
        self.last_timestamp = -1

    def reset(self) -> None:
        super().reset()
        self.last_timestamp = -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append when `timestamp` is above the last entry's and there is room (as in
        Kafka, an empty index counts as ending at -1: an empty segment gets no entry)."""
        if timestamp < 0:
            return
        if self.entries:
            if timestamp <= self.last_timestamp:
                return
            last_ts, last_rel = self.entry(self.entries - 1)
            if timestamp <= last_ts or offset - self.base_offset < last_rel:
                return
        if self.entries < self.max_entries:
            self._append_entry(timestamp, offset - self.base_offset)
            self.last_timestamp = timestamp

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= `timestamp`."""
        i = self._floor(timestamp, 0)
        if i < 0:
            return -1, self.base_offset
        ts, rel = self.entry(i)
        return ts, self.base_offset + rel

    def truncate_to(self, offset: int) -> None:
        """Drop entries pointing at offsets >= `offset` (linear from the end: entries
        are few and truncation is rare)."""
        n = self.entries
        while n and self.entry(n - 1)[1] + self.base_offset >= offset:
            n -= 1
        self.truncate_to_entries(n)

    def sanity_check(self) -> None:
        if not self._length_ok:
            raise CorruptIndexError(f"{self.path.name}: length is not a multiple of 12")
        if self.entries:
            first_ts, first_rel = self.peek(0)
            ts, rel = self.peek(self.entries - 1)
            if ts < first_ts or rel < first_rel or first_rel < 0:
                raise CorruptIndexError(f"{self.path.name}: last entry {ts},{rel} is invalid")
