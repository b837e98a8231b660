"""The broker's composition root: every service behind the network shell, built in
one visible order.

`BrokerCore` is what request handlers see as `ctx.core`. `start()` builds, in this
order, each service as a typed attribute from those before it:

1. `store`: the local topic registry (`broker.cluster.metadata_store`),
2. `logs`: the `LogManager` over the data directory,
3. `replicas`: the `ReplicaManager` with every hosted `Partition`,
4. `replication_quotas`: the replication throttles (broker.quotas.replication), read
   by the Fetch handler (leader side) and the replica fetchers (follower side);
   `cluster`: the cluster view (`broker.cluster.view`), chosen here and only here:
   `SingleNode` without `zookeeper.connect`, else `ClusterNode`. It brings the
   producer-id allocator (`producer_ids`), the SCRAM credential store (`scram`)
   and the client quota store (`client_quotas`) of its mode; `quotas`, the
   byte-rate quota enforcement over it (broker.quotas.manager); `topic_admin`
   checks the topic writes clients ask for and hands them to it;
5. `group_configs`, the dynamic group configs (broker.groups.group_config, over the
   cluster view's store) that the two below follow;
   `groups`: the `GroupCoordinator` over `__consumer_offsets`; `share_states`, the
   share coordinator over `__share_group_state` (broker.share.state_store), and
   `shares`, the share groups (KIP-932, broker.share.manager): coordinated where the
   classic groups are, their share-partitions on the data partitions' leaders, their
   state written to the share coordinator through a `SharePersister`, the groups
   themselves in `__consumer_offsets` (loaded and unloaded with its partitions),
6. `markers` and `transactions`: transaction markers written here, and the
   `TransactionCoordinator` over `__transaction_state`, with `txn_verifier` (KIP-890:
   what a transactional produce awaits; tests may replace or clear it);
7. `telemetry`, the client-metrics subscriptions and what clients push (KIP-714,
   broker.telemetry; built first: a joining cluster node reads its subscriptions),
   then the cluster joins (ZooKeeper: registration, watches, roles; `features`, the
   finalized feature levels, follow ZooKeeper's `/feature`), and `dynamic`, the
   dynamic broker configs (broker.dynamic_config) over the cluster view's store, is
   read and applied: the log defaults (`replicas`), the replication throttles' rates
   and whatever else registered in `reconfigurables` (the server's TLS listeners)
   follow it from then on,
8. `authorizer`, when `authorizer.class.name` is set (its ACL store is the
   cluster view's: a local file or ZooKeeper),
9. the background duties Kafka runs on timers: retention
   (`log.retention.check.interval.ms`), idle producer ids
   (`producer.id.expiration.check.interval.ms`), the log cleaner (`log.cleaner.backoff.ms`),
   time-based flushes (each log's `flush.ms`, checked every second or every
   `log.flush.scheduler.interval.ms` if shorter), the recovery-point and log-start
   checkpoints, and the two coordinators' timers.

`metrics` and the purgatories (`produce_purgatory`, `fetch_purgatory`: delayed acks=all
produces and long-poll fetches, re-checked whenever a partition's log end or high
watermark moves) exist from construction; each component adds its scrape-time
collector to `metrics` as it is built. Each step of `start()` that needs undoing
pushes its undo as it succeeds; `stop()` runs them last-pushed first, so a start that
failed half-way (ZooKeeper unreachable, a port in use) is undone as far as it got.

Everything runs on one event loop; the duties are synchronous calls into the log
made between requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from broker.cluster.delayed_produce import wait_replicated
from broker.cluster.metadata_store import LocalMetadataStore
from broker.cluster.partition import Partition
from broker.cluster.producer_ids import ProducerIdBlocks
from broker.cluster.replica_manager import ReplicaManager, default_log_config
from broker.cluster.replica_metrics import replica_metrics
from broker.cluster.single_node import SingleNode
from broker.cluster.topic_admin import TopicAdmin, TopicError
from broker.cluster.view import ClusterView
from broker.config import BrokerConfig
from broker.dynamic_config import DynamicBrokerConfig, Reconfigurable
from broker.features import FinalizedFeatures, agree_in_zookeeper
from broker.groups.coordinator import GroupCoordinator
from broker.groups.group_config import GroupConfigs
from broker.groups.metrics import group_metrics
from broker.groups.storage import HostedPartition, PartitionOffsetsStore
from broker.log import LogConfig, LogManager
from broker.metrics import BrokerMetrics
from broker.protocol import ErrorCode
from broker.quotas.manager import QuotaManager
from broker.quotas.replication import ReplicationQuotas
from broker.quotas.store import LocalQuotaStore, ZkQuotaStore
from broker.sasl.credentials import LocalCredentialStore, ZkCredentialStore
from broker.security.authorizer import Authorizer, parse_super_users
from broker.server import coordinators
from broker.server.coordinators import LocalMarkers, TxnVerifier
from broker.server.purgatory import Purgatory, purgatory_metrics
from broker.share.manager import ShareConfig, ShareGroupManager
from broker.share.persister import SharePersister
from broker.share.state_store import ShareStateStore
from broker.tasks import cancel_and_wait
from broker.telemetry.manager import ClientMetricsManager
from broker.transactions.channel import BrokerChannels
from broker.transactions.coordinator import TransactionCoordinator
from common.topic_names import SHARE_GROUP_STATE

log = logging.getLogger(__name__)


class BrokerCore:
    """Owned by the BrokerServer; event-loop only, not thread-safe. The services are
    there once `start()` returned."""

    store: LocalMetadataStore
    logs: LogManager
    replicas: ReplicaManager
    replication_quotas: ReplicationQuotas
    cluster: ClusterView
    topic_admin: TopicAdmin
    producer_ids: ProducerIdBlocks
    scram: LocalCredentialStore | ZkCredentialStore
    client_quotas: LocalQuotaStore | ZkQuotaStore
    quotas: QuotaManager
    group_configs: GroupConfigs
    groups: GroupCoordinator
    share_states: ShareStateStore
    shares: ShareGroupManager
    markers: LocalMarkers
    transactions: TransactionCoordinator
    dynamic: DynamicBrokerConfig
    telemetry: ClientMetricsManager

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.broker_id = config.broker_id
        self.data_dir = config.data_dir
        self.bound_ports: dict[str, int] = {}  # listener name -> port bound (set by the server)
        self.metrics = BrokerMetrics()
        self.produce_purgatory = Purgatory("produce")
        self.fetch_purgatory = Purgatory("fetch")
        self.authorizer: Authorizer | None = None
        self.txn_verifier: TxnVerifier | None = None  # None: transactional writes unverified
        self.features = FinalizedFeatures.from_config(config)  # ApiVersions' feature levels
        # What follows dynamic broker configs; the server adds its TLS listeners.
        self.reconfigurables: list[Reconfigurable] = []
        self._channels: BrokerChannels | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._undo: list[tuple[str, Callable[[], Awaitable[None]]]] = []

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    def advertised(self, listener: str) -> tuple[str, int]:
        """Host and port published to clients of `listener`: its `advertised.listeners`
        entry, else the listener's own address (the port actually bound, when it
        listens on port 0)."""
        return self.config.listeners.advertised_address(listener, self.bound_ports.get(listener))

    def endpoints(self) -> dict[str, tuple[str, int]]:
        """Every listener's advertised address, by listener name."""
        return {lst.name: self.advertised(lst.name) for lst in self.config.listeners.listeners}

    async def start(self) -> None:
        config = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = LocalMetadataStore(self.data_dir)
        defaults = default_log_config(config)

        def stored_config(topic: str) -> LogConfig | None:
            meta = self.store.get(topic)
            return LogConfig.from_props(meta.configs, base=defaults) if meta else None

        self.logs = LogManager(self.data_dir, defaults, topic_config=stored_config)
        self._undo.append(("closing the logs", self._close_logs))
        self.replicas = ReplicaManager(
            config,
            self.store,
            self.logs,
            self._on_partition_change,
            on_leadership=self._leadership_changed,
            on_isr_change=self.metrics.isr_changed,
        )
        self.replication_quotas = ReplicationQuotas(config)
        self.cluster = self._cluster_view()
        self.replicas.cluster = self.cluster
        self.replicas.load()
        self.topic_admin = TopicAdmin(config, self.replicas)
        self.producer_ids = self.cluster.producer_ids
        self.scram = self.cluster.credentials
        self.client_quotas = self.cluster.client_quotas
        self.quotas = QuotaManager(
            self.client_quotas, config["quota.window.num"], config["quota.window.size.seconds"]
        )

        self.group_configs = GroupConfigs(config, self.cluster.group_configs)
        self.groups = coordinators.group_coordinator(
            config, self.replicas, self.produce_purgatory, self.group_configs.of
        )
        self.share_states = self._share_state_store()
        self.shares = ShareGroupManager(
            ShareConfig.from_broker_config(config),
            self.replicas.get_partition,
            self._topic_id_and_size,
            lambda group_id: self.groups.partition_for(group_id) in self.groups.owned,
            lambda topic, index: self.fetch_purgatory.check_and_complete((topic, index)),
            SharePersister(
                self.share_states,
                self.broker_id,
                lambda index: self.cluster.leader_of(SHARE_GROUP_STATE, index),
                lambda *call: self.channels().request(*call),
                self._ensure_share_state_topic,
            ),
            group_configs=self.group_configs.of,
            write_records=self.groups.write_records,
        )
        self.groups.share_groups_loaded = self.shares.load_groups
        self.groups.share_groups_unloaded = self.shares.unload_groups
        self._load_share_states()
        self.markers = LocalMarkers(self.replicas, self.produce_purgatory, self.groups)
        self.transactions = coordinators.transaction_coordinator(
            config, self.cluster, self.replicas, self.markers, self.channels, self.features
        )
        self.txn_verifier = coordinators.txn_verifier(
            self.transactions, self.cluster, self.channels
        )
        self._undo.append(("closing the transaction coordinator", self._close_transactions))
        coordinators.load_led_partitions(self.replicas, self.groups, self.transactions)

        self._undo.append(("stopping the background tasks", self._stop_tasks))
        self._undo.append(("leaving the cluster", self.cluster.stop))
        self.telemetry = ClientMetricsManager(
            self.cluster.client_metrics, config["telemetry.max.bytes"]
        )
        await self.cluster.start()
        await self.telemetry.start()
        await self.group_configs.start()
        zk = getattr(self.cluster, "zk", None)
        if zk is not None:  # a cluster: the levels all brokers follow (broker/features.py)
            await agree_in_zookeeper(zk, self.features)
        self.reconfigurables[:0] = [_LogDefaults(self.replicas), self.replication_quotas]
        self.dynamic = DynamicBrokerConfig(
            config, self.cluster.broker_configs, self.reconfigurables
        )
        await self.dynamic.start()
        if config["authorizer.class.name"]:
            acl_store, acls = await self.cluster.open_acl_store()
            self.authorizer = Authorizer(
                acl_store,
                acls,
                parse_super_users(config["super.users"]),
                config["allow.everyone.if.no.acl.found"],
            )
            self._undo.append(("closing the ACL store", acl_store.close))

        self._start_duties()
        self.metrics.add_collector(
            lambda: purgatory_metrics((self.produce_purgatory, self.fetch_purgatory))
        )
        self.metrics.add_collector(lambda: replica_metrics(self.replicas, self.data_dir))
        self.metrics.add_collector(self.cluster.collect_metrics)
        self.metrics.add_collector(self.quotas.collect)
        self.metrics.add_collector(self.replication_quotas.collect)
        self.metrics.add_collector(lambda: group_metrics(self.groups, self._high_watermark))
        self.metrics.add_collector(self.telemetry.collect)
        log.info(
            "broker %d ready: %d topic(s), %d partition(s) in %s",
            self.broker_id,
            len(self.store.topics()),
            len(self.replicas.partitions),
            self.data_dir,
        )

    def _cluster_view(self) -> ClusterView:
        """The one place that decides between a single node and a ZooKeeper cluster."""
        if self.config["zookeeper.connect"] is None:
            return SingleNode(
                self.broker_id,
                self.config["broker.rack"],
                self.data_dir,
                self.replicas,
                self.endpoints,
            )
        from broker.cluster.node import ClusterNode  # kazoo and its threads: cluster only

        return ClusterNode(
            self.config,
            self.store,
            self.replicas,
            self.metrics,
            self.endpoints,
            self.replication_quotas.follower,
        )

    def _leadership_changed(self, topic: str, index: int, leader: bool) -> None:
        """A partition led here or no longer: the coordinators load or unload theirs."""
        coordinators.leadership_changed(
            self.replicas, self.groups, self.transactions, topic, index, leader
        )
        self.shares.leadership_changed(topic, index, leader)
        if topic == SHARE_GROUP_STATE:
            if not leader:
                self.share_states.unload_partition(index)
            elif index not in self.share_states.owned:
                self.share_states.load_partition(index)

    def _share_state_store(self) -> ShareStateStore:
        timeout_s = self.config["share.coordinator.write.timeout.ms"] / 1000

        async def wait(partition: HostedPartition, end_offset: int) -> ErrorCode:
            return await wait_replicated(self.produce_purgatory, partition, end_offset, timeout_s)

        store = PartitionOffsetsStore(
            lambda i: self.replicas.get_partition(SHARE_GROUP_STATE, i), wait
        )
        return ShareStateStore(store, self.config["share.coordinator.state.topic.num.partitions"])

    def _ensure_share_state_topic(self) -> ErrorCode:
        """Create `__share_group_state` on first use, as `__consumer_offsets` is."""
        if self.replicas.topic(SHARE_GROUP_STATE) is not None:
            return ErrorCode.NONE
        cfg = self.config
        try:
            self.topic_admin.create_topic(
                SHARE_GROUP_STATE,
                cfg["share.coordinator.state.topic.num.partitions"],
                cfg["share.coordinator.state.topic.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(cfg["share.coordinator.state.topic.segment.bytes"]),
                    "min.insync.replicas": str(cfg["share.coordinator.state.topic.min.isr"]),
                    "compression.type": "producer",
                },
            )
        except TopicError as e:
            log.error("cannot create %s: %s", SHARE_GROUP_STATE, e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.replicas.topic(SHARE_GROUP_STATE) is None:  # a cluster creates it in the background
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._load_share_states()
        return ErrorCode.NONE

    def _load_share_states(self) -> None:
        """Load the `__share_group_state` partitions led here (at start, and once the
        topic was created on a single node)."""
        meta = self.replicas.topic(SHARE_GROUP_STATE)
        for index in range(meta.partitions if meta is not None else 0):
            partition = self.replicas.get_partition(SHARE_GROUP_STATE, index)
            if partition is not None and partition.is_leader:
                if index not in self.share_states.owned:
                    self.share_states.load_partition(index)

    def _topic_id_and_size(self, name: str) -> tuple[uuid.UUID, int] | None:
        meta = self.replicas.topic(name)
        return None if meta is None else (uuid.UUID(hex=meta.topic_id), meta.partitions)

    def channels(self) -> BrokerChannels:
        """Connections to the other brokers (the transaction coordinator's), opened on
        first use."""
        if self._channels is None:
            self._channels = self.cluster.open_channels()
        return self._channels

    def _start_duties(self) -> None:
        cfg = self.config
        flush_every = min(cfg["log.flush.scheduler.interval.ms"], 1000)
        duties: list[tuple[str, int, Callable[[], object]]] = [
            ("retention", cfg["log.retention.check.interval.ms"], self.logs.run_retention),
            (
                "producer-expiration",
                cfg["producer.id.expiration.check.interval.ms"],
                self.logs.remove_expired_producers,
            ),
            ("flush", flush_every, lambda: self.logs.flush_dirty(self.metrics.flush_time.observe)),
            (
                "recovery-checkpoint",
                cfg["log.flush.offset.checkpoint.interval.ms"],
                self.logs.checkpoint_recovery_points,
            ),
            (
                "log-start-checkpoint",
                cfg["log.flush.start.offset.checkpoint.interval.ms"],
                self.logs.checkpoint_log_starts,
            ),
        ]
        if cfg["log.cleaner.enable"]:
            duties.append(("cleaner", cfg["log.cleaner.backoff.ms"], self.logs.run_cleaner))
        for name, interval_ms, fn in duties:
            self._tasks.append(asyncio.create_task(self._every(name, interval_ms / 1000, fn)))
        self._tasks.append(asyncio.create_task(self.groups.run()))
        self._tasks.append(asyncio.create_task(self.shares.run()))
        self._tasks.append(asyncio.create_task(self.transactions.run(time.time)))

    async def _every(self, name: str, interval_s: float, fn: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                fn()
            except Exception:
                log.exception("background duty %s failed", name)

    def _on_partition_change(self, partition: Partition) -> None:
        self.produce_purgatory.check_and_complete(partition.key)
        self.fetch_purgatory.check_and_complete(partition.key)

    def _high_watermark(self, topic: str, index: int) -> int | None:
        partition = self.replicas.get_partition(topic, index)
        return None if partition is None else partition.high_watermark

    def complete_delayed(self) -> None:
        """Shutdown: answer every waiting produce and fetch with what is there now."""
        self.produce_purgatory.complete_all()
        self.fetch_purgatory.complete_all()

    async def controlled_shutdown(self) -> None:
        """Before the listener closes: hand leadership to other brokers (cluster mode)."""
        if self.config["controlled.shutdown.enable"]:
            await self.cluster.controlled_shutdown(
                self.config["controlled.shutdown.timeout.ms"] / 1000
            )

    async def stop(self) -> None:
        """Undo what `start()` did, last step first: close the ACL store, leave the
        cluster, stop the duties and the coordinators' timers, close the transaction
        coordinator and the channels to other brokers, flush and close the logs."""
        while self._undo:
            what, undo = self._undo.pop()
            try:
                await undo()
            except Exception:
                log.exception("%s failed", what)

    async def _stop_tasks(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()

    async def _close_transactions(self) -> None:
        await self.transactions.close()
        if self._channels is not None:
            self._channels.close()

    async def _close_logs(self) -> None:
        if self.logs.close():
            log.info("logs flushed and closed cleanly")


class _LogDefaults:
    """The topic defaults every partition inherits, as a dynamic config reconfigurable."""

    def __init__(self, replicas: ReplicaManager):
        self.replicas = replicas

    def validate(self, new: BrokerConfig) -> None:
        """Nothing more to check: the merged BrokerConfig checked every topic default."""

    def reconfigure(self) -> None:
        self.replicas.defaults_changed()

    def reload(self, new: BrokerConfig) -> None:
        """No file to re-read."""
