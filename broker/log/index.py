"""Sparse segment indexes, as Kafka's: the active segment's in memory, a closed
segment's memory-mapped.

`OffsetIndex` maps (offset - segment base) int32 -> file position int32 of the batch
that starts at that offset; `TimeIndex` maps timestamp int64 -> relative offset int32
of the first batch whose max timestamp reached it. Both are big-endian fixed-size
entries, strictly increasing in their key, appended at most once per
`index.interval.bytes` of log.

The active segment's entries live in a `bytearray`: an append is a `pack` with no
system call, and lookups read it. The entries not yet in its file are written with
one `pwrite` when the segment is rolled or closed, and the file is cut to its entries
(a truncation may have left more), so a closed index's length tells how many entries
it has; the roll's or close's fsync follows. A flush does not write them: after a
crash the active segment's index is rebuilt from the log (recovery), never trusted,
so only a roll or a clean close needs it on disk. Kafka preallocates the active
index file to `segment.index.bytes` because it maps it; this one is not mapped, so its
file holds only what was written (the entry limit is still `segment.index.bytes`: the
segment rolls when it is reached). A
full file system is reported by that `pwrite` as an OSError (never a SIGBUS, as a
store into a sparse mapping would be), and the entries stay in memory to be written
again.

Closed indexes are mapped read-only on their first lookup; loading checks them with
`pread`, unmapped; one made active again (a truncation) is read back into memory.

An index holds no descriptor of its own, as Kafka's: the file is opened to write,
resize or fsync it, or to map it, and closed again, so a broker keeps one descriptor
per segment (its `.log`) plus one per mapped closed index on CPython before 3.13,
whose mmap keeps a duplicate of the file's descriptor (3.13's `trackfd=False` keeps
none, and is used there). A partition of one segment holds one descriptor: 10,000
partitions fit under an open-file limit of 20,000.
"""

import mmap
import os
import struct
import sys
from pathlib import Path

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
        # Active: the entries, loaded from the file on first use (None until then);
        # `_written` of them are in the file. `_dirty`: changed since its last fsync.
        self._active = False
        self._buf: bytearray | None = None
        self._written = 0
        self._dirty = False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._length = os.fstat(fd).st_size
        finally:
            os.close(fd)
        self.entries = self._length // size
        self._length_ok = self._length % size == 0
        if active:
            self.activate()

    # -- the file --------------------------------------------------------------------

    def _open(self) -> int:
        """A descriptor of the file, for one operation: the caller closes it."""
        assert not self._closed, f"{self.path.name} is closed"
        return os.open(self.path, os.O_RDWR)

    def _map(self) -> mmap.mmap | None:
        """The closed index's mapping (read-only), made on first use."""
        if self._mm is None and not self._closed:
            fd = self._open()
            try:
                length = os.fstat(fd).st_size
                if length:
                    self._mm = mmap.mmap(fd, length, access=mmap.ACCESS_READ, **_MMAP_OPTIONS)
            finally:
                os.close(fd)
        return self._mm

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _set_length(self, length: int) -> None:
        if length == self._length:
            return
        fd = self._open()
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)
        self._length = length
        self._dirty = True

    def _buffer(self) -> bytearray:
        """The active index's entries, read from the file the first time."""
        buf = self._buf
        if buf is None:
            want = self.entries * self.ENTRY.size
            data = b""
            if want:
                fd = self._open()
                try:
                    data = os.pread(fd, want, 0)
                finally:
                    os.close(fd)
            if len(data) != want:
                raise CorruptIndexError(
                    f"{self.path.name}: shorter than its {self.entries} entries"
                )
            buf = self._buf = bytearray(data)
            self._written = self.entries
        return buf

    def activate(self) -> None:
        """Take entries again (a new segment, or one made active by a truncation): they
        move to memory, read from the file on first use."""
        if not self._active:
            self._unmap()
            self._active = True
            self._buf = None

    def write_pending(self) -> None:
        """Write the entries the file does not have yet, in one `pwrite` (OSError on a
        full disk: they stay pending)."""
        buf = self._buf
        if buf is None or self._written >= self.entries:
            return
        size = self.ENTRY.size
        pos = self._written * size
        view = memoryview(buf)[pos : self.entries * size]
        fd = self._open()
        try:
            while view:
                n = os.pwrite(fd, view, pos)
                view, pos = view[n:], pos + n
        finally:
            view.release()
            os.close(fd)
            self._dirty = True
            self._length = max(self._length, pos)  # what was written, even on an error
        self._written = self.entries

    def trim(self) -> None:
        """The segment closes: its pending entries written, the file cut to them; the
        entries leave memory (a closed index is mapped on its first lookup)."""
        if self._active:
            self.write_pending()
            self._set_length(self.entries * self.ENTRY.size)
            self._active = False
            self._buf = None
            self._length_ok = True

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def flush(self) -> None:
        """fsync the file if it changed since the last flush. An active index's pending
        entries are not written here: only a roll or close needs them on disk (see the
        module docstring), and a full disk must not fail the flush of the log data."""
        if self._closed:
            return
        if self._dirty:
            fd = self._open()
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._dirty = False

    def open_for_sync(self) -> int:
        """A new read-only descriptor of the file, for an fsync on another thread,
        which closes it (fsync through any descriptor of a file makes it durable)."""
        assert not self._closed, f"{self.path.name} is closed"
        fd = os.open(self.path, os.O_RDONLY)
        self._dirty = False  # the caller's fsync covers what changed
        return fd

    def close(self) -> None:
        self._unmap()
        self._buf = None
        self._closed = True

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def reset(self) -> None:
        self.truncate_to_entries(0)
        self._length_ok = True

    def truncate_to_entries(self, n: int) -> None:
        if n < self.entries:
            self.entries = n
            if self._buf is not None:
                del self._buf[n * self.ENTRY.size :]
            self._written = min(self._written, n)

    # -- reading -------------------------------------------------------------------

    def _data(self) -> bytearray | mmap.mmap | None:
        """Where the entries are: the active index's memory, or the closed one's map."""
        return self._buffer() if self._active else self._map()

    def entry(self, i: int) -> tuple:
        data = self._data()
        assert data is not None, "an entry of an empty index"
        return self.ENTRY.unpack_from(data, i * self.ENTRY.size)

    def peek(self, i: int) -> tuple:
        """Entry `i` without mapping the file (loading checks every closed segment's
        index, most of which no fetch will ever look up)."""
        if self._active or self._mm is not None:
            return self.entry(i)
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
        data = self._data()
        assert data is not None  # it has entries
        unpack = self.ENTRY.unpack_from
        size = self.ENTRY.size
        lo, hi = 0, n - 1
        if unpack(data, 0)[field] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(data, mid * size)[field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _append_entry(self, *values) -> None:
        if self.entries >= self.max_entries:
            raise CorruptIndexError(f"index {self.path.name} is full")
        self.activate()
        self._buffer().extend(self.ENTRY.pack(*values))
        self.entries += 1


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
        buf = self._buf
        if buf is None or self.entries >= self.max_entries:
            self._append_entry(offset - self.base_offset, position)
            return
        buf += _PACK_OFFSET_ENTRY(offset - self.base_offset, position)
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


_PACK_OFFSET_ENTRY = OffsetIndex.ENTRY.pack  # the append fast path, looked up once


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
