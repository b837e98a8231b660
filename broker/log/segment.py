"""One log segment: a `.log` file of whole batches, its two sparse indexes and its
transaction index (aborted transactions whose markers it holds, txn_index.py).

Finding an offset = offset-index binary search for the nearest indexed batch at or
before it, then a short forward scan over batch headers (one `pread` of the 61-byte
header each; at most ~index.interval.bytes of log). Finding a batch boundary near a
byte limit works the same way with the index searched by position.

`recover()` rescans the whole file through a read-only mmap (zero-copy CRC checks),
truncates a torn or corrupt tail at the last valid batch and rebuilds both indexes;
it empties the transaction index and sets `txn_index_stale`: the partition log
rebuilds it by replaying producer state (it needs the state before the segment),
with the entries read before (`txn_index_before_recovery`) for markers whose
aborted data compaction has already removed.
"""

import mmap
import os
from pathlib import Path

import crc32c

from broker.log.common import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    SegmentFile,
    segment_path,
)
from broker.log.index import OffsetIndex, TimeIndex
from broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from broker.protocol.records import (
    CRC_FROM,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    RecordBatch,
)

INT32_MAX = 2**31 - 1


class LogSegment:
    """A segment of a PartitionLog, owned by that log (one event loop); not thread-safe.

    `next_offset` and `max_timestamp` are exact for the active segment and for any
    segment that was recovered; for other closed segments `max_timestamp` comes from
    the last time-index entry, which roll and close always write.
    """

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        index_interval_bytes: int,
        index_max_bytes: int,
        active: bool,
        created_ms: int,
        suffix: str = "",
    ):
        self.dir = Path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = segment_path(self.dir, base_offset, LOG_SUFFIX + suffix)
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.file = SegmentFile(fd, "r+")
        self.size = os.fstat(fd).st_size
        self.index = OffsetIndex(
            segment_path(self.dir, base_offset, INDEX_SUFFIX + suffix),
            base_offset,
            index_max_bytes,
            active,
        )
        self.time_index = TimeIndex(
            segment_path(self.dir, base_offset, TIME_INDEX_SUFFIX + suffix),
            base_offset,
            index_max_bytes,
            active,
        )
        self.txn_index = TransactionIndex(
            segment_path(self.dir, base_offset, TXN_INDEX_SUFFIX + suffix)
        )
        self.txn_index_stale = False
        self.txn_index_before_recovery: dict = {}
        self.next_offset = base_offset
        self._max_timestamp: int | None = -1 if self.size == 0 else None
        self._offset_of_max_timestamp = base_offset
        self._first_batch_timestamp: int | None = None
        self._bytes_since_index = 0

    # -- state ---------------------------------------------------------------------

    @property
    def max_timestamp(self) -> int:
        if self._max_timestamp is None:
            self._max_timestamp, self._offset_of_max_timestamp = self.time_index.last_entry()
        return self._max_timestamp

    @property
    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (what segment.ms counts from), -1 if none."""
        if self._first_batch_timestamp is None:
            header = self.read_header(0)
            self._first_batch_timestamp = header.max_timestamp if header else -1
        return self._first_batch_timestamp

    def can_hold(self, last_offset: int) -> bool:
        return 0 <= last_offset - self.base_offset <= INT32_MAX

    # -- writing -------------------------------------------------------------------

    def append(self, parts, size: int, batches: list[RecordBatch]) -> None:
        """Write `batches` (offsets already final) at the end: `size` bytes given as the
        buffers `parts`, in one `pwritev` (a leader's single batch comes as its new
        16-byte prefix and the caller's bytes after it, so nothing is copied).

        All or nothing: on an OSError (ENOSPC, EIO) the file is cut back to its old
        end and the in-memory state and indexes are restored before it re-raises, so
        the log still ends on a batch boundary and no index entry points past it."""
        pos = self.size
        saved = self._save_state()
        try:
            fd = self.file.fileno()
            n = os.pwritev(fd, parts, pos)
            if n < size:
                rest = memoryview(b"".join(parts))[n:]
                while rest:
                    written = os.pwrite(fd, rest, pos + n)
                    rest = rest[written:]
                    n += written
            for b in batches:
                length = b.size
                self._index_batch(b.base_offset, b.last_offset, b.max_timestamp, pos, length)
                pos += length
        except OSError:
            self._roll_back(saved)
            raise
        self.size = pos

    def _save_state(self) -> tuple:
        return (
            self.size,
            self.next_offset,
            self._max_timestamp,
            self._offset_of_max_timestamp,
            self._first_batch_timestamp,
            self._bytes_since_index,
            self.index.entries,
            self.time_index.entries,
            self.time_index.last_timestamp,
        )

    def _roll_back(self, saved: tuple) -> None:
        """Undo a failed append: cut the file back (shrinking needs no free space) and
        forget index entries and counters the append added."""
        (
            self.size,
            self.next_offset,
            self._max_timestamp,
            self._offset_of_max_timestamp,
            self._first_batch_timestamp,
            self._bytes_since_index,
            index_entries,
            time_entries,
            last_ts,
        ) = saved
        self.index.truncate_to_entries(index_entries)
        self.time_index.truncate_to_entries(time_entries)
        self.time_index.last_timestamp = last_ts
        os.ftruncate(self.file.fileno(), self.size)

    def _index_batch(self, base: int, last: int, max_ts: int, position: int, size: int) -> None:
        if position == 0 and self._first_batch_timestamp is None:
            self._first_batch_timestamp = max_ts
        if max_ts > (
            self._max_timestamp if self._max_timestamp is not None else self.max_timestamp
        ):
            self._max_timestamp = max_ts
            self._offset_of_max_timestamp = base
        since = self._bytes_since_index
        if since > self.index_interval_bytes:
            self.index.append_unchecked(base, position)
            max_seen = self.max_timestamp  # loaded by the comparison above
            if max_seen > self.time_index.last_timestamp:
                self.time_index.maybe_append(max_seen, self._offset_of_max_timestamp)
            since = 0
        self._bytes_since_index = since + size
        self.next_offset = last + 1

    def finish(self) -> None:
        """The segment stops being active: final time-index entry, the indexes written
        and trimmed. What can fail on a full disk (the writes) comes first, so a failed
        finish leaves the segment active and whole, to be finished again."""
        self.time_index.maybe_append(self.max_timestamp, self._offset_of_max_timestamp)
        self.index.write_pending()
        self.time_index.write_pending()
        self.txn_index.persist()
        self.index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        os.fsync(self.file.fileno())
        self.flush_indexes()

    def flush_indexes(self) -> None:
        """fsync the index files changed since they were last flushed (a roll or close
        writes the active indexes first)."""
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def sync_fds(self) -> list[int]:
        """New descriptors of its files (the `.log` duplicated, the indexes opened
        again), for an fsync on another thread, which closes them."""
        fds = [
            os.dup(self.file.fileno()),
            self.index.open_for_sync(),
            self.time_index.open_for_sync(),
        ]
        if (txn_fd := self.txn_index.open_for_sync()) is not None:
            fds.append(txn_fd)
        return fds

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, header = found
        removed = self.size - position
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        self.index.truncate_to_position(position)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self._max_timestamp, self._offset_of_max_timestamp = self.time_index.last_entry()
        self.next_offset = self.base_offset
        if position == 0:
            self._first_batch_timestamp = None
        self._scan_tail(self.index.last_entry()[1])
        return removed

    def activate(self) -> None:
        """Become the active segment again (after a truncation): room in the indexes."""
        self.index.activate()
        self.time_index.activate()

    def _scan_tail(self, start: int) -> None:
        """Read headers from `start` to the end, updating next offset and max timestamp."""
        pos = start
        self._bytes_since_index = 0
        while pos < self.size:
            h = self.read_header(pos)
            if h is None or h.batch_length < MIN_BATCH_LENGTH or pos + h.size > self.size:
                raise ValueError(f"{self.log_path.name}: bad batch header at {pos}")
            if h.max_timestamp > self.max_timestamp:
                self._max_timestamp = h.max_timestamp
                self._offset_of_max_timestamp = h.base_offset
            self.next_offset = h.next_offset
            self._bytes_since_index += h.size
            pos += h.size

    def load_tail(self) -> None:
        """For the last segment after a clean shutdown: find its end without a rescan."""
        self._scan_tail(self.index.last_entry()[1])

    def recover(self) -> int:
        """Validate every batch, truncate at the first bad one and rebuild the indexes.
        Returns the number of bytes truncated."""
        self.index.reset()
        self.time_index.reset()
        self.txn_index_before_recovery = {e.last_offset: e for e in self.txn_index.entries}
        self.txn_index.reset()
        self.txn_index_stale = True
        self.index.activate()
        self.time_index.activate()
        self._max_timestamp = -1
        self._offset_of_max_timestamp = self.base_offset
        self._first_batch_timestamp = None
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        size = os.fstat(self.file.fileno()).st_size
        valid = 0
        if size:
            with mmap.mmap(self.file.fileno(), size, access=mmap.ACCESS_READ) as mm:
                valid = self._scan_valid(mm, size)
        if valid < size:
            os.ftruncate(self.file.fileno(), valid)
        self.size = valid
        return size - valid

    def _scan_valid(self, mm: mmap.mmap, size: int) -> int:
        pos = 0
        view = memoryview(mm)
        try:
            while size - pos >= HEADER_SIZE:
                b = RecordBatch(mm, pos)
                end = pos + b.size
                if (
                    b.magic != MAGIC
                    or b.batch_length < MIN_BATCH_LENGTH
                    or end > size
                    or b.last_offset_delta < 0
                    or b.base_offset < self.next_offset
                    or not self.can_hold(b.last_offset)
                    or self.index.is_full
                    or crc32c.crc32c(view[pos + CRC_FROM : end]) != b.crc
                ):
                    break
                self._index_batch(b.base_offset, b.last_offset, b.max_timestamp, pos, b.size)
                pos = end
        finally:
            view.release()
        return pos

    # -- reading -------------------------------------------------------------------

    def read_header(self, position: int) -> RecordBatch | None:
        if position + HEADER_SIZE > self.size:
            return None
        return RecordBatch(os.pread(self.file.fileno(), HEADER_SIZE, position))

    def find_batch(self, offset: int) -> tuple[int, RecordBatch] | None:
        """(position, header) of the first batch whose last offset is >= `offset`."""
        pos = self.index.lookup(offset)[1]
        while True:
            h = self.read_header(pos)
            if h is None:
                return None
            if h.last_offset >= offset:
                return pos, h
            pos += h.size

    def position_of(self, offset: int) -> tuple[int, int]:
        """(position, base offset) of the first batch whose base offset is >= `offset`,
        or (size, next offset) past the last batch."""
        if offset >= self.next_offset:
            return self.size, self.next_offset
        pos = self.index.lookup(offset)[1]
        while True:
            h = self.read_header(pos)
            if h is None:
                return self.size, self.next_offset
            if h.base_offset >= offset:
                return pos, h.base_offset
            pos += h.size

    def boundary_at_or_before(self, start: int, limit: int) -> tuple[int, int]:
        """The last batch boundary <= `limit`, scanning from `start` (a boundary), and
        the offset there (the base offset of the batch it starts, or the next offset)."""
        if limit >= self.size:
            return self.size, self.next_offset
        pos = max(start, self.index.lookup_position(limit)[1])
        while True:
            h = self.read_header(pos)
            if h is None:
                return pos, self.next_offset
            if pos + h.size > limit:
                return pos, h.base_offset
            pos += h.size

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        self.index.close()
        self.time_index.close()
        self.file.close()

    def delete(self) -> None:
        """Unlink the files. The `.log` file object is dropped, not closed, so fetch
        slices still holding it keep reading the unlinked inode."""
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)
        del self.file

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next={self.next_offset})"
