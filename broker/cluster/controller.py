"""The controller: the one broker that elects partition leaders.

Election of the controller: every broker watches `/controller`; when it is absent,
each tries to create it (ephemeral). The winner bumps `/controller_epoch` by
compare-and-set and activates a `Controller`; the others keep watching. When the
controller's session ends, its znode disappears and the next broker to create it
takes over, starting with a full reconciliation.

What the controller watches and does (events are queued and handled one at a time by
one task, so two decisions never interleave):

- `/brokers/ids` children (live brokers) and `/admin/controlled_shutdown` children
  (brokers leaving): every partition is reconciled with `decide()`: a partition whose
  leader is gone or leaving gets the first replica (assignment order) that is live and
  in the ISR, with the leader epoch bumped; dead or leaving followers leave the ISR
  (no epoch bump: the leader keeps leading). With no such replica the partition goes
  offline (leader -1, ISR kept, so a returning ISR member gets it back), unless
  `unclean.leader.election.enable` allows any live replica.
- `/brokers/topics` children: partitions of new topics get their first state
  (first live replica leads, live replicas in the ISR, epoch 0).
- `/admin/delete_topics` children: the topic's znodes are removed; brokers watching
  `/brokers/topics` delete their logs.
- AlterPartitionReassignments, and the state znode of every partition being moved
  (its ISR): the steps of a move, in `reassignment.py`; a new controller resumes the
  moves the topic znodes record.
- `/admin/reassign_partitions` (created by tools before KIP-455): the same moves,
  read when the znode is created and when a controller takes over; the znode keeps
  only the moves still in progress and is deleted with the last (`legacy_reassignment.py`).
- A timer (`leader.imbalance.check.interval.seconds`), when
  `auto.leader.rebalance.enable`: a broker leading fewer than
  (100 - `leader.imbalance.per.broker.percentage`)% of the partitions it is the
  preferred (first) replica of gets them back, if it is live and in their ISR.

Every state write is a compare-and-set on the state znode's version; on a conflict
(the leader changed the ISR meanwhile) the controller re-reads and decides again.
Brokers learn their roles by watching the state znodes (see `node.py`); the
controller sends no RPCs. Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.cluster import zk
from broker.cluster.legacy_reassignment import LegacyReassignments
from broker.cluster.reassignment import Listing, Outcome, Reassignments
from broker.cluster.zk import Moving, PartitionState, ZkSession
from broker.protocol.errors import ErrorCode
from broker.tasks import cancel_and_wait

log = logging.getLogger(__name__)


def decide(
    assignment: list[int],
    state: PartitionState,
    live: set[int],
    leaving: set[int],
    unclean: bool,
) -> PartitionState | None:
    """The new state of one partition given who is live/leaving, or None to keep it."""
    usable = live - leaving
    isr_usable = [r for r in state.isr if r in usable]
    if state.leader in usable:
        if list(state.isr) != isr_usable:
            return state.replace(isr=tuple(isr_usable))
        return None
    candidates = [r for r in assignment if r in isr_usable]
    if candidates:
        leader = candidates[0]
        return state.replace(
            leader=leader, leader_epoch=state.leader_epoch + 1, isr=tuple(isr_usable)
        )
    if state.leader in live:  # leaving, but nobody else can take over: keep it
        return None
    never_led = state.leader == -1 and not state.isr
    if unclean or never_led:
        live_replicas = [r for r in assignment if r in usable]
        if live_replicas:
            leader = live_replicas[0]
            return state.replace(leader=leader, leader_epoch=state.leader_epoch + 1, isr=(leader,))
    if state.leader == -1:
        return None
    return state.replace(leader=-1, leader_epoch=state.leader_epoch + 1)


def elect(
    assignment: list[int], state: PartitionState, usable: set[int], unclean: bool
) -> tuple[ErrorCode, PartitionState | None]:
    """ElectLeaders for one partition: (NONE, new state), or (error, None) as Kafka
    answers. Preferred: the first replica leads if it is live and in the ISR. Unclean:
    only a partition without a live leader, by the first live replica."""
    if unclean:
        if state.leader in usable:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        live_replicas = [r for r in assignment if r in usable]
        if not live_replicas:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
        leader = live_replicas[0]
        return ErrorCode.NONE, state.replace(
            leader=leader, leader_epoch=state.leader_epoch + 1, isr=(leader,)
        )
    preferred = assignment[0]
    if state.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    if preferred not in usable or preferred not in state.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
    return ErrorCode.NONE, state.replace(leader=preferred, leader_epoch=state.leader_epoch + 1)


def initial_state(assignment: list[int], live: set[int], controller_epoch: int) -> PartitionState:
    isr = tuple(r for r in assignment if r in live)
    return PartitionState(isr[0] if isr else -1, 0, isr, controller_epoch)


def preferred_moves(
    states: dict[tuple[str, int], tuple[list[int], PartitionState]],
    live: set[int],
    leaving: set[int],
    imbalance_pct: int,
) -> list[tuple[tuple[str, int], PartitionState]]:
    """Partitions to hand back to their preferred leader, per Kafka's imbalance rule."""
    by_broker: dict[int, list] = {}
    for key, (assignment, state) in states.items():
        if assignment:
            by_broker.setdefault(assignment[0], []).append((key, assignment, state))
    moves: list[tuple[tuple[str, int], PartitionState]] = []
    for broker, items in by_broker.items():
        if broker not in live or broker in leaving:
            continue
        off = [(k, s) for k, a, s in items if s.leader != broker and broker in s.isr]
        not_led = sum(1 for _, a, s in items if s.leader != broker)
        if off and not_led * 100 > imbalance_pct * len(items):
            moves.extend(
                (k, s.replace(leader=broker, leader_epoch=s.leader_epoch + 1)) for k, s in off
            )
    return moves


class Controller:
    """Active while this broker holds `/controller`. Event-loop only."""

    def __init__(self, session: ZkSession, broker_id: int, config, epoch: int):
        self.zk = session
        self.broker_id = broker_id
        self.config = config
        self.epoch = epoch
        self.live: set[int] = set()
        self.leaving: set[int] = set()
        self.assignments: dict[str, list[list[int]]] = {}
        self.moving: dict[str, dict[int, Moving]] = {}  # partitions being reassigned
        self.reassignments = Reassignments(self)
        self.legacy = LegacyReassignments(self, self.reassignments)
        self.unclean: dict[str, bool] = {}
        self._events: asyncio.Queue = asyncio.Queue()
        self._altering: set[asyncio.Future] = set()  # requests waiting for their turn
        self._stoppers: list = []
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        self._tasks.append(asyncio.create_task(self._run()))
        self._stoppers = [
            self.zk.watch_children(zk.BROKER_IDS, lambda c: self._put("brokers", c)),
            self.zk.watch_children(zk.CONTROLLED_SHUTDOWN, lambda c: self._put("leaving", c)),
            self.zk.watch_children(zk.TOPICS, lambda c: self._put("topics", c)),
            self.zk.watch_children(zk.DELETE_TOPICS, lambda c: self._put("delete", c)),
        ]
        # after the topics watch: its first event loads the assignments the znode names
        self.legacy.start(lambda: self._put("legacy", []))
        if self.config["auto.leader.rebalance.enable"]:
            self._tasks.append(asyncio.create_task(self._rebalance_timer()))

    async def stop(self) -> None:
        for stop in self._stoppers:
            stop()
        self.reassignments.stop()
        self.legacy.stop()
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        for done in self._altering:  # no longer the controller: they get NOT_CONTROLLER
            if not done.done():
                done.set_result(None)

    def _put(self, kind: str, children: list[str]) -> None:
        self._events.put_nowait((kind, children))

    async def elect_leaders(
        self, wanted: list[tuple[str, int]] | None, unclean: bool
    ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders (None: every partition), run in turn with the other events."""
        done = asyncio.get_running_loop().create_future()
        self._events.put_nowait(("elect", (wanted, unclean, done)))
        return await done

    async def alter_reassignments(
        self, wanted: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], Outcome] | None:
        """AlterPartitionReassignments, run in turn with the other events; None if
        this broker stopped being the controller first."""
        done = asyncio.get_running_loop().create_future()
        self._altering.add(done)
        self._events.put_nowait(("alter", (wanted, done)))
        try:
            return await done
        finally:
            self._altering.discard(done)

    def list_reassignments(
        self, wanted: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], Listing]:
        return self.reassignments.listing(wanted)

    def reassignment_changed(self, topic: str, p: int) -> None:
        """The state of a partition being moved changed (its ISR, maybe)."""
        self._events.put_nowait(("reassign", (topic, p)))

    def topic_changed(self, topic: str) -> None:
        """A known topic's config or assignment changed (the cluster node's topic watches)."""
        self._events.put_nowait(("changed", topic))

    async def _run(self) -> None:
        while True:
            kind, arg = await self._events.get()
            try:
                await self._handle(kind, arg)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller: %s event failed; retrying", kind)
                await asyncio.sleep(0.5)
                self._put(kind, arg)

    async def _handle(self, kind: str, arg) -> None:
        if kind == "brokers":
            self.live = {int(c) for c in arg if c.isdigit()}
            log.info("controller: live brokers %s", sorted(self.live))
            await self._reconcile_all()
        elif kind == "leaving":
            self.leaving = {int(c) for c in arg if c.isdigit()}
            if self.leaving:
                log.info("controller: controlled shutdown of %s", sorted(self.leaving))
            await self._reconcile_all()
        elif kind == "topics":
            await self._topics_changed(set(arg))
        elif kind == "delete":
            for topic in arg:
                await self._delete_topic(topic)
        elif kind == "rebalance":
            await self._rebalance()
        elif kind == "changed" and arg in self.assignments:
            await self._topic_changed(arg)
        elif kind == "elect":
            wanted, unclean, done = arg
            if not done.done():
                done.set_result(await self._elect(wanted, unclean))
        elif kind == "alter":
            wanted, done = arg
            if not done.done():
                done.set_result(await self.reassignments.alter(wanted))
                self._put("legacy-prune", [])  # the latest request wins over the znode's
        elif kind == "reassign":
            if await self.reassignments.check(*arg):
                self._put("legacy-prune", [])
        elif kind == "legacy":
            await self.legacy.process()
        elif kind == "legacy-prune":
            await self.legacy.prune()

    async def _topics_changed(self, names: set[str]) -> None:
        gone = set(self.assignments) - names
        for topic in gone:
            self.assignments.pop(topic, None)
            self.moving.pop(topic, None)
            self.unclean.pop(topic, None)
        if gone:  # their moves asked for in /admin/reassign_partitions are moot
            self._put("legacy-prune", [])
        new = sorted(names - set(self.assignments))
        if new:  # fresh from ZooKeeper: a broker whose watch event is still queued counts
            children = await self.zk.call("get_children", zk.BROKER_IDS)
            self.live = {int(c) for c in children if c.isdigit()}
        for topic in new:
            await self._read_topic(topic)
        if new:
            await self._reconcile_all()
        for topic in new:  # moves a previous controller started: resume them
            for p in self.moving.get(topic, {}):
                self.reassignments.watch(topic, p)

    async def _read_topic(self, topic: str) -> None:
        """(Re-)read a topic's assignment and config; new partitions get a state."""
        try:
            data, _ = await self.zk.call("get", zk.topic_path(topic))
            assignments, _ = zk.decode_assignment(data)
            cfg_data = await self._get_or_none(zk.config_path(topic))
        except NoNodeError:
            return
        configs = zk.decode_config(cfg_data)
        known = len(self.assignments.get(topic, ()))
        self.assignments[topic] = assignments
        self.moving[topic] = zk.decode_reassigning(data)
        default = self.config["unclean.leader.election.enable"]
        flag = configs.get("unclean.leader.election.enable")
        self.unclean[topic] = default if flag is None else flag.lower() == "true"
        for p in range(known, len(assignments)):
            state = initial_state(assignments[p], self.live - self.leaving, self.epoch)
            try:
                await self.zk.call(
                    "create", zk.state_path(topic, p), zk.encode_state(state), makepath=True
                )
            except NodeExistsError:
                continue

    async def _topic_changed(self, topic: str) -> None:
        known = len(self.assignments[topic])
        await self._read_topic(topic)
        if len(self.assignments.get(topic, ())) > known:
            log.info("controller: %s has %d partitions", topic, len(self.assignments[topic]))
            await self._reconcile_all()

    async def _get_or_none(self, path: str) -> bytes | None:
        try:
            data, _ = await self.zk.call("get", path)
            return data
        except NoNodeError:
            return None

    async def read_states(self) -> dict[tuple[str, int], tuple[list[int], PartitionState]]:
        keys = [(t, p) for t, parts in self.assignments.items() for p in range(len(parts))]
        results = await asyncio.gather(
            *(self.zk.call("get", zk.state_path(t, p)) for t, p in keys), return_exceptions=True
        )
        out = {}
        for (t, p), res in zip(keys, results, strict=True):
            if isinstance(res, NoNodeError):
                continue
            if isinstance(res, BaseException):
                raise res
            data, stat = res
            out[(t, p)] = (self.assignments[t][p], zk.decode_state(data, stat.version))
        return out

    async def _reconcile_all(self) -> None:
        for _ in range(5):
            states = await self.read_states()
            conflicts = 0
            for (t, p), (assignment, state) in states.items():
                new = decide(assignment, state, self.live, self.leaving, self.unclean.get(t, False))
                if new is not None and not await self.write_state(t, p, new):
                    conflicts += 1
            if not conflicts:
                return

    async def write_state(self, topic: str, p: int, state: PartitionState) -> bool:
        """Compare-and-set a partition's state (against `state.version`); False on a
        conflict or when the partition is gone."""
        new = state.replace(controller_epoch=self.epoch)
        try:
            await self.zk.call(
                "set", zk.state_path(topic, p), zk.encode_state(new), version=state.version
            )
        except (BadVersionError, NoNodeError):
            return False
        log.info(
            "controller: %s-%d leader %d epoch %d isr %s",
            topic,
            p,
            new.leader,
            new.leader_epoch,
            list(new.isr),
        )
        return True

    async def _delete_topic(self, topic: str) -> None:
        for path in (zk.topic_path(topic), zk.config_path(topic)):
            try:
                await self.zk.blocking(lambda p=path: self.zk.client.delete(p, recursive=True))
            except NoNodeError:
                pass
        try:
            await self.zk.call("delete", f"{zk.DELETE_TOPICS}/{topic}")
        except NoNodeError:
            pass
        log.info("controller: deleted topic %s", topic)

    async def _elect(
        self, wanted: list[tuple[str, int]] | None, unclean: bool
    ) -> dict[tuple[str, int], ErrorCode]:
        results = {}
        for attempt in range(3):  # a state written meanwhile: read it again
            states = await self.read_states()
            retry = []
            for key in sorted(states) if wanted is None else wanted:
                if key in results:
                    continue
                if key not in states:
                    results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                assignment, state = states[key]
                code, new = elect(assignment, state, self.live - self.leaving, unclean)
                if new is None:
                    results[key] = code
                elif await self.write_state(*key, new):
                    results[key] = ErrorCode.NONE
                elif attempt < 2:
                    retry.append(key)
                else:
                    results[key] = ErrorCode.REQUEST_TIMED_OUT
            if not retry:
                break
        return results

    async def _rebalance_timer(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await asyncio.sleep(interval)
            self._events.put_nowait(("rebalance", None))

    async def _rebalance(self) -> None:
        states = await self.read_states()
        pct = self.config["leader.imbalance.per.broker.percentage"]
        for (t, p), new in preferred_moves(states, self.live, self.leaving, pct):
            log.info("controller: preferred leader %d for %s-%d", new.leader, t, p)
            await self.write_state(t, p, new)


async def elect_controller(session: ZkSession, broker_id: int) -> int | None:
    """Try to become the controller: the new controller epoch, or None if taken."""
    try:
        await session.call("create", zk.CONTROLLER, zk.encode_controller(broker_id), ephemeral=True)
    except NodeExistsError:
        return None
    while True:
        try:
            data, stat = await session.call("get", zk.CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                await session.call("create", zk.CONTROLLER_EPOCH, b"1")
                return 1
            except NodeExistsError:
                continue
        epoch = int(data or b"0") + 1
        try:
            await session.call(
                "set", zk.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version
            )
            return epoch
        except BadVersionError:
            continue
