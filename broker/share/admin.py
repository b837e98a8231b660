"""The share-group offsets admin (KIP-932), on the group's coordinator: what
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets do
(`logflume groups` and kafka-share-groups.sh send them).

A share group's "offset" for a partition is its share-partition start offset, kept
by the share coordinator (broker.share.state_store) and reached through the
persister (broker.share.persister), here or on another broker:

- describe: the stored start offset of each share-partition asked for (of every
  share-partition the group has when no topics are named); -1 for one never started.
- alter (an empty group only, NON_EMPTY_GROUP otherwise, as Kafka): each
  share-partition gets a fresh durable state at the new start offset, under the
  stored state epoch + 1 (InitializeShareGroupState), nothing in flight; a leader
  still holding the old state is fenced by the epoch, and the share-partitions
  loaded here are dropped, so the next ShareFetch starts at the new offset.
- delete (an empty group only): the durable state of the named topics'
  share-partitions is deleted (DeleteShareGroupState) and they leave the group.

An unknown group is GROUP_ID_NOT_FOUND, except that alter creates it empty (as
kafka-share-groups.sh --reset-offsets on a group that has no members yet expects).
The group's share-partitions that alter adds and delete removes are written to
`__consumer_offsets` (ShareGroupStatePartitionMetadata, broker.share.records) before
the answer, so that a coordinator taking the group over knows them.
Authorization is the handler's (broker/server/handlers/share_offsets.py).

Event-loop only.
"""

from __future__ import annotations

import asyncio
import dataclasses

from broker.protocol import ErrorCode
from broker.share.manager import ShareGroupManager
from broker.share.membership import ShareGroup


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionOffset:
    topic: str
    partition: int
    start_offset: int  # -1: no state (never started, or deleted)
    error: ErrorCode = ErrorCode.NONE


def _group(shares: ShareGroupManager, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, None
    return shares.describe(group_id)


async def describe_offsets(
    shares: ShareGroupManager, group_id: str, topics: dict[str, list[int]] | None
) -> tuple[ErrorCode, list[PartitionOffset]]:
    """The start offsets of `topics` (name -> partitions; None: the group's own)."""
    code, group = _group(shares, group_id)
    if group is None:
        return code, []
    if topics is None:
        topics = {t: sorted(parts) for t, parts in sorted(group.initialized.items())}
    return ErrorCode.NONE, list(
        await asyncio.gather(
            *(
                _start_offset(shares, group_id, topic, index)
                for topic, partitions in topics.items()
                for index in partitions
            )
        )
    )


async def _start_offset(
    shares: ShareGroupManager, group_id: str, topic: str, index: int
) -> PartitionOffset:
    found = shares.topic_lookup(topic)
    if found is None or not 0 <= index < found[1]:
        return PartitionOffset(topic, index, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if shares.persister is None:
        state = shares.partitions.get((group_id, topic, index))
        return PartitionOffset(topic, index, state.start if state is not None else -1)
    code, stored = await shares.persister.read(group_id, found[0], index, -1)
    if stored is None:
        return PartitionOffset(topic, index, -1, code)
    return PartitionOffset(topic, index, stored.start_offset, code)


async def alter_offsets(
    shares: ShareGroupManager, group_id: str, offsets: dict[str, dict[int, int]]
) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
    """Set the start offsets `offsets` (topic -> partition -> offset) of an empty group."""
    code, group = _group(shares, group_id)
    before = shares.snapshot(group_id)
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        group = shares.groups.setdefault(group_id, ShareGroup(group_id))
    elif group is None:
        return code, {}
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, {}
    results: dict[tuple[str, int], ErrorCode] = {}
    todo = []
    for topic, partitions in offsets.items():
        found = shares.topic_lookup(topic)
        for index, offset in partitions.items():
            if found is None or not 0 <= index < found[1]:
                results[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif offset < 0:
                results[(topic, index)] = ErrorCode.INVALID_REQUEST
            else:
                todo.append((topic, index, offset))
    codes = await asyncio.gather(*(_initialize(shares, group_id, *item) for item in todo))
    for (topic, index, _), result in zip(todo, codes, strict=True):
        results[(topic, index)] = result
        if result == ErrorCode.NONE:
            group.initialized.setdefault(topic, set()).add(index)
    for topic in {topic for topic, _, _ in todo}:
        shares.unload(group_id, topic)
    code = await shares.save(group_id, before)
    return code, results if code == ErrorCode.NONE else {}


async def _initialize(
    shares: ShareGroupManager, group_id: str, topic: str, index: int, offset: int
) -> ErrorCode:
    found = shares.topic_lookup(topic)
    if found is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if shares.persister is None:
        return ErrorCode.NONE
    code, stored = await shares.persister.read(group_id, found[0], index, -1)
    if stored is None:
        return code
    return await shares.persister.initialize(
        group_id, found[0], index, stored.state_epoch + 1, offset
    )


async def delete_offsets(
    shares: ShareGroupManager, group_id: str, topics: list[str]
) -> tuple[ErrorCode, dict[str, ErrorCode]]:
    """Delete the share-partitions of `topics` from an empty group, with their state."""
    code, group = _group(shares, group_id)
    if group is None:
        return code, {}
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, {}
    before = shares.snapshot(group_id)
    results: dict[str, ErrorCode] = {}
    for topic in topics:
        partitions = group.initialized.get(topic)
        if shares.topic_lookup(topic) is None or partitions is None:
            results[topic] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        results[topic] = await shares.delete_state(group_id, {topic: partitions})
        if results[topic] == ErrorCode.NONE:
            group.initialized.pop(topic, None)
    code = await shares.save(group_id, before)
    return code, results if code == ErrorCode.NONE else {}
