"""The server-side assignors of the consumer group protocol (KIP-848).

The coordinator computes a group's target assignment itself: a member names an
assignor (`ServerAssignor` in its heartbeat) among those of
`group.consumer.assignors`, else the group uses the first of them. Both are pure
functions of the members' subscriptions, their current target assignment and the
subscribed topics' partition counts:

- `uniform` (Kafka's default, UniformAssignor): every partition of the subscribed
  topics to one member subscribed to its topic, the counts as even as the
  subscriptions allow, moving as few partitions as possible from the current target
  (sticky), so that a member joining or leaving disturbs only what balance needs.
- `range` (RangeAssignor): per topic, the subscribed members in member-id order get
  consecutive ranges of partitions, the first ones one more when the count does not
  divide evenly; members subscribed to the same topics get the same partition numbers
  of each (co-partitioning).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Protocol

TopicId = uuid.UUID
Assignment = Mapping[TopicId, frozenset[int]]


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member: the topics it subscribes to and its current
    target assignment (for stickiness)."""

    subscribed: frozenset[TopicId]
    current: Assignment = dataclasses.field(default_factory=dict)


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, int]
    ) -> dict[str, dict[TopicId, frozenset[int]]]:
        """The target assignment of every member, given the partition count of every
        subscribed topic."""


def _frozen(
    assignment: dict[str, dict[TopicId, set[int]]],
) -> dict[str, dict[TopicId, frozenset[int]]]:
    return {
        member: {t: frozenset(ps) for t, ps in topics.items() if ps}
        for member, topics in assignment.items()
    }


class UniformAssignor:
    """Balanced and sticky. Keeps each member's current partitions that are still
    valid (a partition claimed twice goes to the first member in id order), gives the
    free ones to the least loaded eligible member, then moves partitions from the
    most to the least loaded eligible member until no move narrows the gap."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, int]
    ) -> dict[str, dict[TopicId, frozenset[int]]]:
        order = sorted(members)
        held: dict[str, set[tuple[TopicId, int]]] = {m: set() for m in order}
        owner: dict[tuple[TopicId, int], str] = {}
        for m in order:
            spec = members[m]
            for t, parts in spec.current.items():
                if t not in spec.subscribed or t not in topics:
                    continue
                for p in parts:
                    if p < topics[t] and (t, p) not in owner:
                        owner[(t, p)] = m
                        held[m].add((t, p))
        eligible = {
            t: [m for m in order if t in members[m].subscribed] for t in sorted(topics, key=str)
        }
        free = [
            (t, p)
            for t in sorted(eligible, key=lambda t: (len(eligible[t]), str(t)))
            if eligible[t]
            for p in range(topics[t])
            if (t, p) not in owner
        ]
        for tp in free:
            m = min(eligible[tp[0]], key=lambda m: (len(held[m]), order.index(m)))
            owner[tp] = m
            held[m].add(tp)
        self._balance(order, held, eligible)
        result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in order}
        for m, tps in held.items():
            for t, p in tps:
                result[m].setdefault(t, set()).add(p)
        return _frozen(result)

    @staticmethod
    def _balance(
        order: list[str],
        held: dict[str, set[tuple[TopicId, int]]],
        eligible: dict[TopicId, list[str]],
    ) -> None:
        """Move one partition at a time from a member to an eligible member holding at
        least two fewer; each move lowers the sum of squared counts, so this ends."""
        moved = True
        while moved:
            moved = False
            for heavy in sorted(order, key=lambda m: -len(held[m])):
                best: tuple[int, str, tuple[TopicId, int]] | None = None
                for tp in sorted(held[heavy], key=lambda tp: (str(tp[0]), tp[1]), reverse=True):
                    for light in eligible.get(tp[0], ()):
                        gap = len(held[heavy]) - len(held[light])
                        if gap > 1 and (best is None or gap > best[0]):
                            best = (gap, light, tp)
                if best is not None:
                    _, light, tp = best
                    held[heavy].discard(tp)
                    held[light].add(tp)
                    moved = True
                    break


class RangeAssignor:
    """Per topic, consecutive ranges to the subscribed members in member-id order."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[TopicId, int]
    ) -> dict[str, dict[TopicId, frozenset[int]]]:
        result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
        for t, count in topics.items():
            subscribers = sorted(m for m, spec in members.items() if t in spec.subscribed)
            if not subscribers:
                continue
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                size = quota + (1 if i < extra else 0)
                result[m][t] = set(range(start, start + size))
                start += size
        return _frozen(result)


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def assignors_from_config(names: list[str]) -> dict[str, Assignor]:
    """`group.consumer.assignors` as ordered {name: assignor}: Kafka's short names, or
    its class names (org.apache.kafka.coordinator.group.assignor.UniformAssignor)."""
    chosen: dict[str, Assignor] = {}
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        short = name.rsplit(".", 1)[-1].removesuffix("Assignor").lower()
        assignor = ASSIGNORS.get(name) or ASSIGNORS.get(short)
        if assignor is None:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor {name!r} (known: uniform, range)"
            )
        chosen[assignor.name] = assignor
    if not chosen:
        raise ValueError("group.consumer.assignors: at least one assignor is required")
    return chosen
