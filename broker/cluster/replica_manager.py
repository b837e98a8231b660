"""Hosted partitions: their logs, their roles, and the local half of topic changes.

The ReplicaManager joins three things: the topic registry (`LocalMetadataStore`),
the partition logs (`LogManager`) and the `Partition` state objects, and wires every
partition's `on_change` to the purgatories so that an append or a high-watermark
move re-checks the delayed produce and fetch operations waiting on that partition.

Topic writes are checked by `topic_admin.TopicAdmin` and go through the cluster view
(broker.cluster.view): a single node applies them here at once (`create_local`,
`delete_local`, `alter_local`); a cluster writes them to ZooKeeper and every broker
applies them here from its watches (`apply_topic`, `remove_topic`). In a cluster the
partition states the controller writes make partitions lead or follow
(`become_leader_or_follower`, Kafka's becomeLeaderOrFollower).

Crash safety of topic changes: create = logs first, then the topic file (the commit
point); delete = topic file first, then the logs; added partitions likewise. `load()`
removes partition logs whose topic has no file, the leftovers of an interrupted
create or delete.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.cluster.metadata_store import LocalMetadataStore, TopicMeta
from broker.cluster.partition import Partition
from broker.cluster.view import ClusterView
from broker.config import BrokerConfig
from broker.log.config import TOPIC_CONFIG_NAMES, LogConfig
from broker.protocol.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from broker.cluster.replica_fetcher import ReplicaFetcherManager
    from broker.cluster.zk import PartitionState

log = logging.getLogger(__name__)


def default_log_config(config: BrokerConfig) -> LogConfig:
    """Topic defaults from the broker's `log.*` keys (their Kafka synonyms), and the
    broker's producer.id.expiration.ms."""
    props = config.topic_defaults()
    topic = LogConfig.from_props({k: v for k, v in props.items() if k in TOPIC_CONFIG_NAMES})
    return dataclasses.replace(topic, producer_id_expiration_ms=config["producer.id.expiration.ms"])


class TopicError(ApiError):
    """A topic operation fails with `code`; `message` (None when empty) goes to the
    client's error_message field."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(code, message)
        self.message = message or None


class ReplicaManager:
    """Owns every Partition on this broker. Event-loop only; not thread-safe.

    `cluster` is set by the composition root before `load()`. When it
    `elects_leaders` (a ZooKeeper cluster), topics live in ZooKeeper and the local
    store mirrors them, logs exist only for the partitions this broker replicates,
    and roles come from state znodes."""

    cluster: ClusterView

    def __init__(
        self,
        config: BrokerConfig,
        store: LocalMetadataStore,
        log_manager,
        on_partition_change: Callable[[Partition], None] | None = None,
        on_leadership: Callable[[str, int, bool], None] = lambda topic, index, leader: None,
        on_isr_change: Callable[[int, int], None] = lambda before, after: None,
    ):
        self.config = config
        self.broker_id = config.broker_id
        self.store = store
        self.logs = log_manager
        self.on_partition_change = on_partition_change
        self.on_leadership = on_leadership  # (topic, index, leader): roles changed
        self.on_isr_change = on_isr_change  # (size before, size after) of a led ISR
        self.default_log_config = default_log_config(config)
        self.partitions: dict[tuple[str, int], Partition] = {}

    def load(self) -> None:
        """Attach the partitions of every stored topic; drop orphan logs."""
        topics = self.store.topics()
        for plog in list(self.logs.all_logs()):
            meta = topics.get(plog.topic)
            if meta is None or plog.partition >= meta.partitions:
                log.warning("deleting orphan log %s-%d", plog.topic, plog.partition)
                self.logs.delete(plog.topic, plog.partition)
        for meta in topics.values():
            cfg = self.log_config(meta.configs)
            for index in range(meta.partitions):
                if not self._hosts(meta, index):
                    continue
                plog = self.logs.get(meta.name, index) or self.logs.create(meta.name, index, cfg)
                self._attach(meta, index, plog, cfg)

    def _hosts(self, meta: TopicMeta, index: int) -> bool:
        return not self.cluster.elects_leaders or self.broker_id in meta.assignments[index]

    def _attach(self, meta: TopicMeta, index: int, plog, cfg: LogConfig) -> Partition:
        partition = Partition(
            meta.name,
            index,
            plog,
            self.broker_id,
            meta.assignments[index],
            min_insync_replicas=cfg.min_insync_replicas,
            on_change=self.on_partition_change,
        )
        if self.cluster.elects_leaders:  # no role until the controller gives it one
            partition.leader = -1
            partition.isr = set()
            partition.high_watermark = plog.log_start_offset
        self.partitions[partition.key] = partition
        return partition

    # -- topics as ZooKeeper has them (a cluster) ---------------------------------------

    def apply_topic(self, meta: TopicMeta) -> list[tuple[str, int]]:
        """Mirror a topic read from ZooKeeper; create logs for the hosted partitions
        and give the existing ones their current config and replica list. A partition
        this broker no longer replicates (a reassignment moved it away) is deleted, as
        Kafka's StopReplica with delete does: returns those, whose fetchers must stop."""
        known = self.store.get(meta.name)
        if known is None or (known.assignments, known.configs, known.topic_id) != (
            meta.assignments,
            meta.configs,
            meta.topic_id,
        ):
            if known is not None and known.topic_id != meta.topic_id:
                self.remove_topic(meta.name)  # deleted and re-created while we were away
            self.store.put(meta)
        cfg = self.log_config(meta.configs)
        if known is not None and known.configs != meta.configs:
            self._reconfigure(meta, cfg)
        deleted = []
        for index in range(meta.partitions):
            part = self.partitions.get((meta.name, index))
            if part is not None and not self._hosts(meta, index):
                self._delete_replica(part)
                deleted.append(part.key)
            elif part is not None:
                part.replicas = list(meta.assignments[index])
            elif self._hosts(meta, index):
                plog = self.logs.get(meta.name, index) or self.logs.create(meta.name, index, cfg)
                self._attach(meta, index, plog, cfg)
        return deleted

    def _delete_replica(self, part: Partition) -> None:
        was_leader = part.is_leader
        part.become_follower(-1, part.leader_epoch, (), part.zk_version)
        if was_leader:
            self.on_leadership(part.topic, part.index, False)
        del self.partitions[part.key]
        self.logs.delete(part.topic, part.index)
        log.info("%s-%d: replica moved to other brokers, deleted", part.topic, part.index)

    def remove_topic(self, name: str) -> None:
        """A topic gone from ZooKeeper: drop it and its local logs."""
        meta = self.store.get(name)
        self.store.delete(name)
        for index in range(meta.partitions if meta else 0):
            self.partitions.pop((name, index), None)
            if self.logs.get(name, index) is not None:
                self.logs.delete(name, index)

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_props(overrides, base=self.default_log_config)

    def _reconfigure(self, meta: TopicMeta, cfg: LogConfig, quiet: bool = False) -> None:
        for index in range(meta.partitions):
            part = self.partitions.get((meta.name, index))
            if part is not None:
                part.log.update_config(cfg)
                part.min_insync_replicas = cfg.min_insync_replicas
        if not quiet:
            log.info("topic %s config overrides: %s", meta.name, meta.configs or "none")

    def defaults_changed(self) -> None:
        """The broker's topic defaults changed (dynamic broker configs): every hosted
        partition takes them for the configs its topic does not override, as Kafka's
        DynamicLogConfig updates every log."""
        defaults = default_log_config(self.config)
        if defaults == self.default_log_config:
            return
        self.default_log_config = defaults
        self.logs.default_config = defaults
        for meta in self.store.topics().values():
            self._reconfigure(meta, self.log_config(meta.configs), quiet=True)
        log.info("topic defaults changed: %s", defaults)

    # -- role changes (a cluster: the partition states the controller writes) -----------

    def become_leader_or_follower(
        self, part: Partition, state: PartitionState, fetchers: ReplicaFetcherManager
    ) -> None:
        """Make `part` what `state` says (Kafka's becomeLeaderOrFollower): lead it
        (its fetcher stops, the coordinators load it), take its new ISR, or follow
        `state.leader` (waiting produces fail, the coordinators unload it, the
        leader's fetcher takes it over, truncating first)."""
        topic, index = part.key
        if state.leader == self.broker_id:
            if not part.is_leader or state.leader_epoch != part.leader_epoch:
                fetchers.remove(part.key)
                part.become_leader(state.leader_epoch, state.isr, state.version, _now_ms())
                log.info("%s-%d: leader in epoch %d", topic, index, state.leader_epoch)
                self.on_leadership(topic, index, True)
            else:
                self.on_isr_change(len(part.isr), len(state.isr))
                part.update_isr(state.isr, state.version)
            return
        changed = part.leader != state.leader or part.leader_epoch != state.leader_epoch
        was_leader = part.is_leader
        part.become_follower(state.leader, state.leader_epoch, state.isr, state.version)
        if was_leader:
            self.on_leadership(topic, index, False)
        if changed or was_leader:
            fetchers.remove(part.key)
            if state.leader >= 0:
                fetchers.add(part, state.leader)
            log.info(
                "%s-%d: follower of %d in epoch %d", topic, index, state.leader, state.leader_epoch
            )

    def step_down(self, part: Partition) -> None:
        """Stop leading `part` without a new leader known (session lost, fenced)."""
        part.become_follower(-1, part.leader_epoch, part.isr_list(), part.zk_version)
        self.on_leadership(part.topic, part.index, False)

    def step_down_everywhere(self, fetchers: ReplicaFetcherManager) -> None:
        """Fenced from ZooKeeper: lead nothing, follow nothing (leader unknown)."""
        for p in self.partitions.values():
            if p.is_leader:
                log.info("%s-%d: fenced, no longer leader in epoch %d", *p.key, p.leader_epoch)
                self.step_down(p)
            else:
                p.become_follower(-1, p.leader_epoch, p.isr_list(), p.zk_version)
        fetchers.remove_all()

    # -- lookups -------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic(self, name: str) -> TopicMeta | None:
        return self.store.get(name)

    def missing_partition_error(self, topic: str, index: int) -> ErrorCode:
        """The error for a partition this broker does not host, as Kafka's
        ReplicaManager.getPartitionOrError: NOT_LEADER_OR_FOLLOWER when the metadata
        knows it (the client refreshes and goes to its leader), else
        UNKNOWN_TOPIC_OR_PARTITION."""
        meta = self.store.get(topic)
        if meta is not None and 0 <= index < meta.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def topics(self) -> dict[str, TopicMeta]:
        return self.store.topics()

    def effective_configs(self, meta: TopicMeta) -> tuple[dict[str, str], LogConfig]:
        cfg = self.log_config(meta.configs)
        return cfg.to_props(), cfg

    # -- topic lifecycle -------------------------------------------------------------

    def create_local(self, meta: TopicMeta) -> None:
        """Create a planned topic here, now (a single node's topic write)."""
        name, partitions, overrides = meta.name, meta.partitions, meta.configs
        cfg = self.log_config(overrides)
        logs = []
        try:
            self.logs.reserve_files(partitions)
            for index in range(partitions):
                plog = self.logs.get(name, index)
                if plog is not None:  # an orphan left by a crash mid-create: start clean
                    self.logs.delete(name, index)
                logs.append(self.logs.create(name, index, cfg, sync_dir=False))
            self.logs.sync_data_dir()  # once for all of them, before the topic exists
            self.store.put(meta)
        except OSError as e:  # no file descriptor or no space left: undo, refuse
            for plog in logs:
                self.logs.delete(name, plog.partition)
            log.error("cannot create topic %s: %s", name, e)
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create it: {e}") from None
        for index, plog in enumerate(logs):
            self._attach(meta, index, plog, cfg)
        log.info("created topic %s with %d partition(s)", name, partitions)

    def delete_local(self, name: str) -> None:
        """Delete a topic here, now (a single node's topic write)."""
        meta = self.store.get(name)
        assert meta is not None, f"deleting unknown topic {name}"
        self.store.delete(name)
        for index in range(meta.partitions):
            self.partitions.pop((name, index), None)
            self.logs.delete(name, index)
        log.info("deleted topic %s", name)

    def alter_local(self, meta: TopicMeta) -> None:
        """Apply a topic's new state here, now (a single node's topic write)."""
        old = self.store.get(meta.name)
        if old is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        cfg = self.log_config(meta.configs)
        logs = []
        try:
            self.logs.reserve_files(meta.partitions - old.partitions)
            for index in range(old.partitions, meta.partitions):
                logs.append(self.logs.create(meta.name, index, cfg, sync_dir=False))
            self.logs.sync_data_dir()
            self.store.put(meta)
        except OSError as e:
            for plog in logs:
                self.logs.delete(meta.name, plog.partition)
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot add partitions: {e}") from None
        self._reconfigure(meta, cfg)
        for plog in logs:
            self._attach(meta, plog.partition, plog, cfg)
        if logs:
            log.info("topic %s now has %d partitions", meta.name, meta.partitions)

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords on a partition this broker leads: its log starts at `offset`
        (-1: the high watermark). Returns the new log start (the low watermark);
        followers follow on their next fetch. Raises ApiError as Kafka answers."""
        part = self.partitions.get((topic, index))
        meta = self.store.get(topic)
        if part is None:
            if meta is not None and 0 <= index < meta.partitions:
                raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if part.delete_records_before(offset):
            self.logs.checkpoint_log_starts()
            log.info("%s-%d: records before %d deleted", topic, index, offset)
        return part.log.log_start_offset


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
