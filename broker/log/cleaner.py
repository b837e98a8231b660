"""Log compaction (cleanup.policy=compact): keep the latest record per key.

Kafka's scheme, on one partition at a time:
- The cleanable range is the closed segments from the log start up to the first
  segment that is active or younger than min.compaction.lag.ms.
- The dirty part starts at the cleaner checkpoint (what the last pass had covered;
  each log's `CleanerState`, defined here, keeps it with the tombstone deadline).
  A map key -> latest offset is built from the dirty part only; the clean part is
  already unique per key.
- Every cleanable segment is then rewritten: a keyed record survives if no later
  offset for its key is in the map; a tombstone (null value) also goes once its
  segment is older than delete.retention.ms. Records without a key are kept (the
  server rejects them at produce time). Surviving records keep their offsets; a
  batch whose records all survive is copied byte-for-byte, a batch left empty is
  dropped, others are rebuilt (`rebuild_batch`) with the same base offset, codec,
  producer fields and last offset delta. Control batches are copied as they are.
- Transactions (Kafka's cleaner): the cleanable range also stops before the segment
  holding the first unstable offset (a transaction still ongoing, or completed but
  not yet below the high watermark), so an open transaction's records never shadow
  committed ones. Batches of aborted transactions (from the transaction indexes)
  are left out of the key map and dropped from the rewritten segments. A COMMIT
  marker goes, as a tombstone does, once no record of its transaction is left and
  its segment is older than delete.retention.ms (an exactly-once writer commits a
  transaction per batch to a compacted topic: its markers would otherwise outgrow
  the data). ABORT markers are kept for good: each has a `.txnindex` entry that
  read_committed consumers need matched by the marker, and keeping them lets a
  cleaned segment take over its predecessor's transaction index unchanged.
- A rewritten segment is written as `.cleaned` files, fsynced, and swapped in: old
  indexes unlinked, new log renamed over the old one, new indexes renamed. A crash
  at any point leaves either log with missing indexes (rebuilt at load) or leftover
  `.cleaned` files (deleted at load).
"""

import os

from broker.log.common import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from broker.log.loader import new_segment
from broker.log.segment import LogSegment
from broker.protocol.control import ControlType, control_type
from broker.protocol.records import RecordBatch, iter_batches, rebuild_batch


def _batches(seg: LogSegment) -> list[RecordBatch]:
    data = os.pread(seg.file.fileno(), seg.size, 0) if seg.size else b""
    return list(iter_batches(data, validate=False))


def _records(batch: RecordBatch):
    """The records of a data batch; None for a control batch, which is kept as is."""
    return None if batch.is_control else batch.records()


class CleanerState:
    """Where compaction of one log stands. Owned by its PartitionLog (one event loop),
    which moves it when the log's ends move; the cleaner reads and advances it.

    `checkpoint`: the log below it was clean after the last pass (the first dirty
    offset; `cleaner-offset-checkpoint` persists it). `tombstone_deadline_ms`: when
    the oldest tombstone (or emptied commit marker) a pass kept may go, so a pass is
    due then even with nothing dirty; None when none was kept."""

    __slots__ = ("checkpoint", "tombstone_deadline_ms")

    def __init__(self, checkpoint: int):
        self.checkpoint = checkpoint
        self.tombstone_deadline_ms: int | None = None

    def log_starts_at(self, offset: int) -> None:
        """The log start moved up to `offset` (retention, DeleteRecords)."""
        self.checkpoint = max(self.checkpoint, offset)

    def log_ends_at(self, offset: int) -> None:
        """The log was truncated to end at `offset`: what follows is dirty again."""
        self.checkpoint = min(self.checkpoint, offset)

    def restart_at(self, offset: int) -> None:
        """The log was emptied and restarts at `offset`."""
        self.checkpoint = offset


def _first_unstable(log) -> int | None:
    """The oldest transaction not yet known stable, without touching producer state."""
    ps = log.producer_state
    firsts = [t.first_offset for t in ps.unreplicated]
    if ps.ongoing:
        firsts.append(next(iter(ps.ongoing)))
    return min(firsts, default=None)


class _Aborted:
    """Whether a batch belongs to an aborted transaction of the cleaned range."""

    def __init__(self, log, end: int):
        self.by_producer: dict[int, list[tuple[int, int]]] = {}
        for txn in log.collect_aborted(log.log_start_offset, end):
            self.by_producer.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset)
            )

    def __call__(self, batch: RecordBatch) -> bool:
        if not batch.is_transactional or batch.is_control:
            return False
        ranges = self.by_producer.get(batch.producer_id, ())
        return any(first <= batch.base_offset <= last for first, last in ranges)


def clean(log, now_ms: int) -> None:
    """One compaction pass over `log` (a PartitionLog), if there is anything to do;
    it advances `log.cleaner_state`."""
    cfg = log.config
    if not cfg.compact:
        return
    closed = log.segments[:-1]
    unstable = _first_unstable(log)
    n = 0
    for seg in closed:
        if cfg.min_compaction_lag_ms > 0 and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
            break
        if unstable is not None and log.segments[n + 1].base_offset > unstable:
            break
        n += 1
    if n == 0:
        return
    end = log.segments[n].base_offset
    state = log.cleaner_state
    first_dirty = max(state.checkpoint, log.log_start_offset)
    due = state.tombstone_deadline_ms is not None and now_ms >= state.tombstone_deadline_ms
    if first_dirty >= end and not due:
        return
    aborted = _Aborted(log, end)
    latest: dict[bytes, int] = {}
    for seg in closed[:n]:
        if seg.next_offset <= first_dirty:
            continue
        for batch in _batches(seg):
            if batch.last_offset < first_dirty or aborted(batch):
                continue
            for r in _records(batch) or ():
                if r.key is not None and r.offset >= first_dirty:
                    latest[r.key] = r.offset
    deadline = None
    kept_data: dict[int, bool] = {}  # producer id -> a record of its transaction is kept
    for i in range(n):
        seg = log.segments[i]
        seg_ts = (
            seg.max_timestamp
            if seg.max_timestamp >= 0
            else int(os.stat(seg.log_path).st_mtime * 1000)
        )
        expire_tombstones = now_ms - seg_ts > cfg.delete_retention_ms
        kept_tombstone = _rewrite(log, i, latest, aborted, kept_data, expire_tombstones, now_ms)
        if kept_tombstone:
            at = seg_ts + cfg.delete_retention_ms + 1
            deadline = at if deadline is None else min(deadline, at)
    state.checkpoint = max(state.checkpoint, end)
    state.tombstone_deadline_ms = deadline


def _rewrite(
    log,
    i: int,
    latest: dict,
    aborted: _Aborted,
    kept_data: dict[int, bool],
    expire_tombstones: bool,
    now_ms: int,
) -> bool:
    """Rewrite segment i if anything in it goes; returns whether a tombstone (or a
    commit marker that may go later) stayed. `kept_data` carries, from segment to
    segment, which producers' current transactions still hold a record."""
    seg = log.segments[i]
    out: list[bytes] = []
    changed = False
    kept_tombstone = False
    for batch in _batches(seg):
        if aborted(batch):
            changed = True
            continue
        recs = _records(batch)
        if recs is None:
            if _empty_commit(batch, kept_data):
                if expire_tombstones:
                    changed = True
                    continue
                kept_tombstone = True
            out.append(bytes(batch.raw()))
            continue
        keep = []
        for r in recs:
            if r.key is not None and latest.get(r.key, -1) > r.offset:
                continue
            if r.key is not None and r.value is None:
                if expire_tombstones:
                    continue
                kept_tombstone = True
            keep.append(r)
        if keep and batch.is_transactional:
            kept_data[batch.producer_id] = True
        if len(keep) == len(recs):
            out.append(bytes(batch.raw()))
        elif keep:
            out.append(rebuild_batch(batch, keep))
            changed = True
        else:
            changed = True
    if changed:
        _swap_in(log, i, b"".join(out), now_ms)
    return kept_tombstone


def _empty_commit(marker: RecordBatch, kept_data: dict[int, bool]) -> bool:
    """Whether control batch `marker` commits a transaction none of whose records is
    left (it ends the producer's current transaction either way)."""
    left = kept_data.pop(marker.producer_id, False)
    records = marker.records()
    try:
        commit = len(records) == 1 and control_type(records[0].key) == ControlType.COMMIT
    except ValueError:
        return False
    return commit and not left


def _swap_in(log, i: int, data: bytes, now_ms: int) -> None:
    old = log.segments[i]
    cleaned = new_segment(log.dir, old.base_offset, log.config, now_ms, suffix=".cleaned")
    cleaned.append((data,), len(data), list(iter_batches(data, validate=False)))
    cleaned.finish()
    cleaned.flush()
    cleaned.next_offset = old.next_offset
    old.index.delete()
    old.time_index.delete()
    cleaned.txn_index = old.txn_index
    os.replace(cleaned.log_path, old.log_path)
    cleaned.log_path = old.log_path
    cleaned.index.rename(segment_path(log.dir, old.base_offset, INDEX_SUFFIX))
    cleaned.time_index.rename(segment_path(log.dir, old.base_offset, TIME_INDEX_SUFFIX))
    del old.file
    log.local_log.replace_segment(i, cleaned)
