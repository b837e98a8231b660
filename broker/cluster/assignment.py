"""Replica assignment for new topics, as Kafka's AdminUtils does it.

Without racks: brokers sorted by id, partition i's first replica on broker
(i + start) mod n, its j-th replica on broker (i + start + j) mod n. Partition 0's
leader is broker `start`, partition 1's the next one, so leaders spread evenly.

With racks (every broker declares `broker.rack`): the broker list is first
interleaved rack by rack (r1's first broker, r2's first, r3's first, r1's second...),
then the same rotation is used, except that a replica goes to the next broker whose
rack does not hold one of the partition's replicas yet (while some rack has none) and
that is not already a replica. Pure functions; safe anywhere.

Replica lists a client gives (CreatePartitions with assignments) are checked by
`check_new_assignments`, with Kafka's messages.
"""

from __future__ import annotations

import zlib


class AssignmentError(ValueError):
    """Not enough brokers for the replication factor, or mixed rack declarations."""


class InvalidAssignment(ValueError):
    """Replica lists given by a client that cannot be used."""


def first_broker(name: str, brokers: dict) -> int:
    """First broker of a topic's partition 0: spread by topic name (Kafka picks it at
    random)."""
    return zlib.crc32(name.encode()) % max(1, len(brokers))


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
        used_racks: set[str | None] = set()
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


def check_new_assignments(
    assignments: list[list[int]], added: int, rf: int, live: set[int], first: int
) -> None:
    """Replica lists of `added` new partitions (numbered from `first`) of a topic with
    replication factor `rf`, over the `live` brokers; InvalidAssignment if unusable."""
    if len(assignments) != added:
        raise InvalidAssignment(
            f"Increasing the number of partitions by {added} but {len(assignments)} "
            "assignments provided."
        )
    for i, replicas in enumerate(assignments, start=first):
        if len(set(replicas)) != len(replicas):
            raise InvalidAssignment(
                f"Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {i}."
            )
        if len(replicas) != rf:
            raise InvalidAssignment(
                f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                f"while partition {i} has {len(replicas)}."
            )
        unknown = sorted(set(replicas) - live)
        if unknown:
            raise InvalidAssignment(
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
            )
