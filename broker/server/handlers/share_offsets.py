"""The share-group offsets admin APIs (KIP-932) on the group's coordinator:
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets. What
they do is broker.share.admin's; this module checks and shapes.

Authorization, as Kafka's: DESCRIBE on the group and on each topic to describe (a
topic not allowed answers TOPIC_AUTHORIZATION_FAILED for its partitions, or is left
out when the request names no topics); READ on the group and on each topic to
alter; DELETE on the group and READ on each topic to delete.
"""

from __future__ import annotations

import uuid

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles
from broker.share import admin

_NO_TOPIC = uuid.UUID(int=0)


def _topic_id(ctx, name: str) -> uuid.UUID:
    found = ctx.core.shares.topic_lookup(name)
    return found[0] if found is not None else _NO_TOPIC


def _leader_epoch(ctx, topic: str, index: int) -> int:
    try:
        return ctx.core.cluster.partition_view(topic, index).leader_epoch
    except Exception:  # a topic the cluster view does not know (deleted meanwhile)
        return -1


# -- DescribeShareGroupOffsets -------------------------------------------------------------


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
async def describe_share_group_offsets(ctx, body):
    return {
        "throttle_time_ms": 0,
        "groups": [await _describe(ctx, group) for group in body["groups"]],
    }


async def _describe(ctx, request: dict) -> dict:
    group_id = request["group_id"]
    answer: dict = {"group_id": group_id, "topics": [], "error_message": None}
    if not allowed(ctx, Op.DESCRIBE, RT.GROUP, group_id):
        return answer | {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    denied: dict[str, list[int]] = {}
    wanted: dict[str, list[int]] | None = None
    if request["topics"] is not None:
        wanted = {}
        for t in request["topics"]:
            allowed_topic = allowed(ctx, Op.DESCRIBE, RT.TOPIC, t["topic_name"])
            (wanted if allowed_topic else denied)[t["topic_name"]] = t["partitions"]
    code, offsets = await admin.describe_offsets(ctx.core.shares, group_id, wanted)
    if code != ErrorCode.NONE:
        return answer | {"error_code": code}
    if request["topics"] is None:
        offsets = [o for o in offsets if allowed(ctx, Op.DESCRIBE, RT.TOPIC, o.topic)]
    offsets += [
        admin.PartitionOffset(topic, index, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for topic, partitions in denied.items()
        for index in partitions
    ]
    topics: dict[str, list[dict]] = {}
    for o in offsets:
        topics.setdefault(o.topic, []).append(
            {
                "partition_index": o.partition,
                "start_offset": o.start_offset,
                "leader_epoch": _leader_epoch(ctx, o.topic, o.partition)
                if o.start_offset >= 0
                else -1,
                "error_code": o.error,
                "error_message": None,
            }
        )
    answer["topics"] = [
        {"topic_name": name, "topic_id": _topic_id(ctx, name), "partitions": parts}
        for name, parts in topics.items()
    ]
    return answer | {"error_code": ErrorCode.NONE}


# -- AlterShareGroupOffsets ---------------------------------------------------------------


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
async def alter_share_group_offsets(ctx, body):
    group_id = body["group_id"]
    if not allowed(ctx, Op.READ, RT.GROUP, group_id):
        return _alter_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    offsets: dict[str, dict[int, int]] = {}
    results: dict[tuple[str, int], ErrorCode] = {}
    for t in body["topics"]:
        name = t["topic_name"]
        for p in t["partitions"]:
            if allowed(ctx, Op.READ, RT.TOPIC, name):
                offsets.setdefault(name, {})[p["partition_index"]] = p["start_offset"]
            else:
                results[(name, p["partition_index"])] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    code, altered = await admin.alter_offsets(ctx.core.shares, group_id, offsets)
    if code != ErrorCode.NONE:
        return _alter_error(code)
    results.update(altered)
    topics: dict[str, list[dict]] = {}
    for (name, index), result in results.items():
        topics.setdefault(name, []).append(
            {"partition_index": index, "error_code": result, "error_message": None}
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "responses": [
            {"topic_name": name, "topic_id": _topic_id(ctx, name), "partitions": parts}
            for name, parts in topics.items()
        ],
    }


def _alter_error(code: ErrorCode) -> dict:
    message = "the share group has members" if code == ErrorCode.NON_EMPTY_GROUP else None
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": []}


# -- DeleteShareGroupOffsets ----------------------------------------------------------------


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
async def delete_share_group_offsets(ctx, body):
    group_id = body["group_id"]
    if not allowed(ctx, Op.DELETE, RT.GROUP, group_id):
        return _alter_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = [t["topic_name"] for t in body["topics"]]
    denied = {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in names if not _may_read(ctx, n)}
    wanted = [n for n in names if n not in denied]
    code, deleted = await admin.delete_offsets(ctx.core.shares, group_id, wanted)
    if code != ErrorCode.NONE:
        return _alter_error(code)
    results = denied | deleted
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "responses": [
            {
                "topic_name": name,
                "topic_id": _topic_id(ctx, name),
                "error_code": results[name],
                "error_message": None,
            }
            for name in names
        ],
    }


def _may_read(ctx, topic: str) -> bool:
    return allowed(ctx, Op.READ, RT.TOPIC, topic)
