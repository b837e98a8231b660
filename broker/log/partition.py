"""PartitionLog: the segmented log of one partition.

Append: validate every batch (CRC, magic, size, records, producer state), rewrite
baseOffset and partitionLeaderEpoch (the CRC does not cover them), maybe roll, one
`pwritev` to the active segment, a few index entries in mmapped memory. Nothing in
that path depends on the log's size.

Read: bisect the segment base offsets, then the segment's offset index, then a short
scan of batch headers; the answer is a (file, position, length) slice of whole
batches for sendfile, the first batch whole even past max_bytes (KIP-74), never past
`max_offset`, never crossing into the next segment.

Durability: writes go to the page cache. A roll fsyncs the finished segment, and the
producer snapshot it took, on a background thread (as Kafka's scheduler does), and
the recovery point moves to the new segment's base once that fsync is done;
`flush.messages` and `flush` force a synchronous fsync up to the log end. Loading
(see `broker.log.loader`) rescans only segments at or after the recovery point.

Transactions (KIP-98): producer state tracks each producer's ongoing transaction;
a marker (`append_txn_marker` on the leader, a control batch in `append_as_follower`,
a replayed one in recovery) completes it, and an aborted one is indexed in the
`.txnindex` of the segment holding the marker. `first_unstable_offset(hw)` gives
what the partition's last stable offset is capped by; `collect_aborted` what a
read_committed fetch must tell the consumer to drop. `has_aborted` stays False on a
partition that never saw an abort, so fetches there skip the search.
"""

import bisect
import logging
import os
import shutil
import struct
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from broker.log.aborted import collect_aborted, rebuild_txn_indexes
from broker.log.common import (
    AppendInfo,
    CorruptBatchError,
    FetchSlice,
    InvalidOffsetError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from broker.log.config import LogConfig
from broker.log.epoch import LeaderEpochCache
from broker.log.loader import load_segments, new_segment
from broker.log.producer_state import (
    CompletedTxn,
    ProducerStateError,
    ProducerStateManager,
    VerificationGuard,
    batch_headers_from,
    sync_snapshot,
)
from broker.log.record_rules import check_records, rules_apply
from broker.log.segment import LogSegment
from broker.log.txn_index import AbortedTxn
from broker.protocol.control import end_txn_marker_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.records import (
    HEADER_SIZE,
    CorruptRecordError,
    RecordBatch,
    iter_batches,
    rebuild_batch,
    set_log_append_time,
)
from common.fsutil import fsync_dir

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
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


def parse_dir_name(name: str) -> tuple[str, int]:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(part)


class PartitionLog:
    """One partition's log, owned by the server's event loop; not thread-safe (the
    only other thread is the roll fsync, which works on duplicated descriptors)."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        recovery_point: int = 0,
        clock=time.time,
        *,
        clean_shutdown: bool = False,
        cleaner_checkpoint: int = 0,
        log_start_offset: int = 0,
    ):
        self.dir = Path(dir)
        self.topic, self.partition = parse_dir_name(self.dir.name)
        self.config = config
        self._clock = clock
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segments: list[LogSegment] = load_segments(
            self.dir, config, recovery_point, clean_shutdown, self._now_ms()
        )
        self._bases = [s.base_offset for s in self.segments]
        self.log_end_offset = self.active.next_offset
        self.log_start_offset = min(
            max(self.segments[0].base_offset, log_start_offset), self.log_end_offset
        )
        self.size_bytes = sum(s.size for s in self.segments)
        rp = self.log_end_offset if clean_shutdown else recovery_point
        self._recovery_point = max(self.log_start_offset, min(rp, self.log_end_offset))
        self._pending: list[tuple[int, Future]] = []
        self.last_flush_ms = self._now_ms()
        self.cleaner_checkpoint = max(cleaner_checkpoint, self.log_start_offset)
        self.tombstone_deadline_ms: int | None = None
        self.leader_epoch_cache = LeaderEpochCache(self.dir, lambda: self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state = ProducerStateManager(self.dir)
        self.has_aborted = any(s.txn_index.entries for s in self.segments)
        if rebuild_txn_indexes(self, self._now_ms()):
            self.has_aborted = True
        self._reload_producer_state()

    def _reload_producer_state(self) -> None:
        self.producer_state.truncate_to(
            self.log_start_offset,
            self.log_end_offset,
            lambda offset: batch_headers_from(self, offset),
            self._now_ms(),
        )

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def recovery_point(self) -> int:
        self._reap_flushes(wait=False)
        return self._recovery_point

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, [{self.log_start_offset}, {self.log_end_offset}))"

    # -- append --------------------------------------------------------------------

    def append(
        self, records, leader_epoch: int = 0, guard: VerificationGuard | None = None
    ) -> AppendInfo:
        """Leader append: validate, assign offsets from the log end, write.

        Every batch is checked as Kafka's LogValidator does, in this order: framing
        and CRC, size against max.message.bytes, record count against the last offset
        delta, the records section (`RecordBatch.validate_records`), the topic's
        record rules (record_rules.py: keys on compacted topics, timestamp bounds),
        then the producer state of an idempotent batch (one per append; a retried
        duplicate returns its original offsets and writes nothing; `guard` is the
        KIP-890 verification's, see producer_state.py). Control batches come only from
        a coordinator (`append_txn_marker`): a client's is INVALID_RECORD, as is a
        transactional batch without a producer id. A refusal raises
        the log's `ApiError` family (CorruptBatchError, RecordTooLargeError,
        RecordValidationError, ProducerStateError) and writes nothing.

        A topic whose compression.type names a codec gets every other batch rebuilt
        in that codec, as Kafka recompresses (no zero-copy on such a topic).

        baseOffset and partitionLeaderEpoch are then rewritten (the CRC does not cover
        them) and the batches go out in one pwritev. A single batch with CreateTime
        (the usual request) is not copied: the segment writes its new 16-byte prefix
        and the rest of the caller's buffer. Otherwise a bytearray argument is
        rewritten in place, anything else copied into one first."""
        log_append_time = -1
        if self.config.message_timestamp_type != "CreateTime":
            log_append_time = self._now_ms()
        rules = rules_apply(self.config)
        now_ms = self._now_ms() if rules else 0
        one = producer = None
        try:
            if log_append_time < 0 and len(records) >= HEADER_SIZE:
                one = RecordBatch(records)
                if one.size != len(records):
                    one = None
            if one is not None:
                one.validate()
                batches = [one]
            else:
                buf = records if isinstance(records, bytearray) else bytearray(records)
                batches = list(iter_batches(buf))
                if not batches:
                    raise CorruptRecordError("no record batches in the request")
            max_bytes = self.config.max_message_bytes
            for b in batches:
                if b.size > max_bytes:
                    raise RecordTooLargeError(
                        f"batch of {b.size} bytes exceeds max.message.bytes {max_bytes}"
                    )
                if b.records_count <= 0 or b.last_offset_delta != b.records_count - 1:
                    raise CorruptRecordError(
                        "batch record count does not match its last offset delta"
                    )
                b.validate_records()
                if rules:
                    check_records(b, self.config, f"{self.topic}-{self.partition}", now_ms)
                if b.is_control or (b.is_transactional and b.producer_id < 0):
                    raise ProducerStateError(
                        ErrorCode.INVALID_RECORD,
                        "clients may not write control batches, nor transactional ones "
                        "without a producer id",
                    )
                if b.producer_id >= 0:
                    if len(batches) > 1:
                        raise CorruptRecordError("idempotent batches must come one per partition")
                    verdict = self.producer_state.check(b, guard)
                    if verdict.duplicate is not None:
                        return AppendInfo(*verdict.duplicate, -1, -1, 0, 0)
                    if not verdict.append:
                        raise ProducerStateError(verdict.error)
                    producer = b
            codec = self.config.codec
            if codec is not None and any(b.codec != codec for b in batches):
                buf = bytearray(b"".join(rebuild_batch(b, b.records(), codec) for b in batches))
                batches = list(iter_batches(buf))
                one = None
                producer = batches[0] if producer is not None else None
        except CorruptRecordError as e:
            raise CorruptBatchError(str(e)) from e
        first = self.log_end_offset
        if one is not None:
            last = first + one.last_offset_delta
            max_ts = one.max_timestamp
            one.base_offset = first
            one.partition_leader_epoch = leader_epoch
            size = len(records)
            parts = (_PREFIX.pack(first, one.batch_length, leader_epoch), memoryview(records)[16:])
        else:
            offset = first
            max_ts = -1
            pack = _PREFIX.pack_into
            for b in batches:
                pack(buf, b.position, offset, b.batch_length, leader_epoch)
                b.base_offset = offset
                b.partition_leader_epoch = leader_epoch
                if log_append_time >= 0:
                    set_log_append_time(buf, b.position, log_append_time)
                    b.max_timestamp = log_append_time
                offset += b.records_count
                if b.max_timestamp > max_ts:
                    max_ts = b.max_timestamp
            last = offset - 1
            size = len(buf)
            parts = (buf,)
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first)
        self._write(parts, size, batches, first, last, max_ts)
        if producer is not None:
            self.producer_state.update(producer, first, last, self._now_ms())
        return AppendInfo(first, last, max_ts, log_append_time, len(batches), size)

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        leader_epoch: int = 0,
    ) -> AppendInfo:
        """Leader append of a transaction coordinator's end-transaction marker
        (broker/protocol/control.py) at the log end. Markers come from the
        coordinator, never from clients, so they skip the client-batch checks, but
        not producer state's: an older producer epoch raises ProducerStateError
        INVALID_PRODUCER_EPOCH, an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED. The marker ends the producer's transaction
        here; an abort is indexed in the active segment's `.txnindex`."""
        code = self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if code != ErrorCode.NONE:
            raise ProducerStateError(code, f"end transaction marker of producer {producer_id}")
        data = bytearray(
            end_txn_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch)
        )
        batch = RecordBatch(data)
        first = self.log_end_offset
        _PREFIX.pack_into(data, 0, first, batch.batch_length, leader_epoch)
        batch.base_offset = first
        batch.partition_leader_epoch = leader_epoch
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first)
        self._write((data,), len(data), [batch], first, first, batch.max_timestamp)
        done = self.producer_state.append_marker(
            producer_id, producer_epoch, commit, coordinator_epoch, first, self._now_ms()
        )
        if done is not None:
            self._completed(done)
        return AppendInfo(first, first, batch.max_timestamp, -1, 1, len(data))

    def _completed(self, done: CompletedTxn) -> None:
        """A marker (the last batch written) ended a transaction: index an abort."""
        if done.aborted:
            stable = self.producer_state.stable_offset_after(done)
            self.has_aborted = True
            try:
                self.active.txn_index.append(
                    AbortedTxn(done.producer_id, done.first_offset, done.last_offset, stable)
                )
            except OSError as e:
                # The marker is in the log and the entry in memory; the file is
                # rewritten at the segment's roll or flush (a full disk, meanwhile).
                log.warning("%s: transaction index not written yet: %s", self, e)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """First offset of the oldest transaction not yet stable below
        `high_watermark`, or None: the last stable offset is min(this, HW)."""
        ps = self.producer_state
        if not ps.ongoing and not ps.unreplicated:
            return None
        return ps.first_unstable_offset(high_watermark)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound)."""
        if not self.has_aborted:
            return []
        return collect_aborted(self, fetch_offset, upper_bound)

    def append_as_follower(self, records) -> AppendInfo:
        """Replica append: offsets kept as given; they must start at or after the log
        end and increase. Batches' leader epochs feed the epoch cache."""
        buf = bytes(records)
        batches = list(iter_batches(buf))
        if not batches:
            raise CorruptRecordError("no record batches to append")
        expected = self.log_end_offset
        max_ts = -1
        cache = self.leader_epoch_cache
        for b in batches:
            if b.base_offset < expected:
                raise InvalidOffsetError(
                    f"batch at offset {b.base_offset} is below the next offset {expected}"
                )
            expected = b.next_offset
            max_ts = max(max_ts, b.max_timestamp)
            if b.partition_leader_epoch > cache.latest_epoch:  # -1 (none) never is
                cache.assign(b.partition_leader_epoch, b.base_offset)
        first = batches[0].base_offset
        self._write((buf,), len(buf), batches, first, expected - 1, max_ts)
        for b in batches:
            done = self.producer_state.replay(b)
            if done is not None:
                self._completed(done)
        return AppendInfo(first, expected - 1, max_ts, -1, len(batches), len(buf))

    def _write(
        self, parts, size: int, batches: list[RecordBatch], first: int, last: int, max_ts: int
    ) -> None:
        """The one write of both appends: `size` bytes in the buffers `parts`."""
        seg = self._maybe_roll(size, max_ts, first, last)
        seg.append(parts, size, batches)
        self.log_end_offset = last + 1
        self.size_bytes += size
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()

    # -- roll ----------------------------------------------------------------------

    def _maybe_roll(self, size: int, max_ts: int, first: int, last: int) -> LogSegment:
        seg = self.segments[-1]
        cfg = self.config
        if not seg.can_hold(last):
            return self._roll(first)
        if seg.size == 0:
            return seg
        first_ts = seg.first_batch_timestamp
        waited = max_ts - first_ts if first_ts >= 0 else self._now_ms() - seg.created_ms
        if (
            seg.size > cfg.segment_bytes - size
            or waited > cfg.segment_ms
            or seg.index.is_full
            or seg.time_index.is_full
        ):
            return self._roll(first)
        return seg

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        return self._roll(self.log_end_offset)

    def _roll(self, base: int) -> LogSegment:
        old = self.active
        if old.size == 0 and old.base_offset == base:
            return old
        # Not fsynced here, on the event loop: the finished segment's flush does it.
        # An empty segment has no flush; a lost snapshot only costs a longer replay.
        snapshot = self._snapshot_producers(base, sync=False)
        if old.size == 0:
            self.segments.pop()
            self._bases.pop()
            old.delete()
        else:
            old.finish()
            fut = _flush_executor().submit(_fsync_and_close, old.dup_fds(), self.dir, snapshot)
            self._pending.append((base, fut))
        seg = new_segment(self.dir, base, self.config, self._now_ms())
        self.segments.append(seg)
        self._bases.append(base)
        return seg

    def _snapshot_producers(self, offset: int, sync: bool) -> Path | None:
        """Snapshot producer state -> its path; a failed write (a full disk) only costs
        a longer rebuild from the log at the next start, so it is logged, not raised."""
        try:
            return self.producer_state.take_snapshot(offset, sync)
        except OSError as e:
            log.warning("%s: producer snapshot at %d not written: %s", self, offset, e)
            return None

    # -- flush ---------------------------------------------------------------------

    def _reap_flushes(self, wait: bool) -> None:
        while self._pending and (wait or self._pending[0][1].done()):
            offset, fut = self._pending.pop(0)
            fut.result()
            self._recovery_point = max(self._recovery_point, min(offset, self.log_end_offset))

    def flush(self) -> None:
        """fsync everything up to the log end; the recovery point becomes the log end."""
        self._reap_flushes(wait=True)
        if self.log_end_offset > self._recovery_point:
            i = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
            for seg in self.segments[i:]:
                seg.flush()
        self._recovery_point = self.log_end_offset
        self.last_flush_ms = self._now_ms()

    def flush_if_due(self) -> bool:
        """Flush when flush.ms has passed since the last flush and there is data."""
        self._reap_flushes(wait=False)
        due = self._now_ms() - self.last_flush_ms >= self.config.flush_ms
        if due and self.log_end_offset > self._recovery_point:
            self.flush()
            return True
        return False

    # -- read ----------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchSlice | None:
        """Whole batches from the one containing `offset`, within one segment."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return None
        i = bisect.bisect_right(self._bases, offset) - 1
        for seg in self.segments[i:]:
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

    def read_batches(
        self, offset: int, max_bytes: int, max_offset: int | None = None
    ) -> list[RecordBatch]:
        piece = self.read(offset, max_bytes, max_offset)
        if piece is None:
            return []
        return list(iter_batches(piece.read_bytes(), validate=False))

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= ts_ms."""
        for seg in self.segments:
            if seg.max_timestamp < ts_ms:
                continue
            _, indexed_offset = seg.time_index.lookup(ts_ms)
            pos = seg.index.lookup(indexed_offset)[1]
            while (h := seg.read_header(pos)) is not None:
                if h.max_timestamp >= ts_ms:
                    return self._first_record_at(seg, pos, h, ts_ms)
                pos += h.size
        return None

    def _first_record_at(
        self, seg: LogSegment, pos: int, h: RecordBatch, ts_ms: int
    ) -> tuple[int, int]:
        batch = RecordBatch(os.pread(seg.file.fileno(), h.size, pos))
        for r in batch.records():
            if r.timestamp >= ts_ms:
                return r.offset, r.timestamp
        return batch.base_offset, batch.max_timestamp

    # -- retention, truncation -------------------------------------------------------

    def delete_old_segments(self, max_offset: int | None = None) -> int:
        """Delete closed segments past retention.ms / retention.bytes (only those that
        end at or before `max_offset`, e.g. the high watermark). Returns the count."""
        cfg = self.config
        if not cfg.delete:
            return 0
        now = self._now_ms()
        deleted = 0
        diff = self.size_bytes - cfg.retention_bytes
        while len(self.segments) > 1:
            seg, nxt = self.segments[0], self.segments[1]
            if max_offset is not None and nxt.base_offset > max_offset:
                break
            ts = seg.max_timestamp
            if ts < 0:
                ts = int(os.stat(seg.log_path).st_mtime * 1000)
            by_time = cfg.retention_ms >= 0 and now - ts > cfg.retention_ms
            by_size = cfg.retention_bytes >= 0 and diff - seg.size >= 0
            if not (by_time or by_size):
                break
            diff -= seg.size
            self._delete_first_segment()
            deleted += 1
        return deleted

    def _delete_first_segment(self) -> None:
        seg = self.segments.pop(0)
        self._bases.pop(0)
        self.size_bytes -= seg.size
        seg.delete()
        self._start_at(max(self.log_start_offset, self.segments[0].base_offset))

    def _start_at(self, offset: int) -> None:
        self.log_start_offset = offset
        self._recovery_point = max(self._recovery_point, offset)
        self.cleaner_checkpoint = max(self.cleaner_checkpoint, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.delete_snapshots_below(offset)

    def delete_records_before(self, offset: int) -> bool:
        """DeleteRecords: the log starts at `offset` (at most the log end); segments
        wholly below it go, reads below it are out of range. Whether it moved."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._delete_first_segment()
        self._start_at(offset)
        return True

    def remove_expired_producers(self) -> int:
        """Forget idempotent producers idle past producer.id.expiration.ms."""
        return self.producer_state.remove_expired(self._now_ms())

    def truncate_to(self, offset: int) -> None:
        """Remove everything at or after `offset` (follower divergence)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset and self.segments[0].base_offset >= offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._reap_flushes(wait=True)
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            seg = self.segments.pop()
            self._bases.pop()
            seg.delete()
        seg = self.active
        found = seg.find_batch(offset)
        new_end = offset if found is None else min(offset, found[1].base_offset)
        seg.truncate_to(offset)
        seg.activate()
        self.size_bytes = sum(s.size for s in self.segments)
        self.log_end_offset = new_end
        self._recovery_point = min(self._recovery_point, new_end)
        self.cleaner_checkpoint = min(self.cleaner_checkpoint, new_end)
        self.leader_epoch_cache.truncate_from_end(new_end)
        self._reload_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log; it restarts at `offset`."""
        self._reap_flushes(wait=True)
        for seg in self.segments:
            seg.delete()
        self.segments = [new_segment(self.dir, offset, self.config, self._now_ms())]
        self._bases = [offset]
        self.size_bytes = 0
        self.log_start_offset = self.log_end_offset = offset
        self._recovery_point = self.cleaner_checkpoint = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully()

    # -- config, compaction, lifecycle -----------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.active.index_interval_bytes = config.index_interval_bytes

    def compact(self) -> None:
        from broker.log.cleaner import clean

        clean(self, self._now_ms())

    def replace_segment(self, i: int, seg: LogSegment) -> None:
        """Swap in a cleaned copy of closed segment `i` (same base offset)."""
        old = self.segments[i]
        self.size_bytes += seg.size - old.size
        self.segments[i] = seg
        self._bases[i] = seg.base_offset

    def close(self) -> None:
        self._snapshot_producers(self.log_end_offset, sync=True)
        try:
            self._reap_flushes(wait=True)
            self.active.finish()
            self.flush()
        finally:
            for seg in self.segments:
                seg.close()

    def delete(self) -> None:
        """Remove the partition's directory and everything in it."""
        self._reap_flushes(wait=True)
        for seg in self.segments:
            seg.delete()
        shutil.rmtree(self.dir, ignore_errors=True)
