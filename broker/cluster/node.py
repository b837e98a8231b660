"""ClusterNode: a broker's membership in a ZooKeeper-coordinated cluster.

(Just over the ~450 lines modules keep to: ~50 of them are this map of its jobs and
watches; the jobs themselves were split out as listed below.)

The cluster view (broker.cluster.view) `BrokerCore` chooses when `zookeeper.connect`
is set. Its jobs, and where each lives:

- the ZooKeeper session, registration, fencing, controller election and controlled
  shutdown: here;
- the cluster's metadata as last read (live brokers, topics, partition states, the
  controller's id): `metadata_cache.MetadataCache`, filled by the watches below;
- topic administration (mirroring `/brokers/topics` and `/config/topics` into the
  replica manager, and writing topics): `zk_topics.ZkTopics`;
- role changes of the hosted partitions (become leader or follower, step down):
  the replica manager's `become_leader_or_follower`, called from `on_state`;
- replication (the replica fetchers, ISR changes): `replica_fetcher`, `isr`.

Who watches what (all callbacks run on the event loop, see `zk.ZkSession`):

- `/brokers/ids` children -> the live brokers and their addresses.
- `/controller` data -> the controller's id; when absent, try to become the
  controller (`controller.elect_controller`), then run a `Controller`.
- `/brokers/topics`, `/config/topics/<t>`: see `zk_topics`.
- each `/brokers/topics/<t>/partitions/<p>/state` -> `on_state`: the newest state is
  kept in the cache and, unless it is older than the partition's epoch, applied by
  the replica manager: leader == this broker -> lead (stop fetching; the ISR and the
  znode version for compare-and-set come from the znode; the coordinators load their
  partitions); otherwise follow (delayed produces fail with NOT_LEADER_OR_FOLLOWER,
  the coordinators unload, the replica fetcher of the new leader takes the
  partition, truncating first).

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
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError, NoNodeError
from prometheus_client.core import Metric

from broker.cluster import zk
from broker.cluster.controller import Controller, elect_controller
from broker.cluster.isr import IsrManager
from broker.cluster.lease import LeaseKeeper
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.metadata_store import TopicMeta
from broker.cluster.producer_ids import ProducerIdBlocks, ZkBlockStore
from broker.cluster.reassignment import Listing, Outcome
from broker.cluster.replica_fetcher import ReplicaFetcherManager
from broker.cluster.replica_manager import ReplicaManager
from broker.cluster.view import (
    ACTIVE_CONTROLLER_DOC,
    OFFLINE_DOC,
    PartitionView,
    TopicPartition,
    answer_everywhere,
)
from broker.cluster.zk import BrokerInfo, PartitionState, ZkSession
from broker.cluster.zk_acls import ZkAclStore
from broker.cluster.zk_outage import SharedOutage
from broker.cluster.zk_topics import ZkTopics
from broker.config import BrokerConfig
from broker.dynamic_config import ZkBrokerConfigStore
from broker.groups.group_config_store import ZkGroupConfigStore
from broker.metrics import BrokerMetrics, gauge
from broker.protocol.api_keys import ApiKey
from broker.protocol.errors import ErrorCode
from broker.quotas.store import ZkQuotaStore
from broker.sasl.credentials import ZkCredentialStore
from broker.tasks import cancel_and_wait
from broker.telemetry.store import ZkClientMetricsStore
from broker.transactions.channel import BrokerChannels

if TYPE_CHECKING:
    from broker.cluster.metadata_store import LocalMetadataStore
    from broker.cluster.partition import Partition
    from broker.quotas.replication import ReplicationQuota
    from broker.security.acl import Entries, Resource

log = logging.getLogger(__name__)


class ClusterNode:
    """The cluster view (broker.cluster.view) of a ZooKeeper cluster's member. Owned
    by the BrokerCore; event-loop only.

    `endpoints()` gives this broker's advertised address per listener (registered in
    ZooKeeper); `follower_quota` is the follower side of the replication throttles
    (broker.quotas.replication), which its replica fetchers honour."""

    elects_leaders = True

    def __init__(
        self,
        config: BrokerConfig,
        store: LocalMetadataStore,
        replicas: ReplicaManager,
        metrics: BrokerMetrics,
        endpoints: Callable[[], dict[str, tuple[str, int]]],
        follower_quota: ReplicationQuota,
    ):
        self.config = config
        self.broker_id = config.broker_id
        self.store = store
        self.replicas = replicas
        self.metrics = metrics
        self.endpoints = endpoints
        session_s = self.config["zookeeper.session.timeout.ms"] / 1000
        self.zk = ZkSession(self.config["zookeeper.connect"], session_s)
        self.connect_timeout_s = self.config["zookeeper.connection.timeout.ms"] / 1000
        self.cache = MetadataCache(lambda: self.fenced)
        self.controller_epoch = 0
        self.fetchers = ReplicaFetcherManager(self, self.config, follower_quota)
        self.isr = IsrManager(self, self.config)
        self.producer_ids = ProducerIdBlocks(ZkBlockStore(self.zk, self.broker_id).reserve)
        self.credentials = ZkCredentialStore()  # watched from start()
        self.client_quotas = ZkQuotaStore()  # watched from start()
        # dynamic broker configs: notified through the client quota store's watcher
        self.broker_configs = ZkBrokerConfigStore(self.zk, self.client_quotas)
        self.client_metrics = ZkClientMetricsStore(self.zk, self.client_quotas)  # the same
        self.group_configs = ZkGroupConfigStore(self.zk, self.client_quotas)  # the same
        self.lease = LeaseKeeper(
            self.zk, zk.BROKER_IDS, session_s, self._lease_expired, self._unfence
        )
        self.riding_out = False  # the lease ran out in an outage every broker shares
        self.peer_channels = BrokerChannels(
            self.fetchers, lambda: self.brokers, self.broker_id, "zookeeper-outage"
        )
        self.outage = SharedOutage(
            session_s, self.lease.silent_s, self._peers, self._peer_controller, self._outage_over
        )
        self.controller: Controller | None = None
        self.registered = False
        self._stops: list = []
        self._tasks: set[asyncio.Task] = set()
        self.zk_topics = ZkTopics(
            self.zk,
            self.cache,
            replicas,
            self._spawn,
            self.on_state,
            self._topic_gone,
            self._topic_changed,
            self._replicas_deleted,
        )
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
            self.zk_topics.watch(),
            self.zk.watch_data(zk.CONTROLLER, self._controller_changed),
            self.zk.watch_children(zk.CONTROLLED_SHUTDOWN, self._leaving_changed),
            *self.credentials.watch(self.zk),  # broker.sasl.credentials
            *self.client_quotas.watch(self.zk),  # broker.quotas.store
        ]
        self.isr.start()
        self.lease.start()
        self.outage.start()
        self._spawn(self._register())
        log.info("broker %d joined ZooKeeper at %s", self.broker_id, self.zk.connect)

    async def _cluster_id(self) -> None:
        store = self.store
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
        if self.controller is not None:
            await self.controller.stop()
        await cancel_and_wait(list(self._tasks))
        await self.lease.stop()
        await self.outage.stop()
        self.peer_channels.close()
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
        return any(p.is_leader and usable & p.isr for p in self.replicas.partitions.values())

    def _leaving_changed(self, children: list[str]) -> None:
        self.leaving = {int(c) for c in children if c.isdigit()}

    # -- session, registration, controller ---------------------------------------------

    def _on_session(self, state: str) -> None:
        if self._stopping:
            return
        if state == "LOST":
            log.warning("ZooKeeper session expired: stepping down as leader everywhere")
            self.registered = False
            for p in list(self.replicas.partitions.values()):
                if p.is_leader:
                    self.replicas.step_down(p)
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
        Metadata names no leader and leaves itself out of the live brokers. Not while
        it rides out an outage that every broker shares (`zk_outage`)."""
        return self.lease.expired and not self.riding_out

    def _lease_expired(self, silent_s: float) -> None:
        if self._stopping:
            return
        if not self.outage.confirmed():
            self._fence(silent_s)
            return
        self.riding_out = True
        log.warning(
            "ZooKeeper unanswered for %.1f s (session timeout %.1f s), and by every other "
            "broker too: no leader can be elected, so this broker keeps its leaders, "
            "followers and ISR until ZooKeeper answers (it fences if another broker "
            "gets ZooKeeper first)",
            silent_s,
            self.lease.lease.timeout_s,
        )

    def _outage_over(self) -> None:
        """The other brokers no longer all confirm that ZooKeeper is gone for them."""
        if self.riding_out and self.lease.expired:
            self.riding_out = False
            self._fence(self.lease.silent_s())

    def _peers(self) -> list[int]:
        return [b for b in self.cache.brokers if b != self.broker_id]

    async def _peer_controller(self, broker_id: int) -> int:
        resp = await self.peer_channels.request(broker_id, ApiKey.METADATA, 1, {"topics": []})
        return int(resp["controller_id"])

    def _fence(self, silent_s: float) -> None:
        if self._stopping:
            return
        log.warning(
            "ZooKeeper unanswered for %.1f s (session timeout %.1f s): fenced, this broker "
            "stops leading and following until ZooKeeper answers again",
            silent_s,
            self.lease.lease.timeout_s,
        )
        self.replicas.step_down_everywhere(self.fetchers)
        self._tell_fenced(True)

    def _unfence(self) -> None:
        if self.riding_out:
            self.riding_out = False
            log.info("ZooKeeper answers again after an outage every broker shared")
            self._spawn(self.reread_states())
            return
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
        endpoints = self.endpoints()
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
        for topic, p in list(self.replicas.partitions):
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
        self.cache.controller_id = zk.decode_controller(data)
        if self.controller is not None and self.cache.controller_id != self.broker_id:
            controller, self.controller = self.controller, None
            self._spawn(controller.stop())
        if data is None and not self._stopping:
            self._spawn(self._try_control())

    async def _try_control(self) -> None:
        sent = time.monotonic()
        try:
            epoch = await elect_controller(self.zk, self.broker_id)
        except Exception as e:
            log.warning("controller election failed: %s", e)
            return
        # ZooKeeper answered: from now on this broker's peers must hear that it trusts
        # a controller (zk_outage, "Recovery"), not only after its next lease probe.
        self.lease.answered(sent)
        if epoch is None or self._stopping or self.controller is not None:
            return
        self.cache.controller_id = self.broker_id
        self.controller_epoch = epoch
        self.controller = Controller(self.zk, self.broker_id, self.config, epoch)
        self.controller.start()

    # -- what the topic mirror tells ------------------------------------------------------

    def _topic_gone(self, name: str, partitions: int) -> None:
        for p in range(partitions):
            self.fetchers.remove((name, p))

    def _replicas_deleted(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            self.fetchers.remove(key)

    def _topic_changed(self, name: str) -> None:
        self.isr.check_shrink(int(time.monotonic() * 1000))  # replicas moved away (isr)
        if self.controller is not None:
            self.controller.topic_changed(name)

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
        self.cache.brokers = brokers

    # -- partition states ---------------------------------------------------------------

    def on_state(self, topic: str, p: int, state: PartitionState) -> None:
        """A partition state read from ZooKeeper (watch, re-read or own write): kept
        if it is the newest, and acted on by the replica manager unless this broker
        is fenced or the partition already is in a newer epoch."""
        if not self.cache.record_state((topic, p), state):
            return
        part = self.replicas.get_partition(topic, p)
        if part is None or state.leader_epoch < part.leader_epoch or self.fenced:
            return
        self.replicas.become_leader_or_follower(part, state, self.fetchers)

    # -- views for request handlers -------------------------------------------------------

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self.cache.brokers

    @property
    def topics(self) -> dict[str, TopicMeta]:
        return self.cache.topics

    def leader_of(self, topic: str, p: int) -> int:
        return self.cache.leader_of(topic, p)

    def partition_view(self, topic: str, index: int) -> PartitionView:
        """Leader, ISR and offline replicas as ZooKeeper has them."""
        return self.cache.partition_view(topic, index)

    def active_controller_id(self) -> int:
        return -1 if self.fenced or self.outage.distrusted else self.cache.controller_id

    def check_lease(self) -> None:
        self.lease.poll()
        if self.riding_out and not self.outage.confirmed():
            self._outage_over()

    def follower_fetched(self, partition: Partition, replica_id: int) -> None:
        self.isr.maybe_expand(partition, replica_id)

    async def elect_leaders(
        self, wanted: list[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, ErrorCode]:
        """ElectLeaders runs on the controller; elsewhere NOT_CONTROLLER."""
        if self.controller is not None:
            return await self.controller.elect_leaders(wanted, unclean)
        return answer_everywhere(self.replicas.topics(), wanted, ErrorCode.NOT_CONTROLLER)

    async def alter_reassignments(
        self, wanted: dict[TopicPartition, list[int] | None]
    ) -> tuple[ErrorCode, dict[TopicPartition, Outcome]]:
        """AlterPartitionReassignments runs on the controller; elsewhere NOT_CONTROLLER
        for the whole request, as Kafka answers."""
        results = None
        if self.controller is not None:
            results = await self.controller.alter_reassignments(wanted)
        if results is None:
            return ErrorCode.NOT_CONTROLLER, {}
        return ErrorCode.NONE, results

    def list_reassignments(
        self, wanted: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, Listing]]:
        if self.controller is None:
            return ErrorCode.NOT_CONTROLLER, {}
        return ErrorCode.NONE, self.controller.list_reassignments(wanted)

    async def open_acl_store(self) -> tuple[ZkAclStore, dict[Resource, Entries]]:
        store = ZkAclStore(self.zk)
        return store, await store.load()

    def open_channels(self) -> BrokerChannels:
        return BrokerChannels(self.fetchers, lambda: self.brokers, self.broker_id)

    def collect_metrics(self) -> Iterator[Metric]:
        """Offline partitions as the active controller counts them (0 elsewhere)."""
        controller = self.controller is not None
        offline = self.cache.offline_partitions() if controller else 0
        yield gauge("offline_partitions", OFFLINE_DOC, offline)
        yield gauge("active_controller", ACTIVE_CONTROLLER_DOC, int(controller))

    # -- topic writes: ZooKeeper's (see zk_topics) ----------------------------------------

    def submit_create(self, meta: TopicMeta) -> None:
        self.zk_topics.submit_create(meta)

    async def create_and_wait(self, meta: TopicMeta, timeout_s: float) -> None:
        await self.zk_topics.create_and_wait(meta, timeout_s)

    def submit_delete(self, name: str) -> None:
        self.zk_topics.submit_delete(name)

    async def write_topic(self, meta: TopicMeta) -> None:
        await self.zk_topics.write(meta)
