"""Committed offsets of classic groups: OffsetCommit, OffsetFetch, retention, deletion
(DeleteGroups, OffsetDelete).

A commit is validated against the group as Kafka does: a group that does not use
group management (simple consumers, `generation_id` -1 on an Empty group) may commit
freely; otherwise the member must belong to the group's current generation (checked
first) and then the group must not be waiting for its assignment
(CompletingRebalance). Accepted offsets
are appended to the group's `__consumer_offsets` partition and only then visible to
OffsetFetch; a commit counts as a heartbeat.

Commits to a consumer-protocol group (KIP-848) are checked by ConsumerGroups
(consumer/heartbeat.py): the member and its member epoch (OffsetCommit v9, else
UNSUPPORTED_VERSION); the offsets are kept as a classic group's.

Retention (KIP-211): offsets of a group that uses group management expire
`offsets_retention_ms` after the group became Empty; offsets of a group that does not
expire that long after their commit; those of a consumer-protocol group do not expire
while it has members. Expired offsets and groups left Empty without offsets (of
either protocol) are removed with tombstones.
"""

from __future__ import annotations

from broker.groups.config import CoordinatorConfig
from broker.groups.consumer.heartbeat import ConsumerGroups
from broker.groups.group import GroupState
from broker.groups.offsets_topic import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from broker.groups.table import GroupTable
from broker.groups.writer import RecordWriter
from broker.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class Offsets:
    """The committed offsets of every group in `table`. Owned by the GroupCoordinator;
    used on its event loop only."""

    def __init__(
        self,
        table: GroupTable,
        writer: RecordWriter,
        config: CoordinatorConfig,
        consumer: ConsumerGroups,
    ):
        self._table = table
        self._writer = writer
        self._config = config
        self._consumer = consumer

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, tuple[int, int, str | None]],
        now_ms: int,
        api_version: int = 9,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit of {(topic, partition): (offset, leader_epoch, metadata)};
        returns the error of each partition. `generation_id` is the member epoch for a
        consumer-protocol group."""
        err = self._table.coordinator_error(group_id)
        if not err:
            consumer = self._consumer.commit_error(group_id, member_id, generation_id, api_version)
            if consumer is None:
                err = self._commit_error(
                    group_id, member_id, group_instance_id, generation_id, now_ms
                )
            else:
                err = consumer
        if err:
            return {tp: err for tp in offsets}
        group = self._table.get(group_id) or self._table.create(group_id, now_ms)
        results: dict[TopicPartition, ErrorCode] = {}
        values: dict[TopicPartition, OffsetValue] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                values[tp] = OffsetValue(offset, metadata, now_ms, leader_epoch)
        if values:
            records = [
                (encode_offset_key(OffsetKey(group_id, *tp)), encode_offset_value(v))
                for tp, v in values.items()
            ]
            group.pending_commits += 1
            try:
                err = await self._writer.write(group_id, records, now_ms)
            finally:
                group.pending_commits -= 1
            if not err and group.is_(GroupState.DEAD):
                err = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if not err:
                group.offsets.update(values)
            for tp in values:
                results[tp] = err
        return results

    def _commit_error(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int, now_ms
    ) -> ErrorCode:
        """Kafka's validateOffsetCommit: membership and generation first, then the
        group's state."""
        err = self._table.coordinator_error(group_id)
        if err:
            return err
        group = self._table.get(group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.ILLEGAL_GENERATION
            self._table.create(group_id, now_ms)
            return ErrorCode.NONE
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.NONE
        if generation >= 0 or member_id or instance_id is not None:
            err = group.validate_member(member_id, instance_id)
            if not err and generation != group.generation:
                err = ErrorCode.ILLEGAL_GENERATION
            if err:
                return err
        elif not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members[member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        return ErrorCode.NONE

    def txn_commit_error(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int, now_ms
    ) -> ErrorCode:
        """Kafka's validateTxnOffsetCommit: an unknown group is created (the producer
        may commit for a group that never formed); with a member id or generation
        (TxnOffsetCommit v3+) they must match the group's."""
        group = self._table.get(group_id) or self._table.create(group_id, now_ms)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not member_id and instance_id is None:
            return ErrorCode.NONE
        err = group.validate_member(member_id, instance_id)
        if not err and generation != group.generation:
            err = ErrorCode.ILLEGAL_GENERATION
        return err

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        """OffsetFetch: None for a partition without a commit (sent as offset -1,
        error NONE); `partitions` None means every committed partition. A member id
        or epoch (v9) is checked against a consumer-protocol group."""
        err = self._table.coordinator_error(group_id)
        if not err:
            err = self._consumer.fetch_error(group_id, member_id, member_epoch)
        if err:
            return err, {}
        group = self._table.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(offsets)
        return ErrorCode.NONE, {tp: offsets.get(tp) for tp in partitions}

    async def expire_offsets(self, now_ms: int) -> int:
        """Remove offsets past retention and groups left with nothing; returns the
        number of offsets removed."""
        removed = 0
        retention = self._config.offsets_retention_ms
        for group in list(self._table.groups.values()):
            if group.protocol_type and not group.is_(GroupState.EMPTY):
                continue
            consumer = self._table.consumer.get(group.group_id)
            if consumer is not None and consumer.members:
                continue
            expired = []
            for tp, v in group.offsets.items():
                if v.expire_timestamp >= 0:
                    gone = now_ms >= v.expire_timestamp
                else:
                    base = group.state_timestamp if group.protocol_type else v.commit_timestamp
                    gone = now_ms - base >= retention
                if gone:
                    expired.append(tp)
            records = [(encode_offset_key(OffsetKey(group.group_id, *tp)), None) for tp in expired]
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if (
                group.is_(GroupState.EMPTY)
                and not group.offsets
                and not group.pending_members
                and not group.pending_commits
            ):
                records.append((encode_group_key(GroupKey(group.group_id)), None))
                self._table.drop(group, now_ms)
            if records:
                self._writer.queue(group.group_id, records)
        for gid, consumer in list(self._table.consumer.items()):
            holder = self._table.get(gid)
            if not consumer.members and (holder is None or not holder.offsets):
                self._writer.queue(gid, self._table.drop_consumer(gid))
        await self._writer.flush(now_ms)
        return removed

    async def delete_group(self, group_id: str, now_ms: int) -> ErrorCode:
        """DeleteGroups for one group: only an Empty group can be deleted."""
        err = self._table.coordinator_error(group_id)
        if err:
            return err
        consumer = self._table.consumer.get(group_id)
        if consumer is not None and consumer.members:
            return ErrorCode.NON_EMPTY_GROUP
        records = self._table.drop_consumer(group_id) if consumer is not None else []
        group = self._table.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            if records:
                return await self._writer.write(group_id, records, now_ms)
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        records += [(encode_offset_key(OffsetKey(group_id, *tp)), None) for tp in group.offsets]
        records.append((encode_group_key(GroupKey(group_id)), None))
        self._table.drop(group, now_ms)
        return await self._writer.write(group_id, records, now_ms)

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition], now_ms: int
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: drop the group's committed offsets of `partitions`, as Kafka
        does: any of an Empty group; of a consumer group with members, only of topics
        no member subscribes to (the others answer GROUP_SUBSCRIBED_TO_TOPIC); none of
        another group with members (NON_EMPTY_GROUP)."""
        err = self._table.coordinator_error(group_id)
        if err:
            return err, {}
        group = self._table.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        consumer = self._table.consumer.get(group_id)
        if consumer is not None and consumer.members:
            subscribed = {name for name, _ in consumer.subscribed_topics.values()}
        elif not group.is_(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = group.subscribed_topics()
        results = {}
        gone = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if group.offsets.pop(tp, None) is not None:
                gone.append(tp)
        if gone:
            records = [(encode_offset_key(OffsetKey(group_id, *tp)), None) for tp in gone]
            err = await self._writer.write(group_id, records, now_ms)
            if err:
                return err, {}
        return ErrorCode.NONE, results
