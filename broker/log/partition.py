"""PartitionLog: the log of one partition as the rest of the broker sees it (Kafka's
UnifiedLog).

The layers under it, each in its own module:

- `validator.py` (LogValidator): checks produced batches and assigns their offsets,
  no I/O;
- `local_log.py` (LocalLog): the segments on disk: append, roll, flush, read,
  truncate, delete; it owns the log end offset and the recovery point;
- `segments.py` (LogSegments): the ordered segments and the one "which segment
  holds offset X" lookup;
- `producer_state.py`, `epoch.py`, `aborted.py`, `cleaner.py`: producer state,
  leader epochs, aborted transactions, compaction state.

This module owns what ties them together: the log start offset (retention and
DeleteRecords move it), the order of an append (validate, producer state, write,
epoch cache), transaction markers and their index entries, and what a truncation
or a new log start means for every layer.

Transactions (KIP-98): producer state tracks each producer's ongoing transaction;
a marker (`append_txn_marker` on the leader, a control batch in `append_as_follower`,
a replayed one in recovery) completes it, and an aborted one is indexed in the
`.txnindex` of the segment holding the marker. `first_unstable_offset(hw)` gives
what the partition's last stable offset is capped by; `collect_aborted` what a
read_committed fetch must tell the consumer to drop. `has_aborted` stays False on a
partition that never saw an abort, so fetches there skip the search.
"""

import logging
import time
from collections.abc import Callable
from pathlib import Path

from broker.log.aborted import collect_aborted, rebuild_txn_indexes
from broker.log.cleaner import CleanerState, clean
from broker.log.common import AppendInfo, FetchSlice, OffsetOutOfRangeError
from broker.log.config import LogConfig
from broker.log.epoch import LeaderEpochCache
from broker.log.local_log import LocalLog
from broker.log.producer_state import (
    CompletedTxn,
    ProducerStateError,
    ProducerStateManager,
    VerificationGuard,
)
from broker.log.segment import LogSegment
from broker.log.segments import LogSegments
from broker.log.txn_index import AbortedTxn
from broker.log.validator import (
    Buffer,
    LogValidator,
    PlacedBatches,
    assign_offsets,
    validate_follower,
)
from broker.protocol.control import end_txn_marker_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.records import RecordBatch, iter_batches

log = logging.getLogger(__name__)


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
        clock: Callable[[], float] = time.time,
        *,
        clean_shutdown: bool = False,
        cleaner_checkpoint: int = 0,
        log_start_offset: int = 0,
    ):
        self.dir = Path(dir)
        self.topic, self.partition = parse_dir_name(self.dir.name)
        self.config = config
        self.validator = LogValidator(config, f"{self.topic}-{self.partition}")
        self._clock = clock
        self.dir.mkdir(parents=True, exist_ok=True)
        self.local_log = LocalLog(
            self.dir, config, recovery_point, clean_shutdown, self._now_ms, self._roll_snapshot
        )
        self.log_start_offset = min(
            max(self.segments.first.base_offset, log_start_offset), self.log_end_offset
        )
        self.local_log.raise_recovery_point(self.log_start_offset)
        self.cleaner_state = CleanerState(max(cleaner_checkpoint, self.log_start_offset))
        self.leader_epoch_cache = LeaderEpochCache(self.dir, lambda: self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state = ProducerStateManager(self.dir, config.producer_id_expiration_ms)
        self.has_aborted = any(s.txn_index.entries for s in self.segments)
        if rebuild_txn_indexes(self, self._now_ms()):
            self.has_aborted = True
        self._reload_producer_state()

    def _reload_producer_state(self) -> None:
        self.producer_state.truncate_to(
            self.log_start_offset,
            self.log_end_offset,
            lambda offset: (batch for _, batch in self.segments.batches_from(offset)),
            self._now_ms(),
        )

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @property
    def segments(self) -> LogSegments:
        return self.local_log.segments

    @property
    def active(self) -> LogSegment:
        return self.local_log.segments.active

    @property
    def log_end_offset(self) -> int:
        return self.local_log.log_end_offset

    @property
    def size_bytes(self) -> int:
        return self.local_log.size_bytes

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, [{self.log_start_offset}, {self.log_end_offset}))"

    # -- append --------------------------------------------------------------------

    def append(
        self, records: Buffer, leader_epoch: int = 0, guard: VerificationGuard | None = None
    ) -> AppendInfo:
        """Leader append: validate and assign offsets from the log end (validator.py
        has the checks and their order), check producer state, write.

        The producer state of an idempotent batch is checked last, as Kafka does: a
        retried duplicate returns its original offsets and writes nothing; `guard` is
        the KIP-890 verification's, see producer_state.py. A refusal raises the log's
        `ApiError` family and writes nothing."""
        validator = self.validator
        now_ms = self._now_ms() if validator.needs_clock else 0
        placed = validator.validate_and_assign_offsets(
            records, self.local_log.log_end_offset, leader_epoch, now_ms
        )
        producer = placed.producer_batch
        if producer is not None:
            verdict = self.producer_state.check(producer, guard)
            if verdict.duplicate is not None:
                return AppendInfo(*verdict.duplicate, -1, -1, 0, 0)
            if not verdict.append:
                raise ProducerStateError(verdict.error)
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, placed.first_offset)
        self.local_log.append(placed)
        if producer is not None:
            self.producer_state.update(
                producer, placed.first_offset, placed.last_offset, self._now_ms()
            )
        return AppendInfo(
            placed.first_offset,
            placed.last_offset,
            placed.max_timestamp,
            now_ms if validator.log_append_time else -1,
            len(placed.batches),
            placed.size,
        )

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
        placed = assign_offsets([RecordBatch(data)], data, self.log_end_offset, leader_epoch)
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, placed.first_offset)
        self.local_log.append(placed)
        done = self.producer_state.append_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            placed.first_offset,
            self._now_ms(),
        )
        if done is not None:
            self._completed(done)
        return _append_info(placed)

    def append_as_follower(self, records: Buffer) -> AppendInfo:
        """Replica append: offsets kept as given; they must start at or after the log
        end and increase. Batches' leader epochs feed the epoch cache."""
        placed = validate_follower(records, self.log_end_offset)
        cache = self.leader_epoch_cache
        for b in placed.batches:
            if b.partition_leader_epoch > cache.latest_epoch:  # -1 (none) never is
                cache.assign(b.partition_leader_epoch, b.base_offset)
        self.local_log.append(placed)
        for b in placed.batches:
            done = self.producer_state.replay(b)
            if done is not None:
                self._completed(done)
        return _append_info(placed)

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
        return collect_aborted(self.segments, fetch_offset, upper_bound)

    # -- roll, flush -----------------------------------------------------------------

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        return self.local_log.roll()

    def _roll_snapshot(self, offset: int) -> Path | None:
        """The producer snapshot a roll to `offset` takes (fsynced with the finished
        segment on the flush thread)."""
        return self._snapshot_producers(offset, sync=False)

    def _snapshot_producers(self, offset: int, sync: bool) -> Path | None:
        """Snapshot producer state -> its path; a failed write (a full disk) only costs
        a longer rebuild from the log at the next start, so it is logged, not raised."""
        try:
            return self.producer_state.take_snapshot(offset, sync)
        except OSError as e:
            log.warning("%s: producer snapshot at %d not written: %s", self, offset, e)
            return None

    def flush(self) -> None:
        """fsync everything up to the log end; the recovery point becomes the log end."""
        self.local_log.flush()

    def flush_if_due(self) -> bool:
        """Flush when flush.ms has passed since the last flush and there is data."""
        return self.local_log.flush_if_due()

    # -- read ----------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchSlice | None:
        """Whole batches from the one containing `offset`, within one segment."""
        if offset < self.log_start_offset or offset > self.local_log.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        return self.local_log.read(offset, max_bytes, max_offset)

    def read_batches(
        self, offset: int, max_bytes: int, max_offset: int | None = None
    ) -> list[RecordBatch]:
        piece = self.read(offset, max_bytes, max_offset)
        if piece is None:
            return []
        return list(iter_batches(piece.read_bytes(), validate=False))

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= ts_ms."""
        return self.local_log.offset_for_timestamp(ts_ms)

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
        segments = self.segments
        while len(segments) > 1:
            seg, nxt = segments[0], segments[1]
            if max_offset is not None and nxt.base_offset > max_offset:
                break
            ts = seg.max_timestamp
            if ts < 0:
                ts = int(seg.log_path.stat().st_mtime * 1000)
            by_time = cfg.retention_ms >= 0 and now - ts > cfg.retention_ms
            by_size = cfg.retention_bytes >= 0 and diff - seg.size >= 0
            if not (by_time or by_size):
                break
            diff -= seg.size
            self._delete_first_segment()
            deleted += 1
        return deleted

    def _delete_first_segment(self) -> None:
        self.local_log.delete_first_segment()
        self._start_at(max(self.log_start_offset, self.segments.first.base_offset))

    def _start_at(self, offset: int) -> None:
        self.log_start_offset = offset
        self.local_log.raise_recovery_point(offset)
        self.cleaner_state.log_starts_at(offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.delete_snapshots_below(offset)

    def delete_records_before(self, offset: int) -> bool:
        """DeleteRecords: the log starts at `offset` (at most the log end); segments
        wholly below it go, reads below it are out of range. Whether it moved."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        segments = self.segments
        while len(segments) > 1 and segments[1].base_offset <= offset:
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
        if offset <= self.log_start_offset and self.segments.first.base_offset >= offset:
            self.truncate_fully_and_start_at(offset)
            return
        new_end = self.local_log.truncate_to(offset)
        self.cleaner_state.log_ends_at(new_end)
        self.leader_epoch_cache.truncate_from_end(new_end)
        self._reload_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log; it restarts at `offset`."""
        self.local_log.truncate_fully_and_start_at(offset)
        self.log_start_offset = offset
        self.cleaner_state.restart_at(offset)
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully()

    # -- config, compaction, lifecycle -----------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.validator = LogValidator(config, self.validator.topic_partition)
        self.producer_state.expiration_ms = config.producer_id_expiration_ms
        self.local_log.update_config(config)

    def compact(self) -> None:
        clean(self, self._now_ms())

    def close(self) -> None:
        """Snapshot producer state (as Kafka, only when the log moved past the newest
        snapshot: a partition untouched since then has one already), then flush and
        close the segments."""
        snapshots = self.producer_state.snapshot_offsets()
        if (snapshots[-1] if snapshots else 0) < self.log_end_offset:
            self._snapshot_producers(self.log_end_offset, sync=True)
        self.local_log.close()

    def release(self) -> None:
        """Close without snapshotting or flushing: the log is about to be deleted."""
        self.local_log.release()

    def delete(self) -> None:
        """Remove the partition's directory and everything in it."""
        self.local_log.delete()


def _append_info(placed: PlacedBatches) -> AppendInfo:
    return AppendInfo(
        placed.first_offset,
        placed.last_offset,
        placed.max_timestamp,
        -1,
        len(placed.batches),
        placed.size,
    )
