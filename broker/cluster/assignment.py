"""Replica assignment for new topics, as Kafka's AdminUtils does it.

Without racks: brokers sorted by id, partition i's first replica on broker
(i + start) mod n, its j-th replica on broker (i + start + j) mod n. Partition 0's
leader is broker `start`, partition 1's the next one, so leaders spread evenly.

With racks (every broker declares `broker.rack`): the broker list is first
interleaved rack by rack (r1's first broker, r2's first, r3's first, r1's second...),
then the same rotation is used, except that a replica goes to the next broker whose
rack does not hold one of the partition's replicas yet (while some rack has none) and
that is not already a replica. Pure functions; safe anywhere.
"""

from __future__ import annotations


class AssignmentError(ValueError):
    """Not enough brokers for the replication factor, or mixed rack declarations."""


def rack_alternated(brokers: dict[int, str | None]) -> list[int]:
    """Broker ids interleaved by rack (racks and brokers in sorted order)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id] or "", []).append(broker_id)
    lists = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(x) for x in lists)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def assign_replicas(
    brokers: dict[int, str | None], partitions: int, replication_factor: int, start: int = 0
) -> list[list[int]]:
    """Replica lists (preferred leader first) for `partitions` partitions.

    `brokers` maps live broker id -> rack (None when undeclared).
    """
    if replication_factor < 1:
        raise AssignmentError("replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    racks = {r for r in brokers.values()}
    if None in racks and len(racks) > 1:
        raise AssignmentError("Not all brokers have rack information.")
    if None in racks:
        ids = sorted(brokers)
        n = len(ids)
        return [
            [ids[(i + start + j) % n] for j in range(replication_factor)] for i in range(partitions)
        ]
    ids = rack_alternated(brokers)
    n = len(ids)
    n_racks = len(racks)
    out = []
    for i in range(partitions):
        chosen: list[int] = []
        used_racks: set[str] = set()
        k = (i + start) % n
        while len(chosen) < replication_factor:
            candidate = ids[k % n]
            rack = brokers[candidate]
            fresh_rack = rack not in used_racks or len(used_racks) == n_racks
            if candidate not in chosen and fresh_rack:
                chosen.append(candidate)
                used_racks.add(rack)
            k += 1
        out.append(chosen)
    return out
