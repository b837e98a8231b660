"""KIP-890: a produce's transactional batches are verified with the coordinator (part
1), or, from Produce v12 (transactions v2, part 2), added to the transaction by it.

Why: a transactional producer whose AddPartitionsToTxn was lost, or that kept
writing after its transaction timed out and was aborted, would otherwise leave an
open transaction on the partition that no marker ever ends, holding the last stable
offset (and every read_committed consumer) back for good.

How (Kafka's ReplicaManager and UnifiedLog): for each partition of a Produce that
names a transactional id, whose batch is transactional and whose producer has no
transaction ongoing there, `guards_for` takes a `VerificationGuard` from the
partition's producer state *before* anything is awaited. `verify` then awaits
`core.txn_verifier(transactional_id, producer_id, producer_epoch, [(topic,
partition), ...])` once for all of them. The produce handler appends afterwards,
passing each partition's guard: the log accepts the first transactional batch only
if the guard is still the producer's current one, and a marker or transactional
batch of that producer appended during the await has dropped it, so the append
answers INVALID_TXN_STATE instead of opening a transaction the coordinator already
ended. Partitions where the producer had a transaction ongoing under the batch's epoch get
`UNVERIFIED`, which passes only while that transaction is still ongoing. A batch of a
newer epoch than the ongoing transaction's is verified (Kafka's
`hasOngoingTransaction(producerId, producerEpoch)`): under transactions v2 the
epoch is bumped at every transaction end, and the producer's next transaction may
reach a partition before the previous one's marker does; unverified, its batch would
join the old transaction and be committed or aborted with it. The coordinator answers
CONCURRENT_TRANSACTIONS until the markers are written, and the client retries.

The verifier's per-partition errors answer as Kafka 3.9 answers clients that predate
KIP-890 part 2: INVALID_TXN_STATE as it is, PRODUCER_FENCED (an older epoch than the
coordinator's) as INVALID_PRODUCER_EPOCH, the error producers expect from a Produce
and that librdkafka makes fatal (PRODUCER_FENCED would only abort the transaction),
the coordinator's retriable errors (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) as
NOT_ENOUGH_REPLICAS, which old clients retry without a metadata refresh, anything
else as it is. A partition missing from the verifier's answer is INVALID_TXN_STATE; a
verifier that raises or does not answer within the produce's timeout leaves every
pending partition NOT_ENOUGH_REPLICAS.

Produce v12 is the transactions v2 client's: it sends no AddPartitionsToTxn, so the
same call asks the coordinator to add the partitions (`add`; AddPartitionsToTxn v5
`verify_only` false when it is on another broker), under the same guards. A
partition the coordinator finds missing from the transaction is TRANSACTION_ABORTABLE
(Kafka's answer, which clients from Produce v11 know: they abort the transaction and
go on), INVALID_TXN_STATE below v11.

`TxnGuards` is built and used by one produce request on the event loop.
"""

from __future__ import annotations

import logging

from broker.log.producer_state import UNVERIFIED
from broker.protocol import ErrorCode
from broker.protocol.records import HEADER_SIZE, RecordBatch
from common.aio import within

log = logging.getLogger(__name__)

_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
_MIN_TIMEOUT_S = 1.0


_ABORTABLE_SINCE = 11  # the first Produce version that knows TRANSACTION_ABORTABLE
_ADDS_SINCE = 12  # Produce v12: the leader adds the partitions (transactions v2)


def client_error(code: ErrorCode, version: int = _ABORTABLE_SINCE) -> ErrorCode:
    """What a produce of `version` answers for the verifier's `code` on a partition."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < _ABORTABLE_SINCE:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NOT_ENOUGH_REPLICAS if code in _RETRIABLE else code


class TxnGuards:
    """The verification guards of one produce request."""

    def __init__(self, verifier, transactional_id: str, version: int = 0):
        self.verifier = verifier
        self.transactional_id = transactional_id
        self.version = version  # of the Produce request
        self.guards: dict[tuple[str, int], object] = {}
        # (topic, partition) -> (producer id, epoch) of partitions awaiting the coordinator
        self.pending: dict[tuple[str, int], tuple[int, int]] = {}

    def guard_for(self, topic: str, index: int):
        return self.guards.get((topic, index), UNVERIFIED)

    async def verify(self, timeout_ms: int) -> dict[tuple[str, int], ErrorCode]:
        """Ask the coordinator -> the produce error of each partition it did not confirm."""
        by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for key, producer in self.pending.items():
            by_producer.setdefault(producer, []).append(key)
        timeout = max(timeout_ms / 1000, _MIN_TIMEOUT_S)
        errors: dict[tuple[str, int], ErrorCode] = {}
        adds = self.version >= _ADDS_SINCE
        for (pid, epoch), keys in by_producer.items():
            try:
                call = (
                    self.verifier(self.transactional_id, pid, epoch, keys, add=True)
                    if adds
                    else self.verifier(self.transactional_id, pid, epoch, keys)
                )
                answer = await within(call, timeout)
            except Exception as e:  # noqa: BLE001 - any coordinator failure is retriable here
                log.info("transaction verification of %s failed: %r", self.transactional_id, e)
                answer = dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
            for key in keys:
                code = ErrorCode(answer.get(key, ErrorCode.INVALID_TXN_STATE))
                if code != ErrorCode.NONE:
                    errors[key] = client_error(code, self.version)
        return errors


def guards_for(core, body: dict, plan: list, version: int = 0) -> TxnGuards | None:
    """The guards of a produce of `version`, or None when verification is off (no
    verifier set, or the request names no transactional id)."""
    verifier = core.txn_verifier
    tid = body.get("transactional_id")
    if verifier is None or tid is None:
        return None
    guards = TxnGuards(verifier, tid, version)
    for name, parts in plan:
        for index, partition, records, resp in parts:
            if resp is not None or len(records) < HEADER_SIZE:
                continue
            batch = RecordBatch(bytes(records[:HEADER_SIZE]))
            if not batch.is_transactional or batch.producer_id < 0:
                continue
            state = partition.log.producer_state
            entry = state.producers.get(batch.producer_id)
            if (
                entry is not None
                and entry.txn_first_offset is not None
                and entry.epoch == batch.producer_epoch
            ):
                continue  # its transaction is ongoing here, under this epoch
            key = (name, index)
            guards.guards[key] = state.start_verification(batch.producer_id, batch.producer_epoch)
            guards.pending[key] = (batch.producer_id, batch.producer_epoch)
    return guards
