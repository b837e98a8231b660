"""LocalLog: a partition's segments on local disk (Kafka's LocalLog).

It owns the segment files and everything measured in them: the log end offset, the
size, the recovery point, rolling, flushing, truncating, deleting segments, and
reading whole batches. It knows nothing of producers, transactions, leader epochs,
the log start offset or retention policy: the partition log above decides those and
calls it.

Append (`append`): maybe roll, one `pwritev` to the active segment, a few index
entries in memory. Nothing in that path depends on the log's size.

Roll: a new active segment starts when the active one would pass segment.bytes,
its first batch is older than segment.ms, an index is full, or offsets would not
fit its 32-bit relative offsets. The partition log's `before_roll(base)` hook runs
first (it writes the producer snapshot named after the new segment); the finished
segment is then fsynced, with that snapshot, on a background thread (as Kafka's
scheduler does), and the recovery point moves to the new segment's base once that
fsync is done. `flush.messages` and `flush` force a synchronous fsync up to the log
end. Loading (`broker.log.loader`) rescans only segments at or after the recovery
point.

Read (`read`): the segment holding the offset (`LogSegments.floor`), then the
segment's offset index, then a short scan of batch headers; the answer is a (file,
position, length) slice of whole batches for sendfile, the first batch whole even
past max_bytes (KIP-74), never past `max_offset`, never crossing into the next
segment.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from broker.log.common import FetchSlice
from broker.log.config import LogConfig
from broker.log.loader import load_segments, new_segment
from broker.log.producer_snapshot import sync_snapshot
from broker.log.segment import LogSegment
from broker.log.segments import LogSegments
from broker.log.validator import PlacedBatches
from broker.protocol.records import RecordBatch
from common.fsutil import fsync_dir

log = logging.getLogger(__name__)

_flusher: ThreadPoolExecutor | None = None


def _flush_executor() -> ThreadPoolExecutor:
    global _flusher
    if _flusher is None:
        _flusher = ThreadPoolExecutor(1, thread_name_prefix="log-flush")
    return _flusher


def _fsync_and_close(fds: list[int], dir: Path, snapshot: Path | None) -> None:
    """A roll's flush, on the flush thread: the producer snapshot the roll wrote, the
    finished segment's files, then the directory (their creation, the rename)."""
    try:
        if snapshot is not None:
            sync_snapshot(snapshot)
        for fd in fds:
            os.fsync(fd)
        fsync_dir(dir)
    finally:
        for fd in fds:
            os.close(fd)


class LocalLog:
    """The segments of one PartitionLog, owned by it (the server's event loop); not
    thread-safe (the only other thread is the roll fsync, which works on duplicated
    descriptors).

    `before_roll(base_offset)` is called before each roll and returns a file to
    fsync with the finished segment (or None)."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        recovery_point: int,
        clean_shutdown: bool,
        clock_ms: Callable[[], int],
        before_roll: Callable[[int], Path | None],
    ):
        self.dir = dir
        self.config = config
        self._clock_ms = clock_ms
        self._before_roll = before_roll
        self.segments = LogSegments(
            load_segments(dir, config, recovery_point, clean_shutdown, clock_ms())
        )
        self.log_end_offset = self.segments.active.next_offset
        self.size_bytes = sum(s.size for s in self.segments)
        rp = self.log_end_offset if clean_shutdown else recovery_point
        self._recovery_point = min(rp, self.log_end_offset)
        self._pending: list[tuple[int, Future[None]]] = []
        self.last_flush_ms = clock_ms()

    @property
    def active(self) -> LogSegment:
        return self.segments.active

    @property
    def recovery_point(self) -> int:
        self.reap_flushes(wait=False)
        return self._recovery_point

    def raise_recovery_point(self, offset: int) -> None:
        """Nothing below `offset` needs recovery (the log starts there now)."""
        self._recovery_point = max(self._recovery_point, offset)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.active.index_interval_bytes = config.index_interval_bytes

    # -- append, roll ----------------------------------------------------------------

    def append(self, placed: PlacedBatches) -> None:
        """Write batches whose offsets are final (at or after the log end)."""
        seg = self._maybe_roll(placed)
        seg.append(placed.parts, placed.size, placed.batches)
        self.log_end_offset = placed.last_offset + 1
        self.size_bytes += placed.size
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, placed: PlacedBatches) -> LogSegment:
        seg = self.segments.active
        cfg = self.config
        first = placed.first_offset
        if not seg.can_hold(placed.last_offset):
            return self.roll(first)
        if seg.size == 0:
            return seg
        first_ts = seg.first_batch_timestamp
        waited = (
            placed.max_timestamp - first_ts if first_ts >= 0 else self._clock_ms() - seg.created_ms
        )
        if (
            seg.size > cfg.segment_bytes - placed.size
            or waited > cfg.segment_ms
            or seg.index.is_full
            or seg.time_index.is_full
        ):
            return self.roll(first)
        return seg

    def roll(self, base: int | None = None) -> LogSegment:
        """Start a new active segment at `base` (default: the log end); a no-op if the
        active one is empty and already starts there."""
        if base is None:
            base = self.log_end_offset
        old = self.segments.active
        if old.size == 0 and old.base_offset == base:
            return old
        # Not fsynced here, on the event loop: the finished segment's flush does it.
        # An empty segment has no flush; a lost snapshot only costs a longer replay.
        snapshot = self._before_roll(base)
        if old.size == 0:
            self.segments.remove_last()
            old.delete()
        else:
            old.finish()
            fut = _flush_executor().submit(_fsync_and_close, old.sync_fds(), self.dir, snapshot)
            self._pending.append((base, fut))
        seg = new_segment(self.dir, base, self.config, self._clock_ms())
        self.segments.add(seg)
        return seg

    # -- flush -------------------------------------------------------------------------

    def reap_flushes(self, wait: bool) -> None:
        """Collect finished roll fsyncs (all of them, waiting, if `wait`) and move the
        recovery point past the segments they made durable."""
        while self._pending and (wait or self._pending[0][1].done()):
            offset, fut = self._pending.pop(0)
            fut.result()
            self._recovery_point = max(self._recovery_point, min(offset, self.log_end_offset))

    def flush(self) -> None:
        """fsync everything up to the log end; the recovery point becomes the log end."""
        self.reap_flushes(wait=True)
        if self.log_end_offset > self._recovery_point:
            for seg in self.segments.from_floor(self._recovery_point):
                seg.flush()
        self._recovery_point = self.log_end_offset
        self.last_flush_ms = self._clock_ms()

    def flush_if_due(self) -> bool:
        """Flush when flush.ms has passed since the last flush and there is data."""
        self.reap_flushes(wait=False)
        due = self._clock_ms() - self.last_flush_ms >= self.config.flush_ms
        if due and self.log_end_offset > self._recovery_point:
            self.flush()
            return True
        return False

    # -- read --------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None) -> FetchSlice | None:
        """Whole batches from the one containing `offset` (at most the log end),
        within one segment."""
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return None
        for seg in self.segments.from_floor(offset):
            found = seg.find_batch(offset)
            if found is not None:
                break
        else:
            return None
        start, header = found
        if max_offset is not None and header.base_offset >= max_offset:
            return None
        end = seg.size if max_offset is None else seg.position_of(max_offset)[0]
        first_end = start + header.size
        if first_end >= end or max_bytes <= header.size:
            return FetchSlice(seg.file, start, header.size, header.last_offset + 1)
        stop, end_offset = seg.boundary_at_or_before(start, min(end, start + max_bytes))
        return FetchSlice(seg.file, start, stop - start, end_offset)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= ts_ms."""
        for seg in self.segments:
            if seg.max_timestamp < ts_ms:
                continue
            _, indexed_offset = seg.time_index.lookup(ts_ms)
            pos = seg.index.lookup(indexed_offset)[1]
            while (h := seg.read_header(pos)) is not None:
                if h.max_timestamp >= ts_ms:
                    return _first_record_at(seg, pos, h, ts_ms)
                pos += h.size
        return None

    # -- deletion, truncation -----------------------------------------------------------

    def delete_first_segment(self) -> None:
        """Delete the oldest segment (never the active one)."""
        if len(self.segments) < 2:
            raise ValueError("the active segment cannot be deleted")
        seg = self.segments.remove_first()
        self.size_bytes -= seg.size
        seg.delete()

    def replace_segment(self, i: int, seg: LogSegment) -> None:
        """Swap in a cleaned copy of closed segment `i` (same base offset)."""
        old = self.segments.replace(i, seg)
        self.size_bytes += seg.size - old.size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after `offset`, which lies in the log (above the
        first segment's base); returns the new log end (the base of the batch holding
        `offset`, if `offset` fell inside one)."""
        self.reap_flushes(wait=True)
        while len(self.segments) > 1 and self.segments.active.base_offset > offset:
            self.segments.remove_last().delete()
        seg = self.segments.active
        found = seg.find_batch(offset)
        new_end = offset if found is None else min(offset, found[1].base_offset)
        seg.truncate_to(offset)
        seg.activate()
        self.size_bytes = sum(s.size for s in self.segments)
        self.log_end_offset = new_end
        self._recovery_point = min(self._recovery_point, new_end)
        return new_end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment; the log restarts, empty, at `offset`."""
        self.reap_flushes(wait=True)
        for seg in self.segments:
            seg.delete()
        self.segments.reset(new_segment(self.dir, offset, self.config, self._clock_ms()))
        self.size_bytes = 0
        self.log_end_offset = self._recovery_point = offset

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        try:
            self.reap_flushes(wait=True)
            self.active.finish()
            self.flush()
            self.active.flush_indexes()  # what finish wrote, if flush had no data to sync
        finally:
            for seg in self.segments:
                seg.close()

    def release(self) -> None:
        """Close the segments without writing anything (the log is being deleted: on a
        full disk a close that writes its indexes would fail)."""
        self.reap_flushes(wait=True)
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        """Remove the partition's directory and everything in it."""
        self.reap_flushes(wait=True)
        for seg in self.segments:
            seg.delete()
        shutil.rmtree(self.dir, ignore_errors=True)


def _first_record_at(seg: LogSegment, pos: int, h: RecordBatch, ts_ms: int) -> tuple[int, int]:
    batch = RecordBatch(os.pread(seg.file.fileno(), h.size, pos))
    for r in batch.records():
        if r.timestamp >= ts_ms:
            return r.offset, r.timestamp
    return batch.base_offset, batch.max_timestamp
