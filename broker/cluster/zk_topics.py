"""ZkTopics: a cluster member's topic administration in ZooKeeper.

Both directions of a topic's life in ZooKeeper, for the cluster node:

- Mirroring (watches; callbacks run on the event loop, see `zk.ZkSession`):
  `/brokers/topics` children -> for each new topic, its assignment and config are
  read, put in the metadata cache and given to the replica manager
  (`ReplicaManager.apply_topic`: the topic is stored locally and logs are created for
  the partitions this broker replicates); a data watch is set on every partition's
  state znode (its callback is the node's `on_state`). Topics that disappear are
  removed with their logs. Each `/config/topics/<t>` and `/brokers/topics/<t>` data
  -> changed config overrides, added partitions and changed replica lists (a
  reassignment, broker.cluster.reassignment: replicas created here, or deleted, with
  their fetchers stopped, `on_replicas_deleted`) are applied the same way, and the
  controller hears of them too (`on_topic_changed`), to give new partitions a state
  and to know the unclean-election flag. The partitions being moved (the znode's
  adding/removing replicas) go to the metadata cache.
- Writes (any broker writes, the controller acts): CreateTopics and auto-creation
  write a new topic's config and assignment; AlterConfigs and CreatePartitions write a
  known topic's (`write`, applied here at once, the other brokers follow from their
  watches); DeleteTopics asks the controller with `/admin/delete_topics/<t>`.

Owned by the cluster node; event-loop only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from broker.cluster import zk
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.metadata_store import TopicMeta
from broker.cluster.replica_manager import ReplicaManager, TopicError
from broker.cluster.zk import PartitionState, ZkSession
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ZkTopics:
    def __init__(
        self,
        session: ZkSession,
        cache: MetadataCache,
        replicas: ReplicaManager,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        on_state: Callable[[str, int, PartitionState], None],
        on_topic_gone: Callable[[str, int], None],
        on_topic_changed: Callable[[str], None],
        on_replicas_deleted: Callable[[list[tuple[str, int]]], None],
    ):
        self.zk = session
        self.cache = cache
        self.replicas = replicas
        self._spawn = spawn  # runs a coroutine as one of the node's tasks
        self._on_state = on_state
        self._on_topic_gone = on_topic_gone  # (topic, partitions): stop fetching them
        self._on_topic_changed = on_topic_changed  # a known topic's config or assignment
        self._on_replicas_deleted = on_replicas_deleted  # replicas moved off this broker
        self._stops: dict[str, list] = {}  # topic -> its watches' stop functions
        self._lock = asyncio.Lock()

    def watch(self) -> Callable[[], None]:
        """Start mirroring; returns the function that stops it."""
        stop = self.zk.watch_children(zk.TOPICS, self._topics_changed)

        def stop_all() -> None:
            stop()
            for stops in self._stops.values():
                for topic_stop in stops:
                    topic_stop()

        return stop_all

    # -- mirroring ------------------------------------------------------------------------

    def _topics_changed(self, children: list[str]) -> None:
        self._spawn(self._sync(set(children)))

    async def _sync(self, names: set[str]) -> None:
        async with self._lock:
            for name in sorted(set(self.replicas.topics()) - names):
                self._remove(name)
            for name in sorted(names - set(self.cache.topics)):
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
                self.cache.topics[name] = meta
                self.cache.record_moving(name, zk.decode_reassigning(data))
                self._apply(meta)
                # mypy infers no type for a lambda with default arguments (misc)
                self._stops[name] = [
                    self.zk.watch_data(
                        zk.config_path(name),
                        lambda data, _stat, t=name: self._config_changed(t, data),  # type: ignore[misc]
                    ),
                    self.zk.watch_data(
                        zk.topic_path(name),
                        lambda data, _stat, t=name: self._assignment_changed(t, data),  # type: ignore[misc]
                    ),
                ]
                self._watch_states(name, range(meta.partitions))

    def _watch_states(self, name: str, partitions: range) -> None:
        self._stops[name] += [
            self.zk.watch_data(
                zk.state_path(name, p),
                functools.partial(self._state_changed, name, p),
            )
            for p in partitions
        ]

    def _state_changed(self, topic: str, p: int, data, stat) -> None:
        if data is not None:
            self._on_state(topic, p, zk.decode_state(data, stat.version))

    def _config_changed(self, name: str, data: bytes | None) -> None:
        meta = self.cache.topics.get(name)
        if meta is None or data is None:
            return
        configs = zk.decode_config(data)
        if configs != meta.configs:
            self._changed(dataclasses.replace(meta, configs=configs))

    def _assignment_changed(self, name: str, data: bytes | None) -> None:
        meta = self.cache.topics.get(name)
        if meta is None or data is None:
            return
        assignments, _ = zk.decode_assignment(data)
        self.cache.record_moving(name, zk.decode_reassigning(data))
        if assignments != meta.assignments and len(assignments) >= meta.partitions:
            self._changed(
                dataclasses.replace(
                    meta,
                    partitions=len(assignments),
                    replication_factor=len(assignments[0]),
                    assignments=assignments,
                )
            )

    def _changed(self, meta: TopicMeta) -> None:
        """A known topic's new config or partitions, from a watch or our own write."""
        old = self.cache.topics[meta.name]
        self.cache.topics[meta.name] = meta
        self._apply(meta)
        self._watch_states(meta.name, range(old.partitions, meta.partitions))
        self._on_topic_changed(meta.name)

    def _apply(self, meta: TopicMeta) -> None:
        """Give the replica manager the topic; replicas it no longer hosts (moved to
        other brokers by a reassignment) were deleted: their fetchers stop. A replica
        it starts to host (a reassignment added it) takes the partition's state as
        last read: that state's watch may have fired before the topic's."""
        deleted = self.replicas.apply_topic(meta)
        if deleted:
            self._on_replicas_deleted(deleted)
        for index in range(meta.partitions):
            part = self.replicas.get_partition(meta.name, index)
            state = self.cache.states.get((meta.name, index))
            if part is not None and part.leader == -1 and state is not None:
                self._on_state(meta.name, index, state)

    def _remove(self, name: str) -> None:
        for stop in self._stops.pop(name, []):
            stop()
        meta = self.cache.topics.pop(name, None) or self.replicas.topic(name)
        partitions = meta.partitions if meta else 0
        self.cache.forget_topic(name, partitions)
        self._on_topic_gone(name, partitions)
        self.replicas.remove_topic(name)
        log.info("topic %s removed", name)

    # -- writes ---------------------------------------------------------------------------

    async def create(self, meta: TopicMeta) -> None:
        """Write a new topic's config and assignment (raises NodeExistsError). Refused
        while a deletion of the same name is pending, as Kafka refuses a topic "marked
        for deletion" (TopicError TOPIC_ALREADY_EXISTS): the controller removes the old
        topic's znodes first and the deletion request last."""
        if await self.zk.call("exists", f"{zk.DELETE_TOPICS}/{meta.name}") is not None:
            raise TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{meta.name}' is marked for deletion."
            )
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
            await self.create(meta)
        except NodeExistsError:
            raise TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{meta.name}' already exists."
            ) from None
        except (KazooException, TimeoutError) as e:
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {e!r}") from None
        log.info("created topic %s: %s", meta.name, meta.assignments)
        while timeout_s > 0 and not self.cache.serves(meta):
            if loop.time() >= deadline:
                raise TopicError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"Topic '{meta.name}' was created but its partitions have no leader yet.",
                )
            await asyncio.sleep(0.02)

    def submit_create(self, meta: TopicMeta) -> None:
        """Auto-creation: write the topic in the background."""
        self._spawn(self._create_quietly(meta))

    async def _create_quietly(self, meta: TopicMeta) -> None:
        try:
            await self.create(meta)
            log.info("created topic %s: %s", meta.name, meta.assignments)
        except NodeExistsError:
            pass
        except TopicError as e:
            log.info("not creating topic %s: %s", meta.name, e.message)
        except Exception as e:
            log.warning("creating topic %s failed: %s", meta.name, e)

    async def write(self, meta: TopicMeta) -> None:
        """Write a known topic's new config overrides and assignment (AlterConfigs,
        CreatePartitions) and apply them here at once; the other brokers follow from
        their watches. The assignment is written only if it still has the partition
        count this broker knew (compare-and-set), else TopicError."""
        old = self.cache.topics.get(meta.name)
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
            if zk.decode_reassigning(data):
                raise TopicError(
                    ErrorCode.REASSIGNMENT_IN_PROGRESS,
                    f"A partition reassignment is in progress for the topic '{meta.name}'.",
                )
            await self.zk.call(
                "set",
                zk.topic_path(meta.name),
                zk.encode_assignment(meta.assignments, meta.topic_id),
                version=stat.version,
            )
        if self.cache.topics.get(meta.name) is old:
            self._changed(meta)

    def submit_delete(self, name: str) -> None:
        self._spawn(self.delete(name))

    async def delete(self, name: str) -> None:
        try:
            await self.zk.call("create", f"{zk.DELETE_TOPICS}/{name}", b"", makepath=True)
        except NodeExistsError:
            pass
