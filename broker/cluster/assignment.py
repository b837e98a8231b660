"""Replica assignment for new topics, as Kafka's AdminUtils does it, plus one rule of
ours: the replicas of a partition go to distinct hosts.

Without racks: brokers sorted by id, partition i's first replica on broker
(i + start) mod n, its j-th replica on broker (i + start + j) mod n. Partition 0's
leader is broker `start`, partition 1's the next one, so leaders spread evenly.

With racks (every broker declares `broker.rack`): the broker list is first
interleaved rack by rack (r1's first broker, r2's first, r3's first, r1's second...),
then the same rotation is used, except that a replica goes to the next broker whose
rack does not hold one of the partition's replicas yet (while some rack has none) and
that is not already a replica.

Hosts: several brokers may run on one machine (one per core, deploy/README.md), and
a machine fails as a whole, so a partition whose replicas share one loses them
together. A broker's host is the host of its inter-broker endpoint as registered
(`broker_hosts`): the address the other brokers replicate from, which two machines
cannot share, so no key Kafka lacks is needed (the brokers of one machine must name
it the same way: deploy/README.md).
Within a rack (or the whole list without racks) the brokers are interleaved host by
host the same way, and a replica also skips brokers on a host that already holds
one, while some host holds none. A rack rule that cannot be met together with the
host rule gives way to it (brokers of one machine declaring different racks: the
machine still fails as one). With fewer hosts than the replication factor the
replicas are as spread as they can be: every host first, then again
(`host_shortfall` gives the warning the caller logs; Kafka refuses nothing here, so
neither do we). When every broker is on a host of its own, or all on one, this is
Kafka's assignment unchanged. Pure functions; safe anywhere.

Replica lists a client gives are checked here, with Kafka's messages, over the ids
of the registered brokers: `check_topic_assignment` for a new topic (CreateTopics),
`check_new_assignments` for added partitions (CreatePartitions), both through
`check_replicas`, the check of one partition's list that moving a partition's
replicas will need too. They are taken as given, hosts or not, as Kafka takes them.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence, Set


class AssignmentError(ValueError):
    """Not enough brokers for the replication factor, or mixed rack declarations."""


class InvalidAssignment(ValueError):
    """Replica lists given by a client that cannot be used."""


def first_broker(name: str, brokers: dict) -> int:
    """First broker of a topic's partition 0: spread by topic name (Kafka picks it at
    random)."""
    return zlib.crc32(name.encode()) % max(1, len(brokers))


def broker_hosts(infos: Mapping, listener: str) -> dict[int, str]:
    """Broker id -> host, from registrations (`broker.cluster.zk.BrokerInfo`): the host
    of each broker's `listener` endpoint (the inter-broker listener), else of its first
    one; lower-cased, as host names compare. Two brokers on one machine must name it
    the same way (both its address, or both its name): nothing is resolved here."""
    hosts = {}
    for broker_id, info in infos.items():
        address = info.endpoints.get(listener) or next(iter(info.endpoints.values()), None)
        hosts[broker_id] = address[0].lower() if address else f"broker {broker_id}"
    return hosts


def host_shortfall(hosts: Mapping[int, str], replication_factor: int) -> str | None:
    """Why some partitions will have two replicas on one host (fewer distinct hosts
    than the replication factor), or None."""
    distinct = sorted(set(hosts.values()))
    if len(distinct) >= replication_factor:
        return None
    return (
        f"replication factor {replication_factor} over brokers on {len(distinct)} "
        f"host(s) ({', '.join(distinct)}): some replicas of a partition share a host"
    )


def _host_interleaved(ids: Iterable[int], host_of: Mapping[int, object]) -> list[int]:
    """`ids` (sorted) interleaved host by host, hosts in the order of their first
    broker: h1's first, h2's first, ..., h1's second... Brokers on hosts of their own
    keep their order."""
    by_host: dict[object, list[int]] = {}
    for broker_id in ids:
        by_host.setdefault(host_of[broker_id], []).append(broker_id)
    return _interleave(list(by_host.values()))


def _interleave(lists: list[list[int]]) -> list[int]:
    out: list[int] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def rack_alternated(
    brokers: Mapping[int, str | None], hosts: Mapping[int, str] | None = None
) -> list[int]:
    """Broker ids interleaved by rack (racks in sorted order), each rack's brokers
    interleaved by host (without `hosts`, each broker its own: sorted ids)."""
    host_of = _host_keys(brokers, hosts)
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id] or "", []).append(broker_id)
    return _interleave([_host_interleaved(by_rack[r], host_of) for r in sorted(by_rack)])


def _host_keys(brokers: Mapping[int, object], hosts: Mapping[int, str] | None) -> dict[int, object]:
    """Each broker's host as a key; a broker `hosts` does not name is a host alone."""
    given = hosts or {}
    return {b: ("host", given[b]) if b in given else ("broker", b) for b in brokers}


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    start: int = 0,
    hosts: Mapping[int, str] | None = None,
) -> list[list[int]]:
    """Replica lists (preferred leader first) for `partitions` partitions.

    `brokers` maps live broker id -> rack (None when undeclared); `hosts` live broker
    id -> host (`broker_hosts`; None: each broker on a host of its own).
    """
    if replication_factor < 1:
        raise AssignmentError("replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    racks = set(brokers.values())
    if None in racks and len(racks) > 1:
        raise AssignmentError("Not all brokers have rack information.")
    host_of = _host_keys(brokers, hosts)
    ids = rack_alternated(brokers, hosts)
    n = len(ids)
    n_racks, n_hosts = len(racks), len(set(host_of.values()))
    out = []
    for i in range(partitions):
        chosen: list[int] = []
        used_racks: set[str | None] = set()
        used_hosts: set[object] = set()
        k = (i + start) % n
        while len(chosen) < replication_factor:
            racks_left = len(used_racks) < n_racks
            hosts_left = len(used_hosts) < n_hosts
            # the next broker in the rotation, not yet chosen, by the strictest rule
            # some broker meets: a fresh rack and host; a fresh host (brokers of one
            # machine declaring different racks: the host rule wins); any
            _, found = min(
                (
                    _penalty(
                        racks_left and brokers[ids[j % n]] in used_racks,
                        hosts_left and host_of[ids[j % n]] in used_hosts,
                    ),
                    j,
                )
                for j in range(k, k + n)
                if ids[j % n] not in chosen
            )
            broker = ids[found % n]
            chosen.append(broker)
            used_racks.add(brokers[broker])
            used_hosts.add(host_of[broker])
            k = found + 1
        out.append(chosen)
    return out


def _penalty(rack_taken: bool, host_taken: bool) -> int:
    """How far a candidate replica is from the rules: 0 meets both, 1 only the host
    rule, 2 neither."""
    if host_taken:
        return 2
    return 1 if rack_taken else 0


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
