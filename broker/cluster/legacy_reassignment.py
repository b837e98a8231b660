"""The `/admin/reassign_partitions` znode: moves asked the way tools before KIP-455
ask them, as Kafka 3.9's ZooKeeper controller still takes them.

An old `kafka-reassign-partitions.sh --zookeeper` (or any script with a ZooKeeper
client) creates the znode with `{"version": 1, "partitions": [{"topic": "t",
"partition": 0, "replicas": [1, 2]}, ...]}` and refuses to while it exists. The
controller (Kafka's PartitionReassignmentHandler and processZkPartitionReassignment):

- reads the znode when it is created, and when a controller takes over (a later
  change of its data is not read: old tools never change it, they wait until it is
  gone); a znode created again after it was deleted is a new request, told apart by
  its creation zxid;
- starts each partition's move as AlterPartitionReassignments would
  (`Reassignments.alter`: the same checks and steps), replacing a move already in
  progress for that partition, API or not: the latest request wins;
- keeps in the znode only the partitions still moving towards the replicas it asks
  for: an entry leaves it when its move completes, when the move is refused (Kafka
  drops a failed entry too; the reason is logged), when an AlterPartitionReassignments
  request starts, replaces or cancels that partition's move, or when its topic is
  deleted. The controller deletes the znode with its last entry, after which an old
  tool may write the next request.

Unlike Kafka, the target replicas are checked as for the API (Kafka takes an empty or
duplicated list from the znode unchecked): a refused entry is logged and dropped. A
znode that is not valid JSON of that shape is ignored and left in place, as Kafka
does, with a warning saying so (delete it to ask again). Runs on the controller's
event task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
from kazoo.exceptions import BadVersionError, NoNodeError

from broker.cluster import zk
from broker.cluster.reassignment import ControllerState, Reassignments, target_of
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Requested = dict[TopicPartition, list[int]]


class LegacyFormatError(ValueError):
    """The znode's data is not Kafka's legacy reassignment JSON."""


def decode(data: bytes) -> Requested:
    """The moves the znode asks for, in its order (a partition named twice: the last)."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise LegacyFormatError(f"not valid JSON: {e}") from None
    entries = raw.get("partitions") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise LegacyFormatError('expected {"version": 1, "partitions": [...]}')
    wanted: Requested = {}
    for entry in entries:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and type(entry.get("partition")) is int
            and isinstance(entry.get("replicas"), list)
            and all(type(r) is int for r in entry["replicas"])
        ):
            raise LegacyFormatError(
                f'each partition needs "topic", "partition" and "replicas" (broker ids): {entry}'
            )
        wanted[(entry["topic"], entry["partition"])] = list(entry["replicas"])
    return wanted


def encode(wanted: Requested) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r} for (t, p), r in wanted.items()
            ],
        }
    )


def in_flight(controller: ControllerState, key: TopicPartition, replicas: list[int]) -> bool:
    """The partition is being moved, towards `replicas`."""
    topic, p = key
    moving = controller.moving.get(topic, {}).get(p)
    parts = controller.assignments.get(topic)
    if moving is None or parts is None or not 0 <= p < len(parts):
        return False
    return target_of(parts[p], moving) == replicas


class LegacyReassignments:
    """The controller's watch of `/admin/reassign_partitions`."""

    def __init__(self, controller: ControllerState, moves: Reassignments):
        self.c = controller
        self.moves = moves
        self._read_czxid: int | None = None  # the creation zxid of the znode last read
        self._stop: Callable[[], None] | None = None

    def start(self, on_created: Callable[[], None]) -> None:
        """Call `on_created` (which queues `process` on the controller's event task)
        for the znode there now and for every one created later."""

        def changed(data: bytes | None, stat) -> None:
            if data is not None and stat is not None and stat.czxid != self._read_czxid:
                on_created()

        self._stop = self.c.zk.watch_data(zk.REASSIGN_PARTITIONS, changed)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None

    async def process(self) -> None:
        """Start the moves of a znode not read yet, then drop the settled entries. The
        znode counts as read only once both are done: if a step fails, the controller
        runs this again (starting a move already started changes nothing)."""
        try:
            data, stat = await self.c.zk.call("get", zk.REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        if stat.czxid == self._read_czxid:
            return
        try:
            wanted = decode(data)
        except LegacyFormatError as e:
            self._read_czxid = stat.czxid
            log.warning(
                "controller: ignoring %s: %s; delete it to ask again", zk.REASSIGN_PARTITIONS, e
            )
            return
        log.info(
            "controller: %s asks to move %s",
            zk.REASSIGN_PARTITIONS,
            ", ".join(f"{t}-{p} to {r}" for (t, p), r in wanted.items()) or "nothing",
        )
        outcomes = await self.moves.alter(dict(wanted))
        for (t, p), (code, message) in outcomes.items():
            if code != ErrorCode.NONE:
                log.warning(
                    "controller: %s: the move of %s-%d to %s is refused: %s%s",
                    zk.REASSIGN_PARTITIONS,
                    t,
                    p,
                    wanted[(t, p)],
                    code.name,
                    f" ({message})" if message else "",
                )
        await self.prune()
        self._read_czxid = stat.czxid

    async def prune(self) -> None:
        """Keep in the znode only the partitions still moving towards what it asks for;
        delete it when none is left."""
        for _ in range(10):
            try:
                data, stat = await self.c.zk.call("get", zk.REASSIGN_PARTITIONS)
            except NoNodeError:
                return
            try:
                wanted = decode(data)
            except LegacyFormatError:
                return  # process() said why; an operator deletes it
            kept = {k: r for k, r in wanted.items() if in_flight(self.c, k, r)}
            if kept == wanted:
                return
            try:
                if kept:
                    await self.c.zk.call(
                        "set", zk.REASSIGN_PARTITIONS, encode(kept), version=stat.version
                    )
                else:
                    await self.c.zk.call("delete", zk.REASSIGN_PARTITIONS, version=stat.version)
            except (BadVersionError, NoNodeError):
                continue
            done = sorted(set(wanted) - set(kept))
            log.info(
                "controller: %s: %s no longer pending%s",
                zk.REASSIGN_PARTITIONS,
                ", ".join(f"{t}-{p}" for t, p in done),
                "" if kept else "; znode deleted",
            )
            return
        raise BadVersionError(f"{zk.REASSIGN_PARTITIONS} kept changing")
