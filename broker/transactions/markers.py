"""MarkerWriter: puts a transaction's end markers on every partition it touched
(Kafka's TransactionMarkerChannelManager, one transaction at a time).

For each round the partitions left are grouped by their current leader: those led
here are written with `write_local` (Partition.append_txn_marker, then acks=all),
the others with one WriteTxnMarkers request per leader broker (`write_remote`).
Partitions that failed with a retriable error (no leader yet, NOT_LEADER, not enough
replicas, a broker that did not answer in time) are retried after a short backoff,
as long as the coordinator still owns the transaction; a partition whose topic was
deleted meanwhile needs no marker.

Owned by the TransactionCoordinator; event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from broker.protocol.errors import ErrorCode
from broker.transactions.state import TopicPartition

log = logging.getLogger(__name__)

BACKOFF_S = 0.1
_SUPERSEDED = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)

LocalWrite = Callable[[TopicPartition, int, int, bool, int], Awaitable[ErrorCode]]
RemoteWrite = Callable[
    [int, int, int, bool, int, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]
]


class MarkerWriter:
    """`leader_of(tp)` is the current leader's broker id (-1: none), None when the
    topic no longer exists."""

    def __init__(
        self,
        broker_id: int,
        leader_of: Callable[[TopicPartition], int | None],
        write_local: LocalWrite,
        write_remote: RemoteWrite | None = None,
        backoff_s: float = BACKOFF_S,
    ):
        self.broker_id = broker_id
        self._leader_of = leader_of
        self._write_local = write_local
        self._write_remote = write_remote
        self._backoff_s = backoff_s

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: set[TopicPartition],
        still_owner: Callable[[], bool],
    ) -> bool:
        left = set(partitions)
        while left:
            if not still_owner():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(left):
                leader = self._leader_of(tp)
                if leader is None:
                    left.discard(tp)  # the topic was deleted
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            results: dict[TopicPartition, ErrorCode] = {}
            jobs = []
            for leader, tps in by_leader.items():
                if leader == self.broker_id or self._write_remote is None:
                    for tp in tps:
                        jobs.append(
                            self._local(
                                tp, producer_id, producer_epoch, commit, coordinator_epoch, results
                            )
                        )
                else:
                    jobs.append(
                        self._remote(
                            leader,
                            tps,
                            producer_id,
                            producer_epoch,
                            commit,
                            coordinator_epoch,
                            results,
                        )
                    )
            await asyncio.gather(*jobs)
            for tp, err in results.items():
                deleted = (
                    err == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._leader_of(tp) is None
                )
                if err == ErrorCode.NONE or deleted:
                    left.discard(tp)
                elif err in _SUPERSEDED:
                    # a newer producer epoch or coordinator wrote there: nothing to add
                    log.warning("marker of producer %d on %s-%d: %s", producer_id, *tp, err.name)
                    left.discard(tp)
            if left:
                await asyncio.sleep(self._backoff_s)
        return still_owner()

    async def _local(self, tp, pid, epoch, commit, coordinator_epoch, results) -> None:
        results[tp] = await self._write_local(tp, pid, epoch, commit, coordinator_epoch)

    async def _remote(self, leader, tps, pid, epoch, commit, coordinator_epoch, results) -> None:
        assert self._write_remote is not None  # remote jobs are made only with it
        try:
            answer = await self._write_remote(leader, pid, epoch, commit, coordinator_epoch, tps)
        except (OSError, EOFError, TimeoutError, LookupError, ValueError) as e:
            log.debug("WriteTxnMarkers to broker %d: %s", leader, e)
            answer = {}
        for tp in tps:
            results[tp] = answer.get(tp, ErrorCode.REQUEST_TIMED_OUT)
