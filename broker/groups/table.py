"""The groups this broker coordinates, by id, and the `__consumer_offsets`
partitions it owns.

A group is coordinated here while its partition (`partition_for`) is owned: the
partition's records were replayed into groups (`load`), and `unload` forgets them
when leadership moves. Requests for a group of another partition are answered
NOT_COORDINATOR (`coordinator_error`). A group leaves the table Dead (`drop`): a
coroutine still holding the object sees that.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from broker.groups.consumer import records as consumer_records
from broker.groups.consumer.group import ConsumerGroup
from broker.groups.group import Group, GroupState
from broker.groups.offsets_topic import (
    DECODE_ERRORS,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_record,
    partition_for,
)
from broker.protocol.errors import ErrorCode
from broker.protocol.primitives import INT16
from broker.share import records as share_records

log = logging.getLogger(__name__)


class GroupTable:
    """Owned by the GroupCoordinator; used on its event loop only."""

    def __init__(self, num_partitions: int):
        self.num_partitions = num_partitions
        self.groups: dict[str, Group] = {}
        # consumer-protocol groups (KIP-848); their offsets stay in `groups`
        self.consumer: dict[str, ConsumerGroup] = {}
        self.owned: set[int] = set()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        if self.partition_for(group_id) not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def create(self, group_id: str, now_ms: int) -> Group:
        group = self.groups[group_id] = Group(group_id, now_ms)
        return group

    def drop_consumer(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """Forget the consumer group `group_id` (deleted, or its id taken over by a
        classic group); the records that delete it from `__consumer_offsets`."""
        group = self.consumer.pop(group_id)
        records = []
        for mid in list(group.members):
            records += consumer_records.member_tombstones(group_id, mid)
        return records + consumer_records.group_tombstones(group_id)

    def drop(self, group: Group, now_ms: int) -> None:
        """Forget `group`: it becomes Dead, without offsets."""
        group.offsets.clear()
        group.transition(GroupState.DEAD, now_ms)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def load(
        self,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None]],
        now_ms: int,
        share: list[share_records.ShareRecord] | None = None,
    ) -> list[str]:
        """Own `partition`, whose (key, value) records in offset order are replayed
        into groups: the last record of each key is the state. Returns the ids of the
        consumer-protocol groups loaded; the share groups' records (kept by
        broker.share, not here) are added to `share`."""
        consumer: list[consumer_records.ConsumerRecord] = []
        for key, value in records:
            try:
                kind = INT16.unpack_from(key, 0)[0] if len(key) >= 2 else -1
                if kind in consumer_records.KEY_VERSIONS:
                    consumer.append(consumer_records.decode(key, value))
                    continue
                if kind in share_records.KEY_VERSIONS:
                    if share is not None:
                        share.append(share_records.decode(key, value))
                    continue
                k, v = decode_record(key, value)
            except DECODE_ERRORS as e:
                log.warning("__consumer_offsets-%d: skipping unreadable record: %s", partition, e)
                continue
            group = self.groups.get(k.group)
            if isinstance(k, OffsetKey):
                if v is not None:
                    assert isinstance(v, OffsetValue)  # decoded by its key's kind
                    group = group or self.create(k.group, now_ms)
                    group.offsets[(k.topic, k.partition)] = v
                elif group is not None:
                    group.offsets.pop((k.topic, k.partition), None)
                continue
            offsets = group.offsets if group is not None else {}
            if v is not None:
                assert isinstance(v, GroupValue)
                group = self.groups[k.group] = Group.from_record(k.group, v, now_ms)
                group.offsets = offsets
            elif offsets:  # the group's metadata was deleted; its offsets have their own
                self.create(k.group, now_ms).offsets = offsets
            else:
                self.groups.pop(k.group, None)
        loaded = consumer_records.rebuild(consumer)
        self.consumer.update(loaded)
        self.owned.add(partition)
        log.debug("loaded __consumer_offsets-%d", partition)
        return list(loaded)

    def unload(self, partition: int) -> None:
        """Stop coordinating `partition` (leadership moved): its groups' waiting
        requests get NOT_COORDINATOR and the groups are dropped."""
        self.owned.discard(partition)
        for group in [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]:
            for m in group.members.values():
                m.fail_waiting(ErrorCode.NOT_COORDINATOR)
            self.drop(group, 0)
        for gid in [gid for gid in self.consumer if self.partition_for(gid) == partition]:
            del self.consumer[gid]
