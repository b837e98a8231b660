"""ClusterNode: a broker's membership in a ZooKeeper-coordinated cluster.

Started by `BrokerCore` when `zookeeper.connect` is set. It keeps the cluster view
every request handler needs (`brokers`, `topics`, `states`, `controller_id`) and
turns partition state changes into role changes of the local partitions.

Who watches what (all callbacks run on the event loop, see `zk.ZkSession`):

- `/brokers/ids` children -> `brokers` (live brokers and their addresses).
- `/controller` data -> `controller_id`; when absent, try to become the controller
  (`controller.elect_controller`), then run a `Controller`.
- `/brokers/topics` children -> for each new topic, its assignment and config are
  read, the topic is stored locally and logs are created for the partitions this
  broker replicates (`ReplicaManager.apply_topic`); a data watch is set on every
  partition's state znode. Topics that disappear are removed with their logs.
- each `/config/topics/<t>` and `/brokers/topics/<t>` data -> changed config
  overrides and added partitions (AlterConfigs, CreatePartitions: any broker writes
  them with `write_topic`) are applied the same way; the controller hears of them
  too, to give new partitions a state and to know the unclean-election flag.
- each `/brokers/topics/<t>/partitions/<p>/state` -> `states` and `on_state`:
  leader == this broker -> `become_leader` (stop fetching; the ISR and the znode
  version for compare-and-set come from the znode; `__consumer_offsets` partitions
  are loaded by the group coordinator); otherwise `become_follower` (delayed produces
  fail with NOT_LEADER_OR_FOLLOWER, coordinator partitions are unloaded, the replica
  fetcher of the new leader takes the partition, truncating first). States with an
  older leader epoch than the partition's are ignored.

Fencing (`lease.LeaseKeeper`): when ZooKeeper has not answered for almost a session
timeout, ZooKeeper may be about to expire this broker and the controller to elect
other leaders, though the broker hears of it only when it gets through again. So it
fences itself first: every partition steps down to "leader unknown" (waiting produces
fail with NOT_LEADER_OR_FOLLOWER), the replica fetchers stop, Metadata names no leader
and leaves this broker out, states heard meanwhile are recorded but not acted on, and
the fence listeners (the server: drop client connections, reset new ones) are told.
When ZooKeeper answers again, it re-reads every state and rejoins (leads again if
ZooKeeper still names it, else follows and truncates), then serves clients again.

Registration: `/brokers/ids/<id>` is created (ephemeral) once the previous session's
registration of the same id, if any, has expired; until then the broker already
follows and serves, it is just not counted as live. Session loss (LOST): every
partition this broker leads steps down at once (so nothing more can complete as
committed here); on reconnection the watches re-read everything and the broker
registers again and re-reads every hosted partition's state (a watch fires only for
a znode that changed, and an unchanged state naming this broker means it leads again).

Controlled shutdown (SIGTERM): `/admin/controlled_shutdown/<id>` asks the controller
to move leadership away and drop this broker from ISRs; the broker waits (bounded)
until it leads no partition that another in-sync replica could lead, then stops
fetching and exits. Event-loop only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from broker.cluster import zk
from broker.cluster.controller import Controller, elect_controller
from broker.cluster.isr import IsrManager
from broker.cluster.lease import LeaseKeeper
from broker.cluster.metadata_store import TopicMeta
from broker.cluster.producer_ids import ZkProducerIds
from broker.cluster.replica_fetcher import ReplicaFetcherManager
from broker.cluster.replica_manager import TopicError
from broker.cluster.zk import BrokerInfo, PartitionState, ZkSession
from broker.protocol.errors import ErrorCode
from broker.tasks import cancel_and_wait
from common.topic_names import CONSUMER_OFFSETS, TRANSACTION_STATE

log = logging.getLogger(__name__)


class ClusterNode:
    """Owned by the BrokerCore; event-loop only."""

    def __init__(self, core):
        self.core = core
        self.config = core.config
        self.broker_id = core.broker_id
        session_s = self.config["zookeeper.session.timeout.ms"] / 1000
        self.zk = ZkSession(self.config["zookeeper.connect"], session_s)
        self.connect_timeout_s = self.config["zookeeper.connection.timeout.ms"] / 1000
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self.controller_epoch = 0
        self.topics: dict[str, TopicMeta] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.fetchers = ReplicaFetcherManager(self, self.config)
        self.isr = IsrManager(self, self.config)
        self.producer_ids = ZkProducerIds(self.zk, self.broker_id)
        self.lease = LeaseKeeper(self.zk, zk.BROKER_IDS, session_s, self._fence, self._unfence)
        self.controller: Controller | None = None
        self.registered = False
        self._state_stops: dict[str, list] = {}
        self._stops: list = []
        self._tasks: set[asyncio.Task] = set()
        self._topic_lock = asyncio.Lock()
        self._broker_gen = 0
        self.leaving: set[int] = set()
        self.fence_listeners: list = []  # fn(fenced: bool), e.g. the server's listener
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        await self.zk.start(self.connect_timeout_s)
        for path in zk.BASE_PATHS:
            await self.zk.call("ensure_path", path)
        await self._cluster_id()
        self.zk.add_state_listener(self._on_session)
        self._stops = [
            self.zk.watch_children(zk.BROKER_IDS, self._brokers_changed),
            self.zk.watch_children(zk.TOPICS, self._topics_changed),
            self.zk.watch_data(zk.CONTROLLER, self._controller_changed),
            self.zk.watch_children(zk.CONTROLLED_SHUTDOWN, self._leaving_changed),
            *self.core.extensions["scram"].watch(self.zk),  # broker.sasl.credentials
        ]
        self.isr.start()
        self.lease.start()
        self._spawn(self._register())
        log.info("broker %d joined ZooKeeper at %s", self.broker_id, self.zk.connect)

    async def _cluster_id(self) -> None:
        store = self.core.store
        try:
            payload = b'{"version":"1","id":"%s"}' % store.cluster_id.encode()
            await self.zk.call("create", zk.CLUSTER_ID, payload)
        except NodeExistsError:
            import orjson

            data, _ = await self.zk.call("get", zk.CLUSTER_ID)
            store.cluster_id = str(orjson.loads(data)["id"])

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        self._stopping = True
        for stop in self._stops:
            stop()
        for stops in self._state_stops.values():
            for stop in stops:
                stop()
        if self.controller is not None:
            await self.controller.stop()
        await cancel_and_wait(list(self._tasks))
        await self.lease.stop()
        await self.isr.stop()
        await self.fetchers.stop()
        try:
            await self.zk.close()
        except TimeoutError:
            log.warning("ZooKeeper client did not close in time")

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Ask the controller to move leadership away; wait until it did (bounded)."""
        path = f"{zk.CONTROLLED_SHUTDOWN}/{self.broker_id}"
        try:
            await self.zk.call("create", path, b"", ephemeral=True)
        except NodeExistsError:
            pass
        except Exception as e:
            log.warning("controlled shutdown request failed: %s", e)
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._leads_movable():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        moved = not self._leads_movable()
        log.info("controlled shutdown: leadership %s", "moved" if moved else "NOT fully moved")
        self.fetchers.remove_all()

    def _leads_movable(self) -> bool:
        usable = set(self.brokers) - self.leaving - {self.broker_id}
        return any(p.is_leader and usable & p.isr for p in self.core.replicas.partitions.values())

    def _leaving_changed(self, children: list[str]) -> None:
        self.leaving = {int(c) for c in children if c.isdigit()}

    # -- session, registration, controller ---------------------------------------------

    def _on_session(self, state: str) -> None:
        if self._stopping:
            return
        if state == "LOST":
            log.warning("ZooKeeper session expired: stepping down as leader everywhere")
            self.registered = False
            for p in self.core.replicas.partitions.values():
                if p.is_leader:
                    self._step_down(p)
            if self.controller is not None:
                controller, self.controller = self.controller, None
                self._spawn(controller.stop())
        elif state == "CONNECTED" and not self.registered:
            self._spawn(self._register())
            self._spawn(self.reread_states())

    @property
    def fenced(self) -> bool:
        """True while the session lease has run out (see `lease`): ZooKeeper may
        already have expired this broker, so it neither leads nor follows, and its
        Metadata names no leader and leaves itself out of the live brokers."""
        return self.lease.expired

    def _fence(self, silent_s: float) -> None:
        if self._stopping:
            return
        log.warning(
            "ZooKeeper unanswered for %.1f s (session timeout %.1f s): fenced, this broker "
            "stops leading and following until ZooKeeper answers again",
            silent_s,
            self.lease.lease.timeout_s,
        )
        for p in self.core.replicas.partitions.values():
            if p.is_leader:
                log.info("%s-%d: fenced, no longer leader in epoch %d", *p.key, p.leader_epoch)
                self._step_down(p)
            else:
                p.become_follower(-1, p.leader_epoch, p.isr_list(), p.zk_version)
        self.fetchers.remove_all()
        self._tell_fenced(True)

    def _unfence(self) -> None:
        if not self._stopping:
            log.info("ZooKeeper answers again: re-reading the partitions' states")
            self._spawn(self._rejoin())

    async def _rejoin(self) -> None:
        await self.reread_states()
        if not self.fenced:
            self._tell_fenced(False)

    def _tell_fenced(self, fenced: bool) -> None:
        for fn in list(self.fence_listeners):
            try:
                fn(fenced)
            except Exception:
                log.exception("fence listener failed")

    async def _register(self) -> None:
        endpoints = self.core.endpoints()
        info = BrokerInfo(self.broker_id, endpoints, self.config["broker.rack"])
        protocols = {lst.name: lst.protocol for lst in self.config.listeners.listeners}
        path = zk.broker_path(self.broker_id)
        while not self.registered:
            try:
                data = zk.encode_broker(info, protocols)
                await self.zk.call("create", path, data, ephemeral=True)
                self.registered = True
                log.info(
                    "registered as broker %d (%s)",
                    self.broker_id,
                    ", ".join(f"{n}://{h}:{p}" for n, (h, p) in endpoints.items()),
                )
                return
            except NodeExistsError:
                try:
                    stat = await self.zk.call("exists", path)
                except NoNodeError:
                    continue
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    self.registered = True
                    return
            except Exception as e:
                log.debug("registration failed: %s", e)
            await asyncio.sleep(0.25)

    async def reread_states(self) -> None:
        """After a lost session, apply every hosted partition's state as ZooKeeper has it
        now. The state watches only report znodes that changed, and a leader that stepped
        down on LOST must lead again if ZooKeeper still names it in the same epoch (all
        sessions expired and the new controller found everyone live, so nothing moved);
        else that partition would stay without a serving leader."""
        for topic, p in list(self.core.replicas.partitions):
            if topic not in self.topics:
                continue
            try:
                data, stat = await self.zk.call("get", zk.state_path(topic, p))
            except NoNodeError:
                continue
            except Exception as e:
                log.warning("%s-%d: re-reading the state failed: %s", topic, p, e)
                continue
            self.on_state(topic, p, zk.decode_state(data, stat.version))

    def _controller_changed(self, data, stat) -> None:
        self.controller_id = zk.decode_controller(data)
        if self.controller is not None and self.controller_id != self.broker_id:
            controller, self.controller = self.controller, None
            self._spawn(controller.stop())
        if data is None and not self._stopping:
            self._spawn(self._try_control())

    async def _try_control(self) -> None:
        try:
            epoch = await elect_controller(self.zk, self.broker_id)
        except Exception as e:
            log.warning("controller election failed: %s", e)
            return
        if epoch is None or self._stopping or self.controller is not None:
            return
        self.controller_id = self.broker_id
        self.controller_epoch = epoch
        self.controller = Controller(self.zk, self.broker_id, self.config, epoch)
        self.controller.start()

    # -- live brokers ---------------------------------------------------------------------

    def _brokers_changed(self, children: list[str]) -> None:
        self._broker_gen += 1
        self._spawn(self._read_brokers(self._broker_gen, [int(c) for c in children if c.isdigit()]))

    async def _read_brokers(self, gen: int, ids: list[int]) -> None:
        results = await asyncio.gather(
            *(self.zk.call("get", zk.broker_path(i)) for i in ids), return_exceptions=True
        )
        if gen != self._broker_gen:
            return
        brokers = {}
        for broker_id, res in zip(ids, results, strict=True):
            if isinstance(res, BaseException):
                continue
            try:
                brokers[broker_id] = zk.decode_broker(broker_id, res[0])
            except ValueError as e:
                log.warning("ignoring the registration of broker %d: %s", broker_id, e)
        self.brokers = brokers

    # -- topics -------------------------------------------------------------------------

    def _topics_changed(self, children: list[str]) -> None:
        self._spawn(self._sync_topics(set(children)))

    async def _sync_topics(self, names: set[str]) -> None:
        async with self._topic_lock:
            for name in sorted(set(self.core.replicas.topics()) - names):
                self._remove_topic(name)
            for name in sorted(names - set(self.topics)):
                try:
                    data, _ = await self.zk.call("get", zk.topic_path(name))
                    cfg = await self.zk.call("get", zk.config_path(name))
                except NoNodeError:
                    continue
                assignments, topic_id = zk.decode_assignment(data)
                meta = TopicMeta(
                    name=name,
                    partitions=len(assignments),
                    replication_factor=len(assignments[0]) if assignments else 0,
                    configs=zk.decode_config(cfg[0]),
                    assignments=assignments,
                    topic_id=topic_id or name,
                )
                self.topics[name] = meta
                self.core.replicas.apply_topic(meta)
                self._state_stops[name] = [
                    self.zk.watch_data(
                        zk.config_path(name),
                        lambda data, _stat, t=name: self._config_changed(t, data),
                    ),
                    self.zk.watch_data(
                        zk.topic_path(name),
                        lambda data, _stat, t=name: self._assignment_changed(t, data),
                    ),
                ]
                self._watch_states(name, range(meta.partitions))

    def _watch_states(self, name: str, partitions: range) -> None:
        self._state_stops[name] += [
            self.zk.watch_data(
                zk.state_path(name, p),
                lambda data, stat, t=name, i=p: self._state_changed(t, i, data, stat),
            )
            for p in partitions
        ]

    def _config_changed(self, name: str, data: bytes | None) -> None:
        meta = self.topics.get(name)
        if meta is None or data is None:
            return
        configs = zk.decode_config(data)
        if configs != meta.configs:
            self._changed(dataclasses.replace(meta, configs=configs))

    def _assignment_changed(self, name: str, data: bytes | None) -> None:
        meta = self.topics.get(name)
        if meta is None or data is None:
            return
        assignments, _ = zk.decode_assignment(data)
        if len(assignments) > meta.partitions:
            self._changed(
                dataclasses.replace(meta, partitions=len(assignments), assignments=assignments)
            )

    def _changed(self, meta: TopicMeta) -> None:
        """A known topic's new config or partitions, from a watch or our own write."""
        old = self.topics[meta.name]
        self.topics[meta.name] = meta
        self.core.replicas.apply_topic(meta)
        self._watch_states(meta.name, range(old.partitions, meta.partitions))
        if self.controller is not None:
            self.controller.topic_changed(meta.name)

    def _remove_topic(self, name: str) -> None:
        for stop in self._state_stops.pop(name, []):
            stop()
        meta = self.topics.pop(name, None) or self.core.replicas.topic(name)
        for p in range(meta.partitions if meta else 0):
            self.states.pop((name, p), None)
            self.fetchers.remove((name, p))
        self.core.replicas.remove_topic(name)
        log.info("topic %s removed", name)

    # -- partition states ---------------------------------------------------------------

    def _state_changed(self, topic: str, p: int, data, stat) -> None:
        if data is None:
            return
        self.on_state(topic, p, zk.decode_state(data, stat.version))

    def on_state(self, topic: str, p: int, state: PartitionState) -> None:
        """A partition state read from ZooKeeper (watch, re-read or own write)."""
        key = (topic, p)
        known = self.states.get(key)
        if known is not None and known.leader_epoch > state.leader_epoch:
            return
        if known is not None and known.leader_epoch == state.leader_epoch:
            if known.version > state.version:
                return
        self.states[key] = state
        part = self.core.replicas.get_partition(topic, p)
        if part is None or state.leader_epoch < part.leader_epoch or self.fenced:
            return
        if state.leader == self.broker_id:
            if not part.is_leader or state.leader_epoch != part.leader_epoch:
                self.fetchers.remove(key)
                part.become_leader(state.leader_epoch, state.isr, state.version, _now_ms())
                log.info("%s-%d: leader in epoch %d", topic, p, state.leader_epoch)
                self._coordinator_hook(topic, p, True)
            else:
                self.core.metrics.isr_changed(len(part.isr), len(state.isr))
                part.update_isr(state.isr, state.version)
            return
        changed = part.leader != state.leader or part.leader_epoch != state.leader_epoch
        was_leader = part.is_leader
        part.become_follower(state.leader, state.leader_epoch, state.isr, state.version)
        if was_leader:
            self._coordinator_hook(topic, p, False)
        if changed or was_leader:
            self.fetchers.remove(key)
            if state.leader >= 0:
                self.fetchers.add(part, state.leader)
            log.info(
                "%s-%d: follower of %d in epoch %d", topic, p, state.leader, state.leader_epoch
            )

    def _step_down(self, part) -> None:
        part.become_follower(-1, part.leader_epoch, part.isr_list(), part.zk_version)
        self._coordinator_hook(part.topic, part.index, False)

    def _coordinator_hook(self, topic: str, p: int, leader: bool) -> None:
        if topic == TRANSACTION_STATE:
            self._txn_coordinator_hook(p, leader)
            return
        if topic != CONSUMER_OFFSETS:
            return
        coordinator = self.core.extensions.get("groups")
        if coordinator is None:
            return
        if leader:
            if p not in coordinator.owned:
                coordinator.load_partition(p, int(time.time() * 1000))
        else:
            coordinator.unload_partition(p)

    def _txn_coordinator_hook(self, p: int, leader: bool) -> None:
        """Leading a `__transaction_state` partition makes this broker the
        coordinator of its transactional ids, in the partition's leader epoch."""
        coordinator = self.core.extensions.get("transactions")
        if coordinator is None:
            return
        coordinator.unload_partition(p)
        if leader:
            part = self.core.replicas.get_partition(TRANSACTION_STATE, p)
            coordinator.load_partition(p, part.leader_epoch)

    # -- views for request handlers -------------------------------------------------------

    def leader_of(self, topic: str, p: int) -> int:
        state = self.states.get((topic, p))
        if state is None or state.leader not in self.brokers or self.fenced:
            return -1
        return state.leader

    # -- topic creation and deletion (any broker writes, the controller acts) ------------

    async def create_topic(self, meta: TopicMeta) -> None:
        """Write a new topic's config and assignment (raises NodeExistsError)."""
        await self.zk.call(
            "create", zk.config_path(meta.name), zk.encode_config(meta.configs), makepath=True
        )
        await self.zk.call(
            "create",
            zk.topic_path(meta.name),
            zk.encode_assignment(meta.assignments, meta.topic_id),
            makepath=True,
        )

    async def create_and_wait(self, meta: TopicMeta, timeout_s: float) -> None:
        """CreateTopics: write the topic, then wait (at most timeout_s) until this
        broker knows it and every partition has a leader, as Kafka's delayed create
        does, so a client that uses the topic next finds it as created. TopicError:
        TOPIC_ALREADY_EXISTS when another request (an auto-creation too) wrote it
        first, REQUEST_TIMED_OUT when ZooKeeper or the controller did not answer in time
        (the topic may still appear, as in Kafka)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        try:
            await self.create_topic(meta)
        except NodeExistsError:
            raise TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{meta.name}' already exists."
            ) from None
        except (KazooException, TimeoutError) as e:
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {e!r}") from None
        log.info("created topic %s: %s", meta.name, meta.assignments)
        while timeout_s > 0 and not self._serves(meta):
            if loop.time() >= deadline:
                raise TopicError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"Topic '{meta.name}' was created but its partitions have no leader yet.",
                )
            await asyncio.sleep(0.02)

    def _serves(self, meta: TopicMeta) -> bool:
        known = self.topics.get(meta.name)
        return (
            known is not None
            and known.partitions == meta.partitions
            and all(self.leader_of(meta.name, i) >= 0 for i in range(meta.partitions))
        )

    def submit_create(self, meta: TopicMeta) -> None:
        """CreateTopics/auto-creation: write the topic in the background."""
        self._spawn(self._create(meta))

    async def _create(self, meta: TopicMeta) -> None:
        try:
            await self.create_topic(meta)
            log.info("created topic %s: %s", meta.name, meta.assignments)
        except NodeExistsError:
            pass
        except Exception as e:
            log.warning("creating topic %s failed: %s", meta.name, e)

    async def write_topic(self, meta: TopicMeta) -> None:
        """Write a known topic's new config overrides and assignment (AlterConfigs,
        CreatePartitions) and apply them here at once; the other brokers follow from
        their watches. The assignment is written only if it still has the partition
        count this broker knew (compare-and-set), else TopicError."""
        old = self.topics.get(meta.name)
        if old is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if meta.configs != old.configs:
            await self.zk.call("set", zk.config_path(meta.name), zk.encode_config(meta.configs))
        if meta.partitions != old.partitions:
            data, stat = await self.zk.call("get", zk.topic_path(meta.name))
            if len(zk.decode_assignment(data)[0]) != old.partitions:
                raise TopicError(
                    ErrorCode.REASSIGNMENT_IN_PROGRESS,
                    "The topic's partitions changed meanwhile; try again.",
                )
            await self.zk.call(
                "set",
                zk.topic_path(meta.name),
                zk.encode_assignment(meta.assignments, meta.topic_id),
                version=stat.version,
            )
        if self.topics.get(meta.name) is old:
            self._changed(meta)

    def submit_delete(self, name: str) -> None:
        self._spawn(self.delete_topic(name))

    async def delete_topic(self, name: str) -> None:
        try:
            await self.zk.call("create", f"{zk.DELETE_TOPICS}/{name}", b"", makepath=True)
        except NodeExistsError:
            pass


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
