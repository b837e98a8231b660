"""ISR maintenance by partition leaders: shrink lagging followers, expand caught-up ones.

The leader decides, ZooKeeper commits. A follower has caught up at time t if its fetch
at t asked for the leader's log end offset (or for at least the log end the leader had
at that follower's previous fetch, which then is its caught-up time; see
`Partition.update_follower_leo`). Every `replica.lag.time.max.ms / 2` the leader
removes ISR followers not caught up for `replica.lag.time.max.ms`, and those a
reassignment no longer lists as replicas (checked at once too when a topic's
assignment changes: the leader may have taken one back before it learnt the new
assignment). A follower outside the ISR whose log end reaches the high watermark and
the start of the current leader epoch is added back (checked on each of its fetches),
unless that broker is in controlled shutdown or a reassignment is removing that
replica (so that the ISR the controller shrinks at the end of a move stays so;
broker.cluster.reassignment).

Each change is a compare-and-set of the partition state znode against the version the
leader last saw, with the leader and leader epoch unchanged. The leader applies the
new ISR only once the write succeeded; while an expansion is being written, the
follower counts as `joining` for the high watermark (broker.cluster.partition), so
every replica ZooKeeper may list holds every committed record: the controller may
elect any of them. On a version conflict (the controller moved leadership or
removed a dead follower) the state is re-read and handed to the cluster node like any
watch event, which also fences a deposed leader: its writes fail and it learns the new
leader. A write whose outcome is unknown (connection trouble) is settled the same
way, by re-reading until ZooKeeper answers; the follower stays `joining` meanwhile.
One write per partition at a time. Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.exceptions import BadVersionError, NoNodeError

from broker.cluster import zk
from broker.cluster.zk import PartitionState
from broker.tasks import cancel_and_wait

log = logging.getLogger(__name__)

REREAD_RETRY_S = 0.5


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class IsrManager:
    """Owned by the cluster node; event-loop only."""

    def __init__(self, node, config):
        self.node = node
        self.broker_id = config.broker_id
        self.lag_ms = config["replica.lag.time.max.ms"]
        self._pending: set[tuple[str, int]] = set()
        self._tasks: set[asyncio.Task] = set()
        self._timer: asyncio.Task | None = None

    def start(self) -> None:
        self._timer = asyncio.create_task(self._shrink_loop())

    async def stop(self) -> None:
        await cancel_and_wait([*self._tasks, self._timer])

    async def _shrink_loop(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, self.lag_ms / 2000))
            try:
                self.check_shrink(_now_ms())
            except Exception:
                log.exception("ISR shrink check failed")

    def check_shrink(self, now_ms: int) -> None:
        for partition in list(self.node.replicas.partitions.values()):
            if not partition.is_leader or partition.key in self._pending:
                continue
            lagging = partition.lagging_followers(now_ms, self.lag_ms)
            gone = partition.isr - set(partition.replicas) - {self.broker_id}
            if lagging or gone:
                new_isr = [r for r in partition.isr_list() if r not in lagging | gone]
                log.info(
                    "%s-%d: shrinking ISR %s -> %s (lagging %s, no longer replicas %s)",
                    *partition.key,
                    partition.isr_list(),
                    new_isr,
                    sorted(lagging),
                    sorted(gone),
                )
                self._submit(partition, new_isr)

    def maybe_expand(self, partition, replica_id: int) -> None:
        """A follower outside the ISR fetched; add it if it has caught up, unless it is
        in controlled shutdown (KIP-841): it still fetches until it stops, and put
        back in the ISR it would hold the high watermark until the leader shrinks
        the ISR after replica.lag.time.max.ms."""
        if partition.key in self._pending or not partition.is_leader:
            return
        if replica_id in self.node.leaving:
            return
        if replica_id in self.node.cache.removing(*partition.key):
            return  # a reassignment removes it (broker.cluster.reassignment)
        if replica_id in partition.isr or not partition.can_join_isr(replica_id):
            return
        new_isr = partition.isr_list() + [replica_id]
        log.info("%s-%d: expanding ISR %s -> %s", *partition.key, partition.isr_list(), new_isr)
        partition.joining = replica_id
        self._submit(partition, new_isr)

    def _submit(self, partition, new_isr: list[int]) -> None:
        self._pending.add(partition.key)
        task = asyncio.create_task(self._write(partition, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, partition, new_isr: list[int]) -> None:
        key = partition.key
        epoch = partition.leader_epoch
        state = PartitionState(
            self.broker_id, epoch, tuple(new_isr), self.node.controller_epoch, partition.zk_version
        )
        path = zk.state_path(*key)
        try:
            stat = await self.node.zk.call(
                "set", path, zk.encode_state(state), version=partition.zk_version
            )
        except BadVersionError:
            log.info("%s-%d: ISR update lost a race; re-reading the state", *key)
            partition.joining = None
            await self._reread(key)
            return
        except NoNodeError:
            partition.joining = None
            return
        except (TimeoutError, OSError, Exception) as e:  # connection trouble
            log.warning("%s-%d: ISR update failed: %s; re-reading the state", *key, e)
            await self._settle(partition, epoch, state.version)
            return
        finally:
            self._pending.discard(key)
        if partition.is_leader and partition.leader_epoch == epoch:
            self.node.on_state(key[0], key[1], state.replace(version=stat.version))

    async def _settle(self, partition, epoch: int, written_version: int) -> None:
        """After a write of unknown outcome: re-read the state until ZooKeeper answers,
        or the leadership moved. A newer version is applied as any state is (ending
        `joining`); the version written against means the write did not land."""
        while partition.is_leader and partition.leader_epoch == epoch:
            try:
                version = await self._reread(partition.key)
            except Exception as e:
                log.warning("%s-%d: re-reading the state failed: %s", *partition.key, e)
                await asyncio.sleep(REREAD_RETRY_S)
                continue
            if version is None or version == written_version:
                partition.joining = None
            return

    async def _reread(self, key: tuple[str, int]) -> int | None:
        """Hand the state znode to the cluster node; its version (None: no znode)."""
        try:
            data, stat = await self.node.zk.call("get", zk.state_path(*key))
        except NoNodeError:
            return None
        self.node.on_state(key[0], key[1], zk.decode_state(data, stat.version))
        return stat.version
