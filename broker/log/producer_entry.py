"""One producer id's entry in a partition's producer state (Kafka's
ProducerStateEntry): its epoch, the sequence and offset ranges of its last
`MAX_BATCHES` batches (what a retry is matched against), when it last wrote, and its
ongoing transaction. Owned by a ProducerStateManager (producer_state.py has the
theory of operation); not thread-safe.
"""

from __future__ import annotations

import collections
from typing import NamedTuple

MAX_BATCHES = 5
INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    """One remembered batch: its sequence range and the offsets it was written at."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class ProducerEntry:
    """One producer id's epoch, last batches and transaction. Owned by its
    ProducerStateManager."""

    __slots__ = (
        "producer_id",
        "epoch",
        "batches",
        "last_timestamp",
        "coordinator_epoch",
        "txn_first_offset",
    )

    def __init__(
        self,
        producer_id: int,
        epoch: int,
        last_timestamp: int,
        coordinator_epoch: int = -1,
        txn_first_offset: int | None = None,
    ):
        self.producer_id = producer_id
        self.epoch = epoch
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.txn_first_offset = txn_first_offset
        self.batches: collections.deque[BatchMetadata] = collections.deque(maxlen=MAX_BATCHES)

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    def find_duplicate(self, base_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == base_seq and b.last_seq == last_seq:
                return b
        return None

    def bump_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def add(self, epoch: int, meta: BatchMetadata, timestamp: int) -> None:
        self.bump_epoch(epoch)
        self.batches.append(meta)
        self.last_timestamp = timestamp


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether `next_seq` follows `last_seq` (sequences wrap from int32 max to 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)
