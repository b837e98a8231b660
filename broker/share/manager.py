"""The broker's share-group service (KIP-932): the share groups it coordinates and
the share-partitions of the data partitions it leads.

Group side (on the group's coordinator, the leader of its `__consumer_offsets`
partition): `heartbeat`, `describe`, `list_groups`, `delete_group` (with the durable
state of the group's share-partitions; the offsets admin APIs are broker.share.admin's);
members time out after the group's `share.session.timeout.ms` (else
`group.share.session.timeout.ms`) without a heartbeat. A group's changes are written
to its `__consumer_offsets` partition in Kafka's share group records
(broker.share.records) before they are answered (a member timed out: in the
background); the coordinator that takes the partition over rebuilds the groups from
them (`load_groups`): their epochs, members (who go on heartbeating with their epochs,
under a new session timeout) and the share-partitions whose durable state they have.

Partition side (on each data partition's leader): a share-partition per (group,
topic, partition), loaded (`load`) on the first ShareFetch that names it from its
durable state (broker.share.persister, the share coordinator), or started at the
group's `share.auto.offset.reset` when it has none (a dynamic group config,
broker.groups.group_config: the high watermark by default, the log start with
earliest) and that start written; `acquire` reads the log from the share-partition's
next available offset and locks what it hands out for the group's
`share.record.lock.duration.ms` (else `group.share.record.lock.duration.ms`);
`acknowledge` settles records, and `persist` writes the share-partition's state
before the acknowledgement is answered;
`release_member` frees what a closed share session held. A share-partition is
dropped from memory when the leadership of its data partition moves away (the new
leader loads it), when its group's last share session here ends, and when the
coordinator gave it a new state (a write fenced by the state epoch). Records acquired but not yet acknowledged or released when a
leader fails come back AVAILABLE with the delivery count last written.

The share sessions (broker.share.sessions) are kept here too. `tick` (the core's
timer, every 100 ms) expires members, locks and idle sessions; `on_released(topic,
partition)` is called when records became available again, so that waiting
ShareFetches re-check.

Event-loop only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable

from broker.cluster.partition import Partition
from broker.config import BrokerConfig
from broker.groups.group_config import EARLIEST_TIMESTAMP, GroupConfig
from broker.log.common import OffsetOutOfRangeError
from broker.protocol import ErrorCode
from broker.share import records
from broker.share.membership import HeartbeatResult, ShareGroup
from broker.share.partition_state import Acquired, LogBatch, SharePartitionState
from broker.share.persister import SharePersister
from broker.share.sessions import ShareSession, ShareSessionCache

log = logging.getLogger(__name__)

ShareKey = tuple[str, str, int]  # (group id, topic, partition)


@dataclasses.dataclass(frozen=True, slots=True)
class ShareConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_size: int = 200
    max_share_sessions: int = 2000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ShareConfig:
        return cls(
            heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
            session_timeout_ms=config["group.share.session.timeout.ms"],
            record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            delivery_count_limit=config["group.share.delivery.count.limit"],
            partition_max_record_locks=config["group.share.partition.max.record.locks"],
            max_size=config["group.share.max.size"],
            max_share_sessions=config["group.share.max.share.sessions"],
        )


@dataclasses.dataclass(slots=True)
class Fetched:
    """One partition's answer to an acquisition: the batches holding the acquired
    records (whole, as the log has them) and the acquired runs."""

    records: bytes
    acquired: list[Acquired]


@dataclasses.dataclass(frozen=True, slots=True)
class GroupListing:
    """What `logflume groups` and ListGroups show of a share group."""

    group_id: str
    state: str
    members: int


class ShareGroupManager:
    def __init__(
        self,
        config: ShareConfig,
        partition_of: Callable[[str, int], Partition | None],
        topic_lookup: Callable[[str], tuple[uuid.UUID, int] | None],
        coordinates: Callable[[str], bool],
        on_released: Callable[[str, int], object],
        persister: SharePersister | None,
        group_configs: Callable[[str], GroupConfig] | None = None,
        write_records: Callable[[str, list[records.Record]], Awaitable[ErrorCode]] | None = None,
    ) -> None:
        """`partition_of(topic, index)`: the hosted `broker.cluster.partition.Partition`
        or None; `topic_lookup(name)`: (topic id, partition count) or None;
        `coordinates(group_id)`: whether this broker is the group's coordinator;
        `persister`: the durable state (None: in memory only, for tests);
        `group_configs(group id)`: a group's dynamic configs (None: `config`'s);
        `write_records(group id, records)`: appends to the group's `__consumer_offsets`
        partition (None: groups in memory only, for tests)."""
        self.config = config
        default = GroupConfig(
            share_session_timeout_ms=config.session_timeout_ms,
            share_heartbeat_interval_ms=config.heartbeat_interval_ms,
            share_record_lock_duration_ms=config.record_lock_duration_ms,
        )
        self.group_config = group_configs or (lambda _group_id: default)
        self._partition_of = partition_of
        self.topic_lookup = topic_lookup
        self.coordinates = coordinates
        self.on_released = on_released
        self.persister = persister
        self.write_records = write_records
        self._loading: dict[ShareKey, asyncio.Future[ErrorCode]] = {}
        self._writing: dict[ShareKey, asyncio.Lock] = {}
        self._background: set[asyncio.Task[ErrorCode | None]] = set()
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[ShareKey, SharePartitionState] = {}
        self.sessions = ShareSessionCache(config.max_share_sessions)

    # -- group side ----------------------------------------------------------------

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty")
        if not self.coordinates(group_id):
            return HeartbeatResult(ErrorCode.NOT_COORDINATOR)
        group = self.groups.get(group_id)
        before = self.snapshot(group_id)
        if group is None:
            if member_epoch != 0:
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"share group {group_id} has no members"
                )
            group = self.groups[group_id] = ShareGroup(group_id)
        if (
            member_epoch == 0
            and member_id not in group.members
            and len(group.members) >= self.config.max_size
        ):
            return HeartbeatResult(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"share group {group_id} has {self.config.max_size} members already",
            )
        result = group.heartbeat(
            member_id,
            member_epoch,
            rack_id,
            topics,
            client_id,
            client_host,
            self.topic_lookup,
            self.group_config(group_id).share_session_timeout_ms,
            now_ms,
        )
        if not before and not group.members and self.groups.get(group_id) is group:
            del self.groups[group_id]  # a first heartbeat refused: no group
        code = await self.save(group_id, before)
        if code != ErrorCode.NONE and result.error == ErrorCode.NONE:
            return HeartbeatResult(code, f"the share group's records were not written: {code.name}")
        return result

    # -- the group records ----------------------------------------------------------

    def snapshot(self, group_id: str) -> records.Snapshot:
        """The group's records as they are now, for `save` after a change."""
        return records.snapshot(self.groups.get(group_id), self.topic_lookup)

    async def save(self, group_id: str, before: records.Snapshot) -> ErrorCode:
        """Write the records that take the group from `before` to what it is now."""
        changed = records.changes(before, self.snapshot(group_id))
        if not changed or self.write_records is None:
            return ErrorCode.NONE
        return await self.write_records(group_id, changed)

    def save_later(self, group_id: str, before: records.Snapshot) -> None:
        """`save` in the background (a change nobody waits for: a member timed out)."""
        if self.write_records is None:
            return
        task = asyncio.get_running_loop().create_task(self.save(group_id, before))
        self._background.add(task)
        task.add_done_callback(self._log_failed_save(group_id))

    def _log_failed_save(self, group_id: str) -> Callable[[asyncio.Task], None]:
        def done(task: asyncio.Task) -> None:
            self._background.discard(task)
            if not task.cancelled() and task.exception() is None and task.result():
                log.warning("share group %s: records not written: %s", group_id, task.result())

        return done

    def load_groups(self, loaded: Iterable[records.ShareRecord], now_ms: int) -> None:
        """The share groups of a `__consumer_offsets` partition now coordinated here,
        from its records; members get a new session timeout from now."""
        groups = records.rebuild(loaded, self.topic_lookup, now_ms)
        for group in groups.values():
            timeout_ms = self.group_config(group.group_id).share_session_timeout_ms
            for member in group.members.values():
                member.deadline_ms = now_ms + timeout_ms
        self.groups.update(groups)
        if groups:
            log.info("share groups loaded: %s", ", ".join(sorted(groups)))

    def unload_groups(self) -> None:
        """Forget the share groups no longer coordinated here (their partition moved)."""
        for group_id in [g for g in self.groups if not self.coordinates(g)]:
            del self.groups[group_id]

    def describe(self, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
        if not self.coordinates(group_id):
            return ErrorCode.NOT_COORDINATOR, None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        return ErrorCode.NONE, group

    def list_groups(self) -> list[GroupListing]:
        """The share groups coordinated here, for ListGroups (type "share") and
        `logflume groups`."""
        return [
            GroupListing(g.group_id, g.state, len(g.members))
            for g in self.groups.values()
            if self.coordinates(g.group_id)
        ]

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: only an empty one (NON_EMPTY_GROUP). The
        durable state of its share-partitions is deleted first (DeleteShareGroupState),
        so that a group created again under its id starts afresh; its share-partitions
        led here go from memory."""
        code, group = self.describe(group_id)
        if group is None:
            return code
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        code = await self.delete_state(group_id, group.initialized)
        if code != ErrorCode.NONE:
            return code
        if group.members:  # joined while the state was deleted
            return ErrorCode.NON_EMPTY_GROUP
        before = self.snapshot(group_id)
        if self.groups.get(group_id) is group:
            del self.groups[group_id]
        return await self.save(group_id, before)

    async def delete_state(self, group_id: str, topics: dict[str, set[int]]) -> ErrorCode:
        """Delete the durable state of `topics`' share-partitions of the group (those of
        topics that no longer exist are gone with them) and drop them from memory; the
        first error, or NONE."""
        keys = []
        for topic, partitions in topics.items():
            found = self.topic_lookup(topic)
            if found is not None:
                keys += [(topic, found[0], index) for index in sorted(partitions)]
        codes: list[ErrorCode] = []
        if self.persister is not None:
            persister = self.persister
            codes = await asyncio.gather(
                *(persister.delete(group_id, topic_id, index) for _, topic_id, index in keys)
            )
        for topic in topics:
            self.unload(group_id, topic)
        return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)

    def unload(self, group_id: str, topic: str | None = None) -> None:
        """Drop the group's share-partitions (of `topic`, or all) from memory: the next
        ShareFetch loads them from their durable state, as it is after an
        AlterShareGroupOffsets or a deletion."""
        for key in [k for k in self.partitions if k[0] == group_id and topic in (None, k[1])]:
            del self.partitions[key]
            self._writing.pop(key, None)

    # -- partition side ---------------------------------------------------------------

    def partition_of(self, topic: str, index: int) -> Partition | None:
        return self._partition_of(topic, index)

    def share_partition(self, group_id: str, topic: str, index: int) -> SharePartitionState | None:
        """The loaded share-partition; None when it is not loaded or the data partition
        is not led here."""
        partition = self._partition_of(topic, index)
        if partition is None or not partition.is_leader:
            return None
        state = self.partitions.get((group_id, topic, index))
        if state is not None:
            state.move_start(partition.log_start_offset)
        return state

    async def load(self, group_id: str, topic: str, index: int) -> ErrorCode:
        """Make the share-partition ready here: read its durable state, or start it at
        the high watermark and write that start. Concurrent loads share one read."""
        key = (group_id, topic, index)
        if key in self.partitions:
            return ErrorCode.NONE
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            code = await self._load(key)
        except Exception:
            log.exception("share-partition %s not loaded", key)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        finally:
            del self._loading[key]
        future.set_result(code)
        return code

    async def _load(self, key: ShareKey) -> ErrorCode:
        group_id, topic, index = key
        partition = self._partition_of(topic, index)
        found = self.topic_lookup(topic)
        if partition is None or found is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        epoch = partition.leader_epoch
        cfg = self.config
        start = self._initial_offset(group_id, partition)
        state = SharePartitionState(
            start,
            self.group_config(group_id).share_record_lock_duration_ms,
            cfg.delivery_count_limit,
            cfg.partition_max_record_locks,
        )
        if self.persister is not None:
            code, stored = await self.persister.read(group_id, found[0], index, epoch)
            if code != ErrorCode.NONE or stored is None:
                return code
            if stored.start_offset >= 0:
                state.restore(stored.start_offset, stored.batches)
                state.state_epoch = stored.state_epoch
            else:
                state.start = state.end = start
                code = await self.persister.write(
                    group_id, found[0], index, 0, epoch, state.start, []
                )
                if code != ErrorCode.NONE:
                    return code
        if not partition.is_leader or partition.leader_epoch != epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        self.partitions[key] = state
        state.move_start(partition.log_start_offset)
        return ErrorCode.NONE

    def _initial_offset(self, group_id: str, partition: Partition) -> int:
        """Where a share-partition without state starts, by the group's
        `share.auto.offset.reset`: the log start (earliest), the first record at or
        after now minus a duration (by_duration; none: as latest) or the high
        watermark (latest)."""
        ts = self.group_config(group_id).reset_timestamp(int(time.time() * 1000))
        if ts == EARLIEST_TIMESTAMP:
            return partition.log_start_offset
        if ts >= 0:
            hit = partition.log.offset_for_timestamp(ts)
            if hit is not None and hit[0] < partition.high_watermark:
                return max(hit[0], partition.log_start_offset)
        return partition.high_watermark

    async def persist(self, group_id: str, topic: str, index: int) -> ErrorCode:
        """Write the share-partition's state as it is now (one write at a time per
        share-partition: a later one carries what an earlier one would have)."""
        key = (group_id, topic, index)
        lock = self._writing.setdefault(key, asyncio.Lock())
        async with lock:
            state = self.partitions.get(key)
            partition = self._partition_of(topic, index)
            found = self.topic_lookup(topic)
            if state is None or partition is None or found is None or not partition.is_leader:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self.persister is None:
                return ErrorCode.NONE
            start, runs = state.snapshot()
            code = await self.persister.write(
                group_id, found[0], index, state.state_epoch, partition.leader_epoch, start, runs
            )
            if code == ErrorCode.FENCED_STATE_EPOCH and self.partitions.get(key) is state:
                # AlterShareGroupOffsets gave the share-partition a new state: load it again
                del self.partitions[key]
            return code

    def persist_later(self, group_id: str, topic: str, index: int) -> None:
        """`persist` in the background (records released by a timer, not answered to
        anyone)."""
        task = asyncio.get_running_loop().create_task(self.persist(group_id, topic, index))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def acquire(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        index: int,
        max_records: int,
        max_bytes: int,
        now_ms: int,
    ) -> Fetched:
        state = self.share_partition(group_id, topic, index)
        partition = self._partition_of(topic, index)
        if state is None or partition is None or max_records <= 0:
            return Fetched(b"", [])
        state.lock_duration_ms = self.group_config(group_id).share_record_lock_duration_ms
        offset = state.next_fetch_offset()
        if offset is None or offset >= partition.high_watermark:
            return Fetched(b"", [])
        try:
            batches = partition.log.read_batches(
                offset, max(max_bytes, 1), max_offset=partition.high_watermark
            )
        except OffsetOutOfRangeError:
            return Fetched(b"", [])
        runs = state.acquire(
            member_id,
            [LogBatch(b.base_offset, b.last_offset, b.is_control) for b in batches],
            max_records,
            now_ms,
        )
        if not runs:
            return Fetched(b"", [])
        data = b"".join(
            bytes(b.raw())
            for b in batches
            if not b.is_control
            and any(
                r.first_offset <= b.last_offset and r.last_offset >= b.base_offset for r in runs
            )
        )
        return Fetched(data, runs)

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        index: int,
        batches: list[dict],
    ) -> ErrorCode:
        """Apply a partition's acknowledgement batches (first_offset, last_offset,
        acknowledge_types), in order; the first error stops them."""
        partition = self._partition_of(topic, index)
        if partition is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        state = self.partitions.get((group_id, topic, index))
        if state is None:
            return ErrorCode.INVALID_RECORD_STATE
        for batch in batches:
            code = state.acknowledge(
                member_id, batch["first_offset"], batch["last_offset"], batch["acknowledge_types"]
            )
            if code != ErrorCode.NONE:
                return code
        self.on_released(topic, index)
        return ErrorCode.NONE

    def release_session(self, session: ShareSession) -> None:
        """A share session ended: the records its member holds in its partitions are
        released. When it was the group's last session here, the group's
        share-partitions are written and dropped from memory (as Kafka's share-partition
        leader does when a group goes empty): an AlterShareGroupOffsets or a deletion
        made while the group is empty is what the next ShareFetch loads."""
        for topic, index in session.partitions:
            state = self.partitions.get((session.group_id, topic, index))
            if state is not None and state.release_member(session.member_id):
                self.on_released(topic, index)
                self.persist_later(session.group_id, topic, index)
        if not self._has_sessions(session.group_id):
            task = asyncio.get_running_loop().create_task(self._unload_idle(session.group_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _has_sessions(self, group_id: str) -> bool:
        return any(g == group_id for g, _ in self.sessions.sessions)

    async def _unload_idle(self, group_id: str) -> ErrorCode:
        """Write the group's share-partitions, then drop those written (one that could
        not be written stays, with what only memory holds) unless a session opened."""
        keys = [k for k in self.partitions if k[0] == group_id]
        codes = await asyncio.gather(*(self.persist(*key) for key in keys))
        if not self._has_sessions(group_id):
            for key, code in zip(keys, codes, strict=True):
                if code in (ErrorCode.NONE, ErrorCode.FENCED_STATE_EPOCH):
                    self.partitions.pop(key, None)
        return ErrorCode.NONE

    def leadership_changed(self, topic: str, index: int, leader: bool) -> None:
        """The share-partitions of a data partition no longer led here are dropped."""
        if not leader:
            for key in [k for k in self.partitions if k[1:] == (topic, index)]:
                del self.partitions[key]
                self._writing.pop(key, None)

    # -- timers -----------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        for group in self.groups.values():
            if not any(m.deadline_ms <= now_ms for m in group.members.values()):
                continue
            before = self.snapshot(group.group_id)
            for member_id in group.expire(now_ms):
                log.info("share group %s: member %s timed out", group.group_id, member_id)
            self.save_later(group.group_id, before)
        for (group_id, topic, index), state in list(self.partitions.items()):
            if state.expire_locks(now_ms):
                self.on_released(topic, index)
                self.persist_later(group_id, topic, index)
        for session in self.sessions.idle(now_ms, self.config.session_timeout_ms):
            self.release_session(session)

    async def run(self, clock: Callable[[], float] = time.time, interval_s: float = 0.1) -> None:
        """Drive `tick` until cancelled (a task the core starts)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.tick(int(clock() * 1000))
            except Exception:
                log.exception("share group timer failed")
