"""Replica assignment for new topics, as Kafka's AdminUtils does it.

Without racks: brokers sorted by id, partition i's first replica on broker
(i + start) mod n, its j-th replica on broker (i + start + j) mod n. Partition 0's
leader is broker `start`, partition 1's the next one, so leaders spread evenly.

With racks (every broker declares `broker.rack`): the broker list is first
interleaved rack by rack (r1's first broker, r2's first, r3's first, r1's second...),
then the same rotation is used, except that a replica goes to the next broker whose
rack does not hold one of the partition's replicas yet (while some rack has none) and
that is not already a replica. Pure functions; safe anywhere.

Replica lists a client gives are checked here, with Kafka's messages, over the ids
of the registered brokers: `check_topic_assignment` for a new topic (CreateTopics),
`check_new_assignments` for added partitions (CreatePartitions), both through
`check_replicas`, the check of one partition's list that moving a partition's
replicas will need too.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence, Set


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


def check_replicas(partition: int, replicas: Sequence[int], live: Set[int]) -> None:
    """One partition's replica list: not empty, no broker twice, every broker among
    the `live` (registered) ones; InvalidAssignment if not."""
    if not replicas:
        raise InvalidAssignment(
            f"Cannot have replication factor of 0 for partition id {partition}."
        )
    if len(set(replicas)) != len(replicas):
        raise InvalidAssignment(
            f"Duplicate brokers not allowed in replica assignment: "
            f"{', '.join(map(str, replicas))} for partition id {partition}."
        )
    unknown = sorted(set(replicas) - live)
    if unknown:
        raise InvalidAssignment(
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
        )


def check_topic_assignment(
    assignment: Iterable[tuple[int, Sequence[int]]], live: Set[int]
) -> list[list[int]]:
    """A new topic's replica lists as a client gives them, (partition, replicas) pairs in
    any order: each partition once, partitions 0..n-1, one replication factor for all,
    each list valid for `check_replicas`. Returns the lists in partition order, each in
    the given order (its first replica the preferred leader); InvalidAssignment if
    unusable."""
    lists: dict[int, list[int]] = {}
    for partition, replicas in assignment:
        if partition in lists:
            raise InvalidAssignment(
                f"Found multiple manual partition assignments for partition {partition}"
            )
        lists[partition] = list(replicas)
    if len({len(replicas) for replicas in lists.values()}) != 1:
        raise InvalidAssignment("All partitions should have the same number of replicas")
    if sorted(lists) != list(range(len(lists))):
        raise InvalidAssignment("partitions should be a consecutive 0-based integer sequence")
    for partition in range(len(lists)):
        check_replicas(partition, lists[partition], live)
    return [lists[partition] for partition in range(len(lists))]


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
        check_replicas(i, replicas, live)
        if len(replicas) != rf:
            raise InvalidAssignment(
                f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                f"while partition {i} has {len(replicas)}."
            )
