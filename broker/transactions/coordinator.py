"""TransactionCoordinator: Kafka's transaction coordinator as a state machine.

(Longer than the ~450 lines modules keep to: one state machine, whose transitions
read best side by side; the markers are written by markers.py, the log format is
log_format.py's.)

Theory of operation. Every transactional id lives in one partition of
`__transaction_state` (log_format.partition_for); the broker leading that partition
coordinates the id, in the partition's leader epoch (the coordinator epoch, written
into every marker so partitions can ignore a deposed coordinator's markers).
`load_partition` rebuilds the ids of a partition from its records (the last value
per key) and finishes the transactions it finds half-way (PrepareCommit /
PrepareAbort); `unload_partition` drops them when leadership moves.

Every state change is written to `__transaction_state` (acks=all, through a
`TxnStore`) before the request is answered; while it is in flight the id's
`pending` state is set and other requests get CONCURRENT_TRANSACTIONS. EndTxn is
answered once PrepareCommit/PrepareAbort is durable; a task then has the
`MarkerWriter` put end-transaction markers on every partition of the transaction
and writes CompleteCommit/CompleteAbort. Requests for the id in between get
CONCURRENT_TRANSACTIONS.

InitProducerId with a transactional id bumps the epoch (a new producer id when the
epoch is exhausted), which fences any older producer of the id. An ongoing
transaction at that point is aborted first under the bumped epoch (the client gets
CONCURRENT_TRANSACTIONS and retries). Transactions running past their timeout are
aborted the same way by `abort_timed_out`; ids idle past
`transactional.id.expiration.ms` are removed (a tombstone) by `remove_expired`.

Transactions v2 (KIP-890 part 2; a client that sends EndTxn v5): every transaction
end bumps the producer epoch. PrepareCommit/PrepareAbort is written with epoch + 1,
the markers carry it (fencing any request of the old epoch still in flight, a
zombie's included), and EndTxn answers the new epoch, which the producer's next
transaction uses. When the bumped epoch would run out, a new producer id is
allocated with the Prepare state (`next_producer_id`) and taken with epoch 0 once the
markers are written. A retried EndTxn is recognised by its epoch being one below the
bumped one (Kafka's `endTxnEpochBumped`), or, after a rotation, by the previous
producer id. Partitions join a v2 transaction through the produce itself: the
partition leader calls `add_partitions` (AddPartitionsToTxn v5 `verify_only` false).

Owned by the broker; lives on the server's event loop, not thread-safe.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from broker.groups.storage import StoreError
from broker.protocol.errors import ErrorCode
from broker.tasks import cancel_and_wait
from broker.transactions.config import TxnConfig
from broker.transactions.log_format import (
    DECODE_ERRORS,
    build_batch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
    value_version,
)
from broker.transactions.state import (
    BY_NAME,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnState,
)

log = logging.getLogger(__name__)

S = TxnState
_COMPLETE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


class TxnStore(Protocol):
    async def append(self, partition: int, records: bytes) -> int: ...

    def read_all(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]: ...


class Markers(Protocol):
    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: set[TopicPartition],
        still_owner: Callable[[], bool],
    ) -> bool:
        """Put the markers on every partition; False when `still_owner()` turned
        false before all were written."""


class TransactionCoordinator:
    """All transactional ids whose `__transaction_state` partition this broker leads."""

    def __init__(
        self,
        store: TxnStore,
        markers: Markers,
        next_producer_id: Callable[[], Awaitable[int]],  # raises StoreError
        config: TxnConfig | None = None,
        transaction_version: Callable[[], int] = lambda: 0,
    ):
        """`transaction_version()` is the finalized `transaction.version` (the
        records' value version follows it: broker/features.py)."""
        self.config = config or TxnConfig()
        self._transaction_version = transaction_version
        self._store = store
        self._markers = markers
        self._next_producer_id = next_producer_id
        self.txns: dict[str, TxnMetadata] = {}
        self.epochs: dict[int, int] = {}  # owned partition -> coordinator epoch
        self._completing: dict[str, asyncio.Task] = {}

    # -- ownership ------------------------------------------------------------------------

    @property
    def owned(self) -> set[int]:
        return set(self.epochs)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def _owner_error(self, transactional_id: str) -> ErrorCode:
        if self.partition_for(transactional_id) not in self.epochs:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def load_partition(self, partition: int, coordinator_epoch: int) -> None:
        """Become coordinator of `partition`; finish the transactions found half-way."""
        found: dict[str, TxnMetadata | None] = {}
        for key, value in self._store.read_all(partition):
            try:
                tid = decode_key(key)
                found[tid] = None if value is None else decode_value(tid, value)
            except DECODE_ERRORS as e:
                log.warning("__transaction_state-%d: skipping a record: %s", partition, e)
        self.epochs[partition] = coordinator_epoch
        for tid, meta in found.items():
            if meta is None:
                self.txns.pop(tid, None)
                continue
            self.txns[tid] = meta
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._complete_later(meta, coordinator_epoch)
        log.info(
            "coordinating __transaction_state-%d in epoch %d: %d transactional id(s)",
            partition,
            coordinator_epoch,
            sum(1 for t in found.values() if t is not None),
        )

    def unload_partition(self, partition: int) -> None:
        self.epochs.pop(partition, None)
        for tid in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[tid]
            task = self._completing.pop(tid, None)
            if task is not None:
                task.cancel()

    async def close(self) -> None:
        await cancel_and_wait(list(self._completing.values()))
        self._completing.clear()

    # -- writes ---------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata, new: TxnMetadata | None, now_ms: int) -> ErrorCode:
        """Write `new` (None: a tombstone) for `meta`'s id, then apply it in memory.
        `meta.pending` is set meanwhile. The ErrorCode Kafka gives clients on failure."""
        tid = meta.transactional_id
        partition = self.partition_for(tid)
        epoch = self.epochs.get(partition)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        meta.pending = S.DEAD if new is None else new.state
        version = value_version(self._transaction_version())
        value = None if new is None else encode_value(new, version)
        try:
            await asyncio.shield(
                self._store.append(partition, build_batch([(encode_key(tid), value)], now_ms))
            )
        except StoreError as e:
            return _append_error(e.code)
        finally:
            meta.pending = None
        if self.epochs.get(partition) != epoch or self.txns.get(tid) is not meta:
            return ErrorCode.NOT_COORDINATOR  # unloaded meanwhile: a newer coordinator owns it
        if new is None:
            meta.transition(S.DEAD)
            del self.txns[tid]
        else:
            meta.apply(new)
        return ErrorCode.NONE

    # -- InitProducerId -------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected_pid: int,
        expected_epoch: int,
        now_ms: int,
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch). PRODUCER_FENCED is mapped by the handler for
        old versions."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if not 0 < txn_timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        err = self._owner_error(transactional_id)
        if err:
            return err, -1, -1
        meta = self.txns.get(transactional_id)
        if meta is None:
            try:
                pid = await self._next_producer_id()
            except StoreError as e:
                return e.code, -1, -1
            meta = self.txns.get(transactional_id)  # another request may have created it
            if meta is None:
                meta = TxnMetadata(transactional_id, pid, NO_PRODUCER_EPOCH, txn_timeout_ms)
                meta.last_update_ms = now_ms
                self.txns[transactional_id] = meta
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        given = expected_pid != NO_PRODUCER_ID
        if given and expected_pid not in (meta.producer_id, meta.last_producer_id):
            return ErrorCode.PRODUCER_FENCED, -1, -1
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if meta.state == S.ONGOING:
            await self._fence_and_abort(meta, now_ms)
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if given and (expected_pid, expected_epoch) != (meta.producer_id, meta.producer_epoch):
            # KIP-360: a retry of the bump that already happened gets the current
            # id and epoch; any other old epoch is a zombie
            if expected_epoch == meta.last_producer_epoch:
                return ErrorCode.NONE, meta.producer_id, meta.producer_epoch
            return ErrorCode.PRODUCER_FENCED, -1, -1
        new = meta.snapshot()
        new.state = S.EMPTY
        new.txn_timeout_ms = txn_timeout_ms
        new.partitions = set()
        new.txn_start_ms = -1
        new.last_update_ms = now_ms
        if meta.epoch_exhausted():
            new.last_producer_id, new.last_producer_epoch = meta.producer_id, meta.producer_epoch
            try:
                new.producer_id, new.producer_epoch = await self._next_producer_id(), 0
            except StoreError as e:
                return e.code, -1, -1
        else:
            new.last_producer_id = NO_PRODUCER_ID
            new.last_producer_epoch = meta.producer_epoch
            new.producer_epoch = meta.producer_epoch + 1
        err = await self._write(meta, new, now_ms)
        if err:
            return err, -1, -1
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    async def _fence_and_abort(self, meta: TxnMetadata, now_ms: int) -> ErrorCode:
        """Abort `meta`'s ongoing transaction under a bumped epoch, so the producer
        that ran it is fenced. Kafka calls this step PrepareEpochFence; it is never
        written: what is written is PrepareAbort with the new epoch, and until that
        is durable the id stays Ongoing (with the write pending), so a failed write
        leaves it as it was."""
        new = meta.snapshot()
        new.state = S.PREPARE_ABORT
        if meta.producer_epoch < MAX_EPOCH:
            new.producer_epoch = meta.producer_epoch + 1
        new.last_update_ms = now_ms
        err = await self._write(meta, new, now_ms)
        if err:
            return err
        self._complete_later(meta, self.epochs[self.partition_for(meta.transactional_id)])
        return ErrorCode.NONE

    # -- AddPartitionsToTxn, AddOffsetsToTxn, verification --------------------------------

    def _check_producer(
        self, tid: str, pid: int, epoch: int
    ) -> tuple[ErrorCode, TxnMetadata | None]:
        err = self._owner_error(tid)
        if err:
            return err, None
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, meta

    async def add_partitions(
        self,
        tid: str,
        pid: int,
        epoch: int,
        partitions: set[TopicPartition],
        now_ms: int,
        client_tv: int = 0,
    ) -> ErrorCode:
        """AddPartitionsToTxn (v0-3 from the client, v5 `verify_only` false from a
        partition leader for a Produce v12 or TxnOffsetCommit v5: `client_tv` 2, a
        transactions v2 client, whose transaction then ends with an epoch bump)."""
        err, meta = self._check_producer(tid, pid, epoch)
        if meta is None:  # err says why
            return err
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state not in (S.ONGOING, *_COMPLETE):
            return ErrorCode.INVALID_TXN_STATE
        if meta.state == S.ONGOING and partitions <= meta.partitions:
            return ErrorCode.NONE
        new = meta.snapshot()
        if meta.state != S.ONGOING:
            new.txn_start_ms = now_ms
            new.partitions = set()
            new.client_tv = client_tv
        new.state = S.ONGOING
        new.partitions |= partitions
        new.last_update_ms = now_ms
        return await self._write(meta, new, now_ms)

    def verify(
        self,
        tid: str,
        pid: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        not_added: ErrorCode = ErrorCode.INVALID_TXN_STATE,
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: NONE for the partitions already in `tid`'s ongoing transaction
        under this producer id and epoch, `not_added` for the others (Kafka answers
        TRANSACTION_ABORTABLE, which the leader turns into INVALID_TXN_STATE for
        clients that predate it)."""
        partitions = list(partitions)
        err, meta = self._check_producer(tid, pid, epoch)
        if meta is None:  # err says why
            return dict.fromkeys(partitions, err)
        ongoing = meta.state == S.ONGOING
        return {
            tp: ErrorCode.NONE if ongoing and tp in meta.partitions else not_added
            for tp in partitions
        }

    # -- EndTxn ---------------------------------------------------------------------------

    async def end_txn(
        self, tid: str, pid: int, epoch: int, commit: bool, now_ms: int, client_tv: int = 0
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): the id and epoch the producer goes on with
        (EndTxn v5 answers them; under transactions v2, `client_tv` 2, the epoch is
        the bumped one, or epoch 0 of a new producer id once the epoch ran out)."""
        err = self._owner_error(tid)
        if err:
            return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        meta = self.txns.get(tid)
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        state = meta.state
        bumped = meta.bumps_epoch and meta.producer_epoch == epoch + 1
        rotated = (
            meta.bumps_epoch
            and meta.last_producer_id == pid
            and epoch == MAX_EPOCH - 1
            and meta.producer_epoch == 0
        )
        if not meta.bumps_epoch or state in (S.ONGOING, S.EMPTY):
            valid = epoch == meta.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = bumped
        else:
            valid = bumped or rotated
        if meta.producer_id != pid and not rotated:
            err = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif not valid:
            err = ErrorCode.PRODUCER_FENCED
        elif meta.pending is not None:
            err = ErrorCode.CONCURRENT_TRANSACTIONS
        elif state == S.ONGOING:
            return await self._prepare_end(meta, commit, now_ms, client_tv)
        elif state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch  # a retry
        elif state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            err = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            err = ErrorCode.INVALID_TXN_STATE
        return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    async def _prepare_end(
        self, meta: TxnMetadata, commit: bool, now_ms: int, client_tv: int
    ) -> tuple[ErrorCode, int, int]:
        """Write PrepareCommit/PrepareAbort (v2: with the epoch bumped), then let the
        markers be written in the background."""
        tid = meta.transactional_id
        new = meta.snapshot()
        new.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        new.last_update_ms = now_ms
        new.client_tv = client_tv  # the version of the client that ends it, as Kafka keeps
        if client_tv >= 2:
            if meta.epoch_exhausted():
                try:
                    new.next_producer_id = await self._next_producer_id()
                except StoreError as e:
                    return e.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                if meta.pending is not None or meta.state != S.ONGOING:
                    return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            new.last_producer_epoch = meta.producer_epoch
            new.producer_epoch = meta.producer_epoch + 1
        err = await self._write(meta, new, now_ms)
        if err:
            return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self._complete_later(meta, self.epochs[self.partition_for(tid)])
        if new.next_producer_id != NO_PRODUCER_ID:
            return ErrorCode.NONE, new.next_producer_id, 0
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    def _complete_later(self, meta: TxnMetadata, coordinator_epoch: int) -> None:
        tid = meta.transactional_id
        task = asyncio.get_running_loop().create_task(self._complete(meta, coordinator_epoch))
        self._completing[tid] = task
        task.add_done_callback(functools.partial(self._finished, tid))

    def _finished(self, tid: str, task: asyncio.Task) -> None:
        if self._completing.get(tid) is task:
            del self._completing[tid]
        if not task.cancelled() and task.exception() is not None:
            log.error("completing the transaction of %s failed", tid, exc_info=task.exception())

    async def _complete(self, meta: TxnMetadata, coordinator_epoch: int) -> None:
        """Markers on every partition, then CompleteCommit/CompleteAbort written."""
        tid = meta.transactional_id
        partition = self.partition_for(tid)
        commit = meta.state == S.PREPARE_COMMIT
        meta.pending = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT

        def still_owner() -> bool:
            return self.epochs.get(partition) == coordinator_epoch and self.txns.get(tid) is meta

        try:
            done = await self._markers.write(
                meta.producer_id,
                meta.producer_epoch,
                commit,
                coordinator_epoch,
                set(meta.partitions),
                still_owner,
            )
        finally:
            meta.pending = None
        if not done or not still_owner():
            return
        new = meta.snapshot()
        new.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        new.partitions = set()
        new.last_update_ms = _now_ms()
        if meta.next_producer_id != NO_PRODUCER_ID:  # v2: the bumped epoch ran out
            new.last_producer_id, new.last_producer_epoch = meta.producer_id, meta.producer_epoch
            new.producer_id, new.producer_epoch = meta.next_producer_id, 0
            new.next_producer_id = NO_PRODUCER_ID
        while still_owner():
            err = await self._write(meta, new, new.last_update_ms)
            if err == ErrorCode.NONE or err == ErrorCode.NOT_COORDINATOR:
                return
            log.warning("%s: writing %s failed: %s", tid, new.state.display, err.name)
            await asyncio.sleep(0.1)

    # -- timers ---------------------------------------------------------------------------

    async def abort_timed_out(self, now_ms: int) -> int:
        """Abort (with an epoch bump, fencing the producer) every ongoing transaction
        older than its timeout; returns how many were started."""
        expired = [
            m
            for m in self.txns.values()
            if m.state == S.ONGOING
            and m.pending is None
            and m.txn_start_ms + m.txn_timeout_ms < now_ms
        ]
        started = 0
        for meta in expired:
            if meta.state == S.ONGOING and meta.pending is None:
                log.info(
                    "aborting the transaction of %s (producer %d epoch %d): past its %d ms timeout",
                    meta.transactional_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    meta.txn_timeout_ms,
                )
                if await self._fence_and_abort(meta, now_ms) == ErrorCode.NONE:
                    started += 1
        return started

    async def remove_expired(self, now_ms: int) -> int:
        """Tombstone the ids with no transaction for `transactional.id.expiration.ms`."""
        expired = [
            m
            for m in self.txns.values()
            if m.state in _COMPLETE
            and m.pending is None
            and m.last_update_ms + self.config.id_expiration_ms < now_ms
        ]
        removed = 0
        for meta in expired:
            if meta.pending is None and await self._write(meta, None, now_ms) == ErrorCode.NONE:
                removed += 1
        return removed

    async def run(self, clock: Callable[[], float], interval_s: float = 1.0) -> None:
        """Drive the two timers until cancelled (a task the broker starts)."""
        next_abort = next_remove = 0
        while True:
            await asyncio.sleep(interval_s)
            now = int(clock() * 1000)
            try:
                if now >= next_abort:
                    next_abort = now + self.config.abort_interval_ms
                    await self.abort_timed_out(now)
                if now >= next_remove:
                    next_remove = now + self.config.remove_interval_ms
                    await self.remove_expired(now)
            except Exception:
                log.exception("transaction coordinator timer failed")

    # -- DescribeTransactions, ListTransactions -------------------------------------------

    def describe(self, tid: str) -> tuple[ErrorCode, TxnMetadata | None]:
        err = self._owner_error(tid)
        if err:
            return err, None
        meta = self.txns.get(tid)
        if meta is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list(
        self, states: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int, now_ms: int
    ) -> tuple[list[str], list[TxnMetadata]]:
        """(unknown state names, the matching ids' metadata)."""
        names = list(states)
        unknown = [n for n in names if n not in BY_NAME]
        wanted = {BY_NAME[n] for n in names if n in BY_NAME}
        pids = set(producer_ids)
        out = []
        for meta in self.txns.values():
            if names and meta.state not in wanted:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and now_ms - meta.txn_start_ms <= min_duration_ms:
                continue  # KIP-994: only transactions running longer than the filter
            out.append(meta)
        return unknown, out


def _append_error(code: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed `__transaction_state` append to the client's error."""
    if code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_COORDINATOR,
    ):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def _now_ms() -> int:
    return int(time.time() * 1000)
