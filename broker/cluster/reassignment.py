"""Partition reassignment (KIP-455) as Kafka's controller does it in ZooKeeper mode.

Kafka's names: RS the replicas now, TRS the target, ORS the origin (the replicas
before the move), AR = TRS - ORS the replicas being added, RR = ORS - TRS the ones
being removed. Every step is a ZooKeeper write, so a new controller resumes a move
from the znodes alone (`Reassignments.watch` for every partition whose topic znode
lists adding or removing replicas):

1. Start (AlterPartitionReassignments): the partition state gets a new leader epoch
   and loses from its ISR the replicas no longer wanted (those a replaced move was
   adding); then the topic znode gets replicas = TRS + ORS (target first, each
   broker once), `adding_replicas` = AR, `removing_replicas` = RR. Brokers learn
   both through their watches: an AR broker creates the replica and follows the
   leader (the new epoch makes every hosting broker apply the state again), a broker
   no longer listed stops and deletes its replica (Kafka's StopReplica with delete).
2. The controller watches the state znode. Once every TRS member is in the ISR, one
   state write moves leadership to a live TRS member if the leader is in RR or not
   live (else keeps it), drops RR from the ISR and bumps the epoch; then the topic
   znode gets replicas = TRS, without adding or removing replicas, and the RR brokers
   delete their replicas.
3. Cancel (null replicas): a move back to ORS, the same two writes; the AR members
   leave the ISR and delete their replicas.

The state is written before the topic znode (Kafka writes the znode first and sends
the ISR with StopReplica): brokers learn both from watches, and this order keeps the
ISR from naming a replica the topic no longer lists. A leader never takes an RR
replica back into its ISR, and drops from it any replica the topic no longer lists
(isr.py); after every topic-znode write the controller prunes the ISR to the new
replica set too, in case a controller failed between the two writes.

The `/admin/reassign_partitions` znode of the tools before KIP-455 asks for the same
moves: legacy_reassignment.py reads it and starts them here. The checks and the new
states are pure functions; `Reassignments` runs them on the controller's event task
(event-loop only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set
from typing import Protocol

from kazoo.exceptions import BadVersionError, NoNodeError

from broker.cluster import zk
from broker.cluster.assignment import InvalidAssignment, check_replicas
from broker.cluster.zk import Moving, PartitionState, ZkSession
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Outcome = tuple[ErrorCode, str | None]  # a partition's error code and message
Listing = tuple[list[int], list[int], list[int]]  # replicas, adding, removing
NOT_MOVING = Moving()


def origin_of(replicas: list[int], moving: Moving | None) -> list[int]:
    """ORS: the replicas without those being added."""
    adding = moving.adding if moving else ()
    return [r for r in replicas if r not in adding]


def target_of(replicas: list[int], moving: Moving | None) -> list[int]:
    """TRS: the replicas without those being removed."""
    removing = moving.removing if moving else ()
    return [r for r in replicas if r not in removing]


def reassign_to(
    replicas: list[int], moving: Moving | None, target: list[int]
) -> tuple[list[int], Moving]:
    """The replicas and the adding/removing sets of a move to `target` (replacing any
    move in progress, whose origin stays the origin)."""
    origin = origin_of(replicas, moving)
    full = list(dict.fromkeys([*target, *origin]))
    adding = tuple(r for r in target if r not in origin)
    removing = tuple(r for r in origin if r not in target)
    return full, Moving(adding, removing)


def check_target(partition: int, target: list[int], origin: list[int], live: Set[int]) -> None:
    """A target replica list: valid for `assignment.check_replicas`, where a broker of
    the origin counts even if it is down (as Kafka asks only the added ones to be
    alive). InvalidAssignment if not."""
    check_replicas(partition, target, set(live) | set(origin))


def moved_state(state: PartitionState, replicas: list[int], live: Set[int]) -> PartitionState:
    """The state once the replicas are `replicas`: the ISR without the others, the
    leader kept if it is one of them and live, else the first of them live and in the
    ISR (-1 without one), in a new leader epoch."""
    isr = tuple(r for r in state.isr if r in replicas)
    leader = state.leader
    if leader not in replicas or leader not in live:
        candidates = [r for r in replicas if r in live and r in isr]
        leader = candidates[0] if candidates else -1
    return state.replace(leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr)


def complete(target: list[int], state: PartitionState) -> bool:
    """Every target replica has caught up (is in the ISR)."""
    return set(target) <= set(state.isr)


class ControllerState(Protocol):
    """What a move needs of the controller (broker.cluster.controller)."""

    zk: ZkSession
    live: set[int]
    assignments: dict[str, list[list[int]]]
    moving: dict[str, dict[int, Moving]]

    async def write_state(self, topic: str, p: int, state: PartitionState) -> bool: ...

    def reassignment_changed(self, topic: str, p: int) -> None: ...


class Reassignments:
    """The controller's moves. Its methods run on the controller's event task, so
    two steps never interleave; they read and write the controller's `assignments`
    and `moving` (both as the topic znodes have them)."""

    def __init__(self, controller: ControllerState):
        self.c = controller
        self._watches: dict[TopicPartition, Callable[[], None]] = {}

    def stop(self) -> None:
        for stop in self._watches.values():
            stop()
        self._watches.clear()

    def listing(self, wanted: list[TopicPartition] | None) -> dict[TopicPartition, Listing]:
        """ListPartitionReassignments: the partitions asked about (None: all) that are
        being moved; the others are left out, as Kafka does."""
        asked = None if wanted is None else set(wanted)
        found = {}
        for topic, moves in sorted(self.c.moving.items()):
            for p, moving in sorted(moves.items()):
                if asked is None or (topic, p) in asked:
                    found[(topic, p)] = (
                        list(self.c.assignments[topic][p]),
                        list(moving.adding),
                        list(moving.removing),
                    )
        return found

    async def alter(
        self, wanted: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: start, replace or (None) cancel each move."""
        results: dict[TopicPartition, Outcome] = {}
        for (topic, p), target in wanted.items():
            results[(topic, p)] = await self._alter_one(topic, p, target)
        return results

    async def _alter_one(self, topic: str, p: int, target: list[int] | None) -> Outcome:
        parts = self.c.assignments.get(topic)
        known = parts is not None and 0 <= p < len(parts)
        replicas = parts[p] if parts is not None and known else []
        moving = self.c.moving.get(topic, {}).get(p)
        if target is not None:
            try:
                check_target(p, target, origin_of(replicas, moving), self.c.live)
            except InvalidAssignment as e:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)
        if target is None and moving is None:
            return (
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                "No partition reassignment is in progress.",
            )
        if not known:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        try:
            await self._start(
                topic, p, target if target is not None else origin_of(replicas, moving)
            )
        except (BadVersionError, NoNodeError, TimeoutError) as e:
            log.warning("controller: reassigning %s-%d failed: %r", topic, p, e)
            return ErrorCode.UNKNOWN_SERVER_ERROR, None
        return ErrorCode.NONE, None

    async def _start(self, topic: str, p: int, target: list[int]) -> None:
        replicas = self.c.assignments[topic][p]
        moving = self.c.moving.get(topic, {}).get(p)
        full, new = reassign_to(replicas, moving, target)
        if full != replicas or new != (moving or NOT_MOVING):
            log.info(
                "controller: reassigning %s-%d from %s to %s (adding %s, removing %s)",
                topic,
                p,
                replicas,
                target,
                list(new.adding),
                list(new.removing),
            )
            await self._write_state(topic, p, lambda s: moved_state(s, full, self.c.live))
            await self._write_topic(topic, p, full, new)
            await self._prune(topic, p, full)
        if new.adding or new.removing:
            self.watch(topic, p)  # the watch reports the state at once: `check` runs
        else:
            self._unwatch(topic, p)

    def watch(self, topic: str, p: int) -> None:
        """Check the move on every change of the partition's state (ISR changes)."""
        if (topic, p) not in self._watches:
            self._watches[(topic, p)] = self.c.zk.watch_data(
                zk.state_path(topic, p), lambda _data, _stat: self.c.reassignment_changed(topic, p)
            )

    def _unwatch(self, topic: str, p: int) -> None:
        stop = self._watches.pop((topic, p), None)
        if stop is not None:
            stop()

    async def check(self, topic: str, p: int) -> bool:
        """Finish the move of `topic`-`p` if every target replica is in the ISR; True
        once the partition is no longer being moved (completed, or gone)."""
        moving = self.c.moving.get(topic, {}).get(p)
        parts = self.c.assignments.get(topic)
        if moving is None or parts is None or p >= len(parts):
            self._unwatch(topic, p)
            return True
        target = target_of(parts[p], moving)

        def finished(state: PartitionState) -> PartitionState | None:
            return moved_state(state, target, self.c.live) if complete(target, state) else None

        if await self._write_state(topic, p, finished) is None:
            return False
        await self._write_topic(topic, p, target, NOT_MOVING)
        await self._prune(topic, p, target)
        self._unwatch(topic, p)
        log.info("controller: reassignment of %s-%d to %s completed", topic, p, target)
        return True

    async def _write_state(
        self, topic: str, p: int, change: Callable[[PartitionState], PartitionState | None]
    ) -> PartitionState | None:
        """Compare-and-set the state `change` makes of the current one (None: leave
        it); re-read and retry on a conflict."""
        for _ in range(10):
            data, stat = await self.c.zk.call("get", zk.state_path(topic, p))
            new = change(zk.decode_state(data, stat.version))
            if new is None:
                return None
            if await self.c.write_state(topic, p, new):
                return new
        raise BadVersionError(f"{topic}-{p}: the state kept changing")

    async def _write_topic(self, topic: str, p: int, replicas: list[int], moving: Moving) -> None:
        """Compare-and-set the topic znode with partition `p`'s new replicas and move."""
        for _ in range(10):
            data, stat = await self.c.zk.call("get", zk.topic_path(topic))
            assignments, topic_id = zk.decode_assignment(data)
            moves = zk.decode_reassigning(data)
            assignments[p] = list(replicas)
            if moving.adding or moving.removing:
                moves[p] = moving
            else:
                moves.pop(p, None)
            try:
                await self.c.zk.call(
                    "set",
                    zk.topic_path(topic),
                    zk.encode_assignment(assignments, topic_id, moves),
                    version=stat.version,
                )
            except BadVersionError:
                continue
            self.c.assignments[topic] = assignments
            self.c.moving[topic] = moves
            return
        raise BadVersionError(f"{topic}: the topic znode kept changing")

    async def _prune(self, topic: str, p: int, replicas: list[int]) -> None:
        """Drop from the state any replica the topic no longer lists (one the leader
        took back into the ISR before the topic znode was written)."""

        def pruned(state: PartitionState) -> PartitionState | None:
            if set(state.isr) <= set(replicas) and state.leader in (*replicas, -1):
                return None
            return moved_state(state, replicas, self.c.live)

        await self._write_state(topic, p, pruned)
