"""Aborted transactions across a partition's segments: the read_committed fetch's
search, and the rebuild of transaction indexes after recovery.

Functions over a PartitionLog's segments (`LogSegments`), called on the log's event
loop.

Rebuild (Kafka's LogSegment.recover with a producer state manager): a recovered
segment's `.txnindex` may miss aborts whose markers survived, or name markers the
recovery cut off. Its entries come from replaying producer state: a scratch
`ProducerStateManager` is loaded (from the newest snapshot at or below the first
stale segment, without deleting anything) up to that segment's base, then every
batch from there to the log end is replayed; each transaction a marker aborts is
indexed in the segment holding the marker, if that segment is stale, with the last
stable offset as Kafka computes it (`stable_offset_after`). An abort marker whose
transaction's data compaction removed completes nothing in the replay: its entry
is kept from the index as it was before the recovery, if that was readable.
"""

from __future__ import annotations

from broker.log.producer_state import ProducerStateManager
from broker.log.segments import LogSegments
from broker.log.txn_index import AbortedTxn


def collect_aborted(segments: LogSegments, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [fetch_offset, upper_bound), oldest marker first."""
    out: list[AbortedTxn] = []
    for seg in segments.from_floor(fetch_offset):
        found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out


def rebuild_txn_indexes(log, now_ms: int) -> bool:
    """Rebuild the transaction index of every segment marked `txn_index_stale`;
    returns whether any segment now holds an aborted transaction."""
    stale = [s for s in log.segments if s.txn_index_stale]
    if not stale:
        return False
    start = stale[0].base_offset
    scratch = ProducerStateManager(log.dir, log.producer_state.expiration_ms)
    scratch.load(
        log.log_start_offset,
        start,
        lambda offset: (b for _, b in log.segments.batches_from(offset)),
        now_ms,
        prune=False,
    )
    any_aborted = False
    for seg, batch in log.segments.batches_from(start):
        if batch.base_offset < start:
            continue
        done = scratch.replay(batch)
        if not seg.txn_index_stale:
            continue
        if done is not None and done.aborted:
            entry = AbortedTxn(
                done.producer_id,
                done.first_offset,
                done.last_offset,
                scratch.stable_offset_after(done),
            )
        elif batch.is_control and done is None:
            entry = seg.txn_index_before_recovery.get(batch.base_offset)
        else:
            continue
        if entry is not None:
            seg.txn_index.append(entry)
            any_aborted = True
    for seg in stale:
        seg.txn_index_stale = False
        seg.txn_index_before_recovery = {}
    return any_aborted
