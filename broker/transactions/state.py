"""Transaction states and the metadata of one transactional id.

A transactional id moves along Kafka's table of valid transitions; `TxnMetadata`
changes state only through `TxnMetadata.transition`, which raises
`IllegalTransition` otherwise. The ids are Kafka's (they are written to
`__transaction_state` as TransactionStatus):

    Empty (0)            no transaction since the producer's last InitProducerId
    Ongoing (1)          partitions (and offsets) added, records being produced
    PrepareCommit (2)    EndTxn(commit) durable: markers being written
    PrepareAbort (3)     EndTxn(abort), a fence or a timeout: markers being written
    CompleteCommit (4)   every marker written
    CompleteAbort (5)
    Dead (6)             the id expired and is being removed
    PrepareEpochFence (7) Kafka's name for aborting an ongoing transaction because a
                         new producer (InitProducerId) or the timeout fenced its
                         epoch; never written nor held here: the coordinator writes
                         PrepareAbort with the bumped epoch straight from Ongoing

While a state change is being written (`pending` is set) every other request for
the id gets CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import dataclasses
import enum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
BY_NAME = {name: state for state, name in _NAMES.items()}

S = TxnState
# state -> the states it may be entered from
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A state change the table does not allow (a bug, never a client's fault)."""


TopicPartition = tuple[str, int]


def by_topic(partitions) -> dict[str, list[int]]:
    """(topic, partition) pairs grouped as the protocol lists them: topic -> partitions,
    in the order given."""
    out: dict[str, list[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, []).append(p)
    return out


@dataclasses.dataclass(slots=True)
class TxnMetadata:
    """What the coordinator knows of one transactional id.

    Owned by the TransactionCoordinator; event-loop only. `pending` is the state
    being written to `__transaction_state`, None when nothing is in flight.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = dataclasses.field(default_factory=set)
    txn_start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # transactions v2 (KIP-890 part 2): the producer id the transaction's end moves to
    # when the bumped epoch ran out, and the version of the client that ran it
    next_producer_id: int = NO_PRODUCER_ID
    client_tv: int = 0
    pending: TxnState | None = None

    def transition(self, target: TxnState) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.display} -> {target.display}"
            )
        self.state = target

    def snapshot(self) -> TxnMetadata:
        """A copy to change and write; applied with `apply` once durable."""
        return dataclasses.replace(self, partitions=set(self.partitions), pending=None)

    def apply(self, new: TxnMetadata) -> None:
        """Take the written state `new` (its transition checked against the table)."""
        if new.state != self.state:
            self.transition(new.state)
        self.producer_id = new.producer_id
        self.producer_epoch = new.producer_epoch
        self.last_producer_id = new.last_producer_id
        self.last_producer_epoch = new.last_producer_epoch
        self.next_producer_id = new.next_producer_id
        self.client_tv = new.client_tv
        self.txn_timeout_ms = new.txn_timeout_ms
        self.partitions = set(new.partitions)
        self.txn_start_ms = new.txn_start_ms
        self.last_update_ms = new.last_update_ms

    @property
    def bumps_epoch(self) -> bool:
        """Whether its transactions end with an epoch bump (a transactions v2 client)."""
        return self.client_tv >= 2

    def epoch_exhausted(self) -> bool:
        """Kafka bumps to a new producer id before the epoch reaches Short.MAX - 1,
        keeping one epoch spare for fencing."""
        return self.producer_epoch >= MAX_EPOCH - 1
