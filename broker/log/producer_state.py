"""Producer state of one partition: de-duplication by batch sequence, transactions.

(Longer than the ~450 lines modules keep to: this theory of operation is ~90 of
them; one producer's entry is in producer_entry.py, the snapshot format in
producer_snapshot.py.)

Theory of operation (Kafka's ProducerStateManager and ProducerAppendInfo):

An idempotent producer stamps every batch with (producer id, epoch, base sequence);
sequences count records per partition and wrap from int32 max to 0. For each producer
id the partition remembers its epoch and the sequence/offset ranges of its last
`MAX_BATCHES` (5) appended batches, which is the most a client keeps in flight.

Before an append the partition calls `check(batch, guard)`:

- no producer id (-1): append, nothing to remember;
- epoch older than the known one: INVALID_PRODUCER_EPOCH (47);
- same epoch and the exact sequence range of a remembered batch: a retry of a batch
  already in the log -> `Verdict.duplicate` carries its original offsets; the
  partition answers error NONE with that base offset and appends nothing;
- a transactional batch of a producer with no ongoing transaction here, when
  verification is on (`guard` is not None, KIP-890): INVALID_TXN_STATE (48) unless
  `guard` is the very object `start_verification` handed out for this producer and
  no transactional batch or marker of the producer was appended since;
- newer epoch: the sequence must restart at 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- same epoch: the base sequence must follow the last one (+1, or 0 after int32 max),
  else OUT_OF_ORDER_SEQUENCE_NUMBER;
- a non-transactional batch while the producer has a transaction ongoing:
  INVALID_TXN_STATE;
- unknown producer id: accepted with any sequence. Kafka 2.5+ (KIP-360) does the
  same, so a producer whose state expired or whose records were deleted by retention
  continues instead of failing with UNKNOWN_PRODUCER_ID as Kafka 2.0-2.4 did.

After the append the partition calls `update(batch, first_offset, last_offset,
timestamp_ms)`; a transactional batch of a producer with no ongoing transaction
starts one at `first_offset` (`ongoing`, oldest first). `check`, the append and
`update` must run without an await between them (one produce request carries at most
one batch per partition, so this is the whole critical section). A KIP-890
verification awaits the coordinator *outside* that section: the produce handler takes
a guard with `start_verification` before its await and passes it to the append
after; a marker or transactional batch of the producer appended meanwhile drops the
guard, so a stale verification cannot open a transaction the coordinator has already
ended.

End-transaction markers (control batches a coordinator writes): `check_marker`
refuses a marker whose producer epoch is older than the producer's
(INVALID_PRODUCER_EPOCH) or whose coordinator epoch is older than the last marker's
(TRANSACTION_COORDINATOR_FENCED); `append_marker` ends the ongoing transaction and
returns a `CompletedTxn` (producer id, first offset, marker offset, aborted), or None
when the producer had none. A completed transaction stays in `unreplicated` until the
high watermark passes its marker, so the last stable offset (`first_unstable_offset`)
moves only once the whole transaction is committed, as Kafka's does. Producers with a
transaction ongoing never expire.

Persistence: `take_snapshot(offset)` writes every producer's entry, all remembered
batches, its ongoing transaction's first offset and coordinator epoch included, to
`<20-digit offset>.snapshot` (producer_snapshot.py has the format) in the partition
directory (the partition takes one at each segment roll, named after the new
segment's base offset, and one on clean shutdown at the log end offset). `load(...)`
rebuilds the state on start-up: the newest readable snapshot at or below the log end,
then every batch of the log after it, markers included (so transactions open and end
as they did); snapshots above the log end (left over from a truncation) are deleted.
`truncate_to` is the same reload after the log was truncated.

Wiring into PartitionLog: `check` before the leader append (a duplicate returns the
original offsets without writing; an error raises `ProducerStateError`), `update`
after it, `check_marker`/`append_marker` around a marker append, `replay` for each
follower-appended batch (it returns the transaction a marker completed), `take_snapshot`
at rolls and close, `load` when the log opens and `truncate_to` after a truncation,
both with the log's batches from an offset (`LogSegments.batches_from`) as the
replay source, `truncate_fully` when the log is emptied, `delete_snapshots_below`
after retention.

Expiry (Kafka's producer.id.expiration.ms, `expiration_ms` here): `remove_expired`
forgets every producer whose last batch or marker is at least that old and that has
no transaction ongoing; the log manager runs it every
producer.id.expiration.check.interval.ms. `load` drops such producers from the
snapshot it reads, too. A forgotten producer's next batch is accepted with any
sequence (see "unknown producer id" above).

Snapshots are written to a temp file and renamed over the target. Durability is
Kafka's since 3.x: a roll's snapshot is written on the event loop without fsync
(`take_snapshot(offset, sync=False)`) and fsynced by `sync_snapshot` on the log's
flush thread with the segment the roll finished, before the recovery point passes
it; the close snapshot is fsynced, file and rename, before `take_snapshot` returns.
Durability is never needed for correctness: a snapshot that a power cut lost or tore
before its fsync is missing, fails its CRC or lies above the recovered log end, and
`load` falls back to an older one (or the log start) and replays the batches after
it from the log, which costs start-up time only.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple, Protocol

from broker.log import producer_snapshot
from broker.log.config import PRODUCER_ID_EXPIRATION_MS
from broker.log.producer_entry import BatchMetadata, ProducerEntry, in_sequence
from broker.log.producer_snapshot import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshotError,
    snapshot_name,
    sync_snapshot,
)
from broker.protocol.control import ControlType, control_type, coordinator_epoch_of
from broker.protocol.errors import ApiError, ErrorCode

__all__ = [
    "SNAPSHOT_SUFFIX",
    "CompletedTxn",
    "CorruptSnapshotError",
    "ProducerStateError",
    "ProducerStateManager",
    "snapshot_name",
    "sync_snapshot",
]

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1


class ProducerBatch(Protocol):
    """The fields of a stored record batch that producer state reads (a control
    batch must be whole: its record says commit or abort)."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a batch: append it, acknowledge a duplicate, or refuse it."""

    error: ErrorCode = ErrorCode.NONE
    duplicate: tuple[int, int] | None = None  # (first, last) offset of the original

    @property
    def append(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None


APPEND = Verdict()


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its producer, first offset, the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class VerificationGuard:
    """Proof that a KIP-890 verification started before any later transactional
    write of its producer (compared by identity). Created by `start_verification`."""

    __slots__ = ("producer_id", "epoch")

    def __init__(self, producer_id: int, epoch: int):
        self.producer_id = producer_id
        self.epoch = epoch


#: The guard a verifying append passes when it did not verify (the producer had a
#: transaction ongoing when it looked): it matches no stored guard.
UNVERIFIED = VerificationGuard(-1, -1)


def marker_of(batch) -> tuple[bool, int]:
    """(commit?, coordinator epoch) of a whole end-transaction marker batch."""
    (record,) = batch.records()
    return control_type(record.key) == ControlType.COMMIT, coordinator_epoch_of(record.value)


class ProducerStateError(ApiError):
    """A batch refused by producer state: `code` is OUT_OF_ORDER_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE or TRANSACTION_COORDINATOR_FENCED, for
    the partition's produce response (or the coordinator's marker write)."""


class ProducerStateManager:
    """Producer de-duplication and transaction state of one partition directory.

    Owned by the partition's log; not thread-safe, call it from the one task (or
    event loop) that appends to the partition.
    """

    def __init__(self, partition_dir: str | Path, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS):
        self.dir = Path(partition_dir)
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset -> producer id, oldest first
        self.unreplicated: collections.deque[CompletedTxn] = collections.deque()
        self.verifications: dict[int, VerificationGuard] = {}

    # -- the append path ------------------------------------------------------------

    def check(self, batch: ProducerBatch, guard: VerificationGuard | None = None) -> Verdict:
        """Decide whether `batch` (not yet appended) is new, a retry, or invalid.
        `guard` None: no KIP-890 verification; otherwise what `start_verification`
        returned before the verification (or UNVERIFIED)."""
        pid = batch.producer_id
        if pid < 0:
            return APPEND
        entry = self.producers.get(pid)
        if entry is None:
            return self._check_verified(batch, None, guard)
        epoch, seq = batch.producer_epoch, batch.base_sequence
        if epoch < entry.epoch:
            return Verdict(ErrorCode.INVALID_PRODUCER_EPOCH)
        if epoch == entry.epoch:
            last = entry.last_seq
            if last is not None and not in_sequence(last, seq):
                dup = entry.find_duplicate(seq, batch.last_sequence)
                if dup is not None:
                    return Verdict(duplicate=(dup.first_offset, dup.last_offset))
                return Verdict(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        elif seq != 0:
            return Verdict(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        if entry.txn_first_offset is not None and not batch.is_transactional:
            return Verdict(ErrorCode.INVALID_TXN_STATE)
        return self._check_verified(batch, entry, guard)

    def _check_verified(
        self, batch: ProducerBatch, entry: ProducerEntry | None, guard: VerificationGuard | None
    ) -> Verdict:
        if guard is None or not batch.is_transactional:
            return APPEND
        if entry is not None and entry.txn_first_offset is not None:
            return APPEND
        if self.verifications.get(batch.producer_id) is not guard:
            return Verdict(ErrorCode.INVALID_TXN_STATE)
        return APPEND

    def update(
        self, batch: ProducerBatch, first_offset: int, last_offset: int, timestamp_ms: int
    ) -> None:
        """Record an appended data batch at its assigned offsets; `timestamp_ms` dates
        it for expiry. A transactional batch may start a transaction."""
        pid = batch.producer_id
        if pid < 0:
            return
        meta = BatchMetadata(batch.base_sequence, batch.last_sequence, first_offset, last_offset)
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, batch.producer_epoch, timestamp_ms)
        entry.add(batch.producer_epoch, meta, timestamp_ms)
        if batch.is_transactional:
            self.verifications.pop(pid, None)
            if entry.txn_first_offset is None:
                entry.txn_first_offset = first_offset
                self.ongoing[first_offset] = pid

    def has_ongoing(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.txn_first_offset is not None

    def start_verification(self, producer_id: int, epoch: int) -> VerificationGuard:
        """The guard a KIP-890 verification of this producer's first transactional
        write carries from before its await to the append (one per producer and
        epoch, kept until a transactional batch or marker of the producer is
        appended, so concurrent verifications of one producer share it)."""
        guard = self.verifications.get(producer_id)
        if guard is None or guard.epoch < epoch:
            guard = self.verifications[producer_id] = VerificationGuard(producer_id, epoch)
        return guard

    # -- markers ----------------------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> ErrorCode:
        """Whether a coordinator's marker may be appended (Kafka's checks)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def append_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        offset: int,
        timestamp_ms: int,
    ) -> CompletedTxn | None:
        """Record a marker appended at `offset`: the producer's ongoing transaction (if
        any) ends and is returned; it stays unstable until the HW passes `offset`."""
        self.verifications.pop(producer_id, None)
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch, timestamp_ms)
        entry.bump_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp_ms
        first = entry.txn_first_offset
        if first is None:
            return None
        entry.txn_first_offset = None
        self.ongoing.pop(first, None)
        done = CompletedTxn(producer_id, first, offset, not commit)
        self.unreplicated.append(done)
        return done

    # -- last stable offset -------------------------------------------------------------

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """First offset of the oldest transaction that is ongoing or whose marker the
        high watermark has not passed; None when there is none. Completed
        transactions below `high_watermark` are forgotten here."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()
        first = next(iter(self.ongoing), None)
        for txn in unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def stable_offset_after(self, done: CompletedTxn) -> int:
        """The last stable offset right after `done` completed, ignoring the high
        watermark (what Kafka's transaction index records)."""
        return next(iter(self.ongoing), done.last_offset + 1)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for `expiration_ms` with no transaction ongoing;
        returns how many were removed."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp >= self.expiration_ms and e.txn_first_offset is None
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
        path = self.dir / snapshot_name(offset)
        producer_snapshot.write(path, producer_snapshot.encode(self.producers.values()), sync)
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
        return producer_snapshot.decode(path.read_bytes(), path.name, ProducerEntry, BatchMetadata)

    # -- recovery ---------------------------------------------------------------------

    def load(
        self,
        log_start: int,
        log_end: int,
        batches_from: Callable[[int], Iterable[ProducerBatch]],
        now_ms: int,
        prune: bool = True,
    ) -> None:
        """Rebuild the state of a log holding offsets [log_start, log_end).

        `batches_from(offset)` yields the log's batches in order, starting with the
        one that holds `offset` (or the first after it). Snapshots above `log_end` are
        deleted; an unreadable snapshot is logged, deleted, and the next older used
        (`prune=False`: nothing is deleted, for a look at an earlier state).
        Producers restored from a snapshot are dropped if already expired at `now_ms`
        and have no transaction ongoing.
        """
        self.producers = {}
        self.unreplicated = collections.deque()
        start = log_start
        for offset in reversed(self.snapshot_offsets()):
            path = self.dir / snapshot_name(offset)
            if offset > log_end:
                if prune:
                    path.unlink(missing_ok=True)
                continue
            try:
                entries = self.read_snapshot(path)
            except (CorruptSnapshotError, OSError) as e:
                log.warning("ignoring producer snapshot %s: %s", path, e)
                if prune:
                    path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if (
                    entry.txn_first_offset is not None
                    or now_ms - entry.last_timestamp < self.expiration_ms
                ):
                    self.producers[entry.producer_id] = entry
            start = max(offset, log_start)
            break
        self.ongoing = {
            e.txn_first_offset: pid
            for pid, e in sorted(
                self.producers.items(), key=lambda item: item[1].txn_first_offset or 0
            )
            if e.txn_first_offset is not None
        }
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
        self.ongoing = {}
        self.unreplicated = collections.deque()
        for offset in self.snapshot_offsets():
            (self.dir / snapshot_name(offset)).unlink(missing_ok=True)

    def replay(self, batch: ProducerBatch) -> CompletedTxn | None:
        """Apply a batch already in the log (recovery, or a follower copying the
        leader's log): no validation, but an older epoch never overwrites a newer one.
        Returns the transaction a marker completed, if any."""
        pid = batch.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        if entry is not None and batch.producer_epoch < entry.epoch:
            return None
        if batch.is_control:
            try:
                commit, coordinator_epoch = marker_of(batch)
            except ValueError:
                return None  # not an end-transaction marker: nothing to track
            return self.append_marker(
                pid,
                batch.producer_epoch,
                commit,
                coordinator_epoch,
                batch.base_offset,
                batch.max_timestamp,
            )
        self.update(batch, batch.base_offset, batch.last_offset, batch.max_timestamp)
        return None
