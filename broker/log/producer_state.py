"""Idempotent-producer state of one partition: de-duplication by batch sequence.

Theory of operation (Kafka's ProducerStateManager, non-transactional part):

An idempotent producer stamps every batch with (producer id, epoch, base sequence);
sequences count records per partition and wrap from int32 max to 0. For each producer
id the partition remembers its epoch and the sequence/offset ranges of its last
`MAX_BATCHES` (5) appended batches, which is the most a client keeps in flight.

Before an append the partition calls `check(batch)`:

- no producer id (-1): append, nothing to remember;
- epoch older than the known one: INVALID_PRODUCER_EPOCH (47);
- same epoch and the exact sequence range of a remembered batch: a retry of a batch
  already in the log -> `Verdict.duplicate` carries its original offsets; the
  partition answers error NONE with that base offset and appends nothing;
- newer epoch: the sequence must restart at 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- same epoch: the base sequence must follow the last one (+1, or 0 after int32 max),
  else OUT_OF_ORDER_SEQUENCE_NUMBER;
- unknown producer id: accepted with any sequence. Kafka 2.5+ (KIP-360) does the
  same, so a producer whose state expired or whose records were deleted by retention
  continues instead of failing with UNKNOWN_PRODUCER_ID as Kafka 2.0-2.4 did.

After the append the partition calls `update(batch, first_offset, last_offset,
timestamp_ms)`. `check`, the append and `update` must run without an await between
them (one produce request carries at most one batch per partition, so this is the
whole critical section).

Persistence: `take_snapshot(offset)` writes every producer's entry, all remembered
batches included, to `<20-digit offset>.snapshot` in the partition directory (the
partition takes one at each segment roll, named after the new segment's base offset,
and one on clean shutdown at the log end offset). `load(log_start, log_end,
batches_from, now_ms)` rebuilds the state on start-up: the newest readable snapshot
at or below the log end, then every batch of the log after it; snapshots above the
log end (left over from a truncation) are deleted. `truncate_to` is the same reload
after the log was truncated.

Wiring into PartitionLog: `check` before the leader append (a duplicate returns the
original offsets without writing; an error raises `ProducerStateError`), `update`
after it, `replay` for each follower-appended batch, `take_snapshot` at rolls and
close, `load` when the log opens and `truncate_to` after a truncation, both with
`batch_headers_from(log, offset)` as the replay source, `truncate_fully` when the
log is emptied, `delete_snapshots_below` after retention, and `remove_expired`
periodically.

Snapshots are written to a temp file and renamed over the target. Durability is
Kafka's since 3.x: a roll's snapshot is written on the event loop without fsync
(`take_snapshot(offset, sync=False)`) and fsynced by `sync_snapshot` on the log's
flush thread with the segment the roll finished, before the recovery point passes
it; the close snapshot is fsynced, file and rename, before `take_snapshot` returns.
Durability is never needed for correctness: a snapshot that a power cut lost or tore
before its fsync is missing, fails its CRC or lies above the recovered log end, and
`load` falls back to an older one (or the log start) and replays the batches after
it from the log, which costs start-up time only.

Snapshot file format (big-endian):

    magic   4s  b"LFPS"
    version u16 = 1
    crc     u32 CRC-32C of everything after this field
    count   u32 number of producer entries, then per entry:
        producer_id i64, epoch i16, last_timestamp i64, batch count u8, then per batch
        (oldest first): first_seq i32, last_seq i32, first_offset i64, last_offset i64
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

import crc32c

from broker.protocol.errors import ApiError, ErrorCode
from common.fsutil import TMP_SUFFIX, atomic_write

log = logging.getLogger(__name__)

MAX_BATCHES = 5
INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1
DEFAULT_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"

_MAGIC = b"LFPS"
_VERSION = 1
_HEADER = struct.Struct(">4sHI")
_COUNT = struct.Struct(">I")
_ENTRY = struct.Struct(">qhqB")
_BATCH = struct.Struct(">iiqq")


class ProducerBatch(Protocol):
    """The fields of a stored record batch that producer state reads."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a batch: append it, acknowledge a duplicate, or refuse it."""

    error: ErrorCode = ErrorCode.NONE
    duplicate: tuple[int, int] | None = None  # (first, last) offset of the original

    @property
    def append(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None


APPEND = Verdict()


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class ProducerEntry:
    """One producer id's epoch and last batches. Owned by its ProducerStateManager."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int, last_timestamp: int):
        self.producer_id = producer_id
        self.epoch = epoch
        self.last_timestamp = last_timestamp
        self.batches: collections.deque[BatchMetadata] = collections.deque(maxlen=MAX_BATCHES)

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    def find_duplicate(self, base_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == base_seq and b.last_seq == last_seq:
                return b
        return None

    def add(self, epoch: int, meta: BatchMetadata, timestamp: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(meta)
        self.last_timestamp = timestamp


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateError(ApiError):
    """A batch refused by producer state: `code` is OUT_OF_ORDER_SEQUENCE_NUMBER or
    INVALID_PRODUCER_EPOCH, for the partition's produce response."""


def batch_headers_from(log, offset: int) -> Iterator[ProducerBatch]:
    """Headers of a PartitionLog's batches from the one holding `offset` to the end,
    read 61 bytes at a time (producer state needs no records): the `batches_from`
    argument of `load` and `truncate_to`."""
    segments = log.segments
    i = max(0, bisect.bisect_right([s.base_offset for s in segments], offset) - 1)
    for seg in segments[i:]:
        found = seg.find_batch(max(offset, seg.base_offset))
        if found is None:
            continue
        pos = found[0]
        while (header := seg.read_header(pos)) is not None:
            yield header
            pos += header.size


def _replace_unsynced(path: Path, data: bytes) -> None:
    """`atomic_write` without its fsyncs: a temp file renamed over `path`."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
    except OSError:
        tmp.unlink(missing_ok=True)  # e.g. ENOSPC: no torn temp file holding space
        raise
    os.replace(tmp, path)


def sync_snapshot(path: Path) -> None:
    """fsync a snapshot written with `take_snapshot(sync=False)`; any thread. One
    deleted meanwhile (truncation, retention) is skipped. The rename becomes durable
    with the directory's fsync, which is the caller's."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CorruptSnapshotError(ValueError):
    """A producer snapshot file is truncated or fails its CRC."""


class ProducerStateManager:
    """Producer de-duplication state of one partition directory.

    Owned by the partition's log; not thread-safe, call it from the one task (or
    event loop) that appends to the partition.
    """

    def __init__(self, partition_dir: str | Path, expiration_ms: int = DEFAULT_EXPIRATION_MS):
        self.dir = Path(partition_dir)
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}

    # -- the append path ------------------------------------------------------------

    def check(self, batch: ProducerBatch) -> Verdict:
        """Decide whether `batch` (not yet appended) is new, a retry, or invalid."""
        pid = batch.producer_id
        if pid < 0:
            return APPEND
        entry = self.producers.get(pid)
        if entry is None:
            return APPEND
        epoch, seq = batch.producer_epoch, batch.base_sequence
        if epoch < entry.epoch:
            return Verdict(ErrorCode.INVALID_PRODUCER_EPOCH)
        if epoch == entry.epoch:
            last = entry.last_seq
            if last is None or in_sequence(last, seq):
                return APPEND  # the next batch cannot repeat a remembered one
            dup = entry.find_duplicate(seq, batch.last_sequence)
            if dup is not None:
                return Verdict(duplicate=(dup.first_offset, dup.last_offset))
            return Verdict(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return APPEND if seq == 0 else Verdict(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)

    def update(
        self, batch: ProducerBatch, first_offset: int, last_offset: int, timestamp_ms: int
    ) -> None:
        """Record an appended batch at its assigned offsets; `timestamp_ms` dates it for expiry."""
        pid = batch.producer_id
        if pid < 0:
            return
        meta = BatchMetadata(batch.base_sequence, batch.last_sequence, first_offset, last_offset)
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, batch.producer_epoch, timestamp_ms)
        entry.add(batch.producer_epoch, meta, timestamp_ms)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for `expiration_ms`; returns how many were removed."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots --------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        out = []
        for p in self.dir.glob("*" + SNAPSHOT_SUFFIX):
            stem = p.name[: -len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def take_snapshot(self, offset: int, sync: bool = True) -> Path:
        """Write the current state as `<offset>.snapshot`, all or nothing, and return its
        path. `sync=False` (a roll, on the event loop) skips both fsyncs: the caller
        passes the path to `sync_snapshot` on its flush thread."""
        body = bytearray(_COUNT.pack(len(self.producers)))
        for e in self.producers.values():
            body += _ENTRY.pack(e.producer_id, e.epoch, e.last_timestamp, len(e.batches))
            for b in e.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
        data = _HEADER.pack(_MAGIC, _VERSION, crc32c.crc32c(bytes(body))) + body
        path = self.dir / snapshot_name(offset)
        if sync:
            atomic_write(path, data)
        else:
            _replace_unsynced(path, data)
        return path

    def delete_snapshots_below(self, offset: int) -> None:
        """Drop snapshots older than `offset` (after retention deleted their segments),
        always keeping the newest one."""
        offsets = self.snapshot_offsets()
        for o in offsets[:-1]:
            if o < offset:
                (self.dir / snapshot_name(o)).unlink(missing_ok=True)

    @staticmethod
    def read_snapshot(path: Path) -> list[ProducerEntry]:
        data = path.read_bytes()
        if len(data) < _HEADER.size + _COUNT.size:
            raise CorruptSnapshotError(f"{path.name}: truncated header")
        magic, version, crc = _HEADER.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise CorruptSnapshotError(f"{path.name}: bad magic/version {magic!r}/{version}")
        body = memoryview(data)[_HEADER.size :]
        if crc32c.crc32c(body) != crc:
            raise CorruptSnapshotError(f"{path.name}: CRC mismatch")
        try:
            (count,) = _COUNT.unpack_from(body)
            pos = _COUNT.size
            entries = []
            for _ in range(count):
                pid, epoch, ts, n = _ENTRY.unpack_from(body, pos)
                pos += _ENTRY.size
                entry = ProducerEntry(pid, epoch, ts)
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                entries.append(entry)
        except struct.error as e:
            raise CorruptSnapshotError(f"{path.name}: {e}") from None
        if pos != len(body):
            raise CorruptSnapshotError(f"{path.name}: {len(body) - pos} trailing bytes")
        return entries

    # -- recovery ---------------------------------------------------------------------

    def load(
        self,
        log_start: int,
        log_end: int,
        batches_from: Callable[[int], Iterable[ProducerBatch]],
        now_ms: int,
    ) -> None:
        """Rebuild the state of a log holding offsets [log_start, log_end).

        `batches_from(offset)` yields the log's batches in order, starting with the
        one that holds `offset` (or the first after it). Snapshots above `log_end` are
        deleted; an unreadable snapshot is logged, deleted, and the next older used.
        Producers restored from a snapshot are dropped if already expired at `now_ms`.
        """
        self.producers = {}
        start = log_start
        for offset in reversed(self.snapshot_offsets()):
            path = self.dir / snapshot_name(offset)
            if offset > log_end:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = self.read_snapshot(path)
            except (CorruptSnapshotError, OSError) as e:
                log.warning("ignoring producer snapshot %s: %s", path, e)
                path.unlink(missing_ok=True)
                continue
            for e in entries:
                if now_ms - e.last_timestamp < self.expiration_ms:
                    self.producers[e.producer_id] = e
            start = max(offset, log_start)
            break
        if start >= log_end:
            return
        for batch in batches_from(start):
            if batch.base_offset >= log_end:
                break
            if batch.last_offset < start:
                continue
            self.replay(batch)

    def truncate_to(
        self,
        log_start: int,
        offset: int,
        batches_from: Callable[[int], Iterable[ProducerBatch]],
        now_ms: int,
    ) -> None:
        """After the log was truncated to end at `offset`: drop later snapshots, reload."""
        self.load(log_start, offset, batches_from, now_ms)

    def truncate_fully(self) -> None:
        """The log was emptied (restarts at a new offset): forget every producer and
        delete every snapshot."""
        self.producers = {}
        for offset in self.snapshot_offsets():
            (self.dir / snapshot_name(offset)).unlink(missing_ok=True)

    def replay(self, batch: ProducerBatch) -> None:
        """Apply a batch already in the log (recovery, or a follower copying the
        leader's log): no validation, but an older epoch never overwrites a newer one."""
        if batch.producer_id < 0:
            return
        entry = self.producers.get(batch.producer_id)
        if entry is not None and batch.producer_epoch < entry.epoch:
            return
        self.update(batch, batch.base_offset, batch.last_offset, batch.max_timestamp)
