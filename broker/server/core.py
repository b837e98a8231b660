"""The broker's state behind the network shell: logs, topics, partitions, purgatories.

`BrokerCore` is what request handlers see as `ctx.core`. It owns:

- `store`: the local topic registry (`broker.cluster.metadata_store`),
- `logs`: the `LogManager` over the data directory,
- `replicas`: the `ReplicaManager` with every hosted `Partition`,
- `metrics`: the `BrokerMetrics` every part bumps and Prometheus scrapes,
- `produce_purgatory` / `fetch_purgatory`: delayed acks=all produces and long-poll
  fetches, re-checked whenever a partition's log end or high watermark moves,
- the background duties Kafka runs on timers: retention
  (`log.retention.check.interval.ms`), the log cleaner (`log.cleaner.backoff.ms`),
  time-based flushes (each log's `flush.ms`, checked every second or every
  `log.flush.scheduler.interval.ms` if shorter) and the recovery-point checkpoint
  (`log.flush.offset.checkpoint.interval.ms`).

Handler modules may keep their own long-lived state on the core from their
`setup(core)` hook (see `broker.server.dispatch`); `extensions` is the place for it
(e.g. `core.extensions["groups"] = GroupCoordinator(...)`).

Everything runs on one event loop; the duties are synchronous calls into the log
made between requests.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable

from broker.cluster.metadata_store import LocalMetadataStore
from broker.cluster.partition import Partition
from broker.cluster.replica_manager import ReplicaManager, default_log_config
from broker.config import BrokerConfig
from broker.log import LogConfig, LogManager
from broker.metrics import BrokerMetrics
from broker.security.acl_store import LocalAclStore
from broker.security.authorizer import Authorizer, parse_super_users
from broker.server.dispatch import load_handlers
from broker.server.purgatory import Purgatory
from broker.tasks import cancel_and_wait

log = logging.getLogger(__name__)


def new_authorizer(config: BrokerConfig, store, acls) -> Authorizer:
    return Authorizer(
        store,
        acls,
        parse_super_users(config["super.users"]),
        config["allow.everyone.if.no.acl.found"],
    )


class BrokerCore:
    """Owned by the BrokerServer; event-loop only, not thread-safe."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.broker_id = config.broker_id
        self.data_dir = config.data_dir
        self.extensions: dict[str, object] = {}
        self.bound_ports: dict[str, int] = {}  # listener name -> port bound (set by the server)
        self.produce_purgatory = Purgatory("produce")
        self.fetch_purgatory = Purgatory("fetch")
        self.store: LocalMetadataStore | None = None
        self.logs: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.cluster = None  # broker.cluster.node.ClusterNode when zookeeper.connect is set
        self.authorizer = None  # broker.security.authorizer.Authorizer when configured
        # KIP-890: `await txn_verifier(transactional_id, producer_id, producer_epoch,
        # [(topic, partition), ...]) -> {(topic, partition): ErrorCode}`, set by the
        # transaction coordinator; None: transactional produces append unverified.
        self.txn_verifier = None
        self._tasks: list[asyncio.Task] = []
        self._modules = load_handlers()
        self.metrics = BrokerMetrics(self)

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
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = LocalMetadataStore(self.data_dir)
        defaults = default_log_config(self.config)

        def stored_config(topic: str):
            meta = self.store.get(topic)
            return LogConfig.from_props(meta.configs, base=defaults) if meta else None

        self.logs = LogManager(self.data_dir, defaults, topic_config=stored_config)
        self.replicas = ReplicaManager(
            self.config, self.store, self.logs, self._on_partition_change
        )
        self.replicas.load()
        if self.config["authorizer.class.name"] and self.config["zookeeper.connect"] is None:
            store = LocalAclStore(self.data_dir)
            self.authorizer = new_authorizer(self.config, store, store.load())
        for module in self._modules:
            await _maybe_await(getattr(module, "setup", None), self)
        if self.config["zookeeper.connect"] is not None:
            from broker.cluster.node import ClusterNode

            self.cluster = ClusterNode(self)
            self.replicas.cluster = self.cluster
            await self.cluster.start()
            if self.config["authorizer.class.name"]:
                from broker.cluster.zk_acls import ZkAclStore

                store = ZkAclStore(self.cluster.zk)
                self.authorizer = new_authorizer(self.config, store, await store.load())
        cfg = self.config
        flush_every = min(cfg["log.flush.scheduler.interval.ms"], 1000)
        duties: list[tuple[str, int, Callable[[], object]]] = [
            ("retention", cfg["log.retention.check.interval.ms"], self.logs.run_retention),
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
        log.info(
            "broker %d ready: %d topic(s), %d partition(s) in %s",
            self.broker_id,
            len(self.store.topics()),
            len(self.replicas.partitions),
            self.data_dir,
        )

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

    def complete_delayed(self) -> None:
        """Shutdown: answer every waiting produce and fetch with what is there now."""
        self.produce_purgatory.complete_all()
        self.fetch_purgatory.complete_all()

    async def controlled_shutdown(self) -> None:
        """Before the listener closes: hand leadership to other brokers (cluster mode)."""
        if self.cluster is not None and self.config["controlled.shutdown.enable"]:
            await self.cluster.controlled_shutdown(
                self.config["controlled.shutdown.timeout.ms"] / 1000
            )

    async def stop(self) -> None:
        """Stop duties, let handler areas shut down, flush and close logs cleanly."""
        if self.authorizer is not None:
            await self.authorizer.store.close()
        if self.cluster is not None:
            await self.cluster.stop()
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        for module in reversed(self._modules):
            try:
                await _maybe_await(getattr(module, "teardown", None), self)
            except Exception:
                log.exception("teardown of %s failed", module.__name__)
        if self.logs is not None:
            if self.logs.close():
                log.info("logs flushed and closed cleanly")


async def _maybe_await(fn, *args) -> None:
    if fn is None:
        return
    result = fn(*args)
    if inspect.isawaitable(result):
        await result
