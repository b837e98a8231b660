"""DescribeTopicPartitions (KIP-966): Metadata's topics and partitions, paged by a
cursor. Java admin clients 3.8+ describe topics with it.

As Kafka 3.9's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse answer it:

- The topics are walked in name order, from the cursor's topic on (an empty topic
  list: every topic), the cursor's topic from the cursor's partition, the others
  from partition 0. A topic named twice is walked once.
- At most `min(response_partition_limit, max.request.partition.size.limit)` (at
  least 1) partitions are listed across topics. Where the limit stops the walk
  inside a topic, `next_cursor` names that topic and its first partition left out;
  where the limit is used up exactly and a topic the caller may DESCRIBE follows,
  `next_cursor` names that topic at partition 0 (it may turn out not to exist); else
  it is null. So walking the cursor lists every partition once, in order, and
  reports each refused topic once.
- Authorization: DESCRIBE on each topic, asked as the walk reaches it. A named topic
  the caller may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED (zero id, no
  partitions) whether it exists or not; in the all-topics answer it is left out.
  Refused topics come after the others, in name order (Kafka appends them in no
  particular order).
- A named topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION, or
  INVALID_TOPIC_EXCEPTION for an illegal name; neither takes from the limit.
- A cursor whose topic is not among the named topics, or whose partition is
  negative, makes the request INVALID_REQUEST: every named topic answered with that
  code and no partitions (Kafka's error response).
- Each listed topic (unknown ones included, refused ones not) carries its
  authorized operations: the API has no flag to ask for them.
- Partitions carry no error code, a leaderless one included (leader -1), and the
  eligible leader replicas and last known ELR are empty: a KRaft broker without ELR
  enabled answers so. Replicas and ISR are listed whole, offline replicas apart.

Kafka serves this API on KRaft brokers only (a ZooKeeper-mode Kafka broker neither
advertises nor answers it); this ZooKeeper-style broker serves it from the same
cluster view as Metadata.
"""

from __future__ import annotations

from broker.cluster.names import InvalidTopicName, validate_topic_name
from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed, authorized_operations
from broker.server.dispatch import handles
from broker.server.handlers.metadata import NO_TOPIC_ID, partition_entry, topic_uuid
from common.topic_names import is_internal


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
def describe_topic_partitions(ctx, body):
    cursor = body["cursor"]
    requested = body["topics"]
    every_topic = not requested
    after = cursor["topic_name"] if cursor is not None else ""
    if every_topic:
        names = {n for n in ctx.core.cluster.topics if n >= after}
    else:
        names = {t["name"] for t in requested if t["name"] >= after}
        if cursor is not None and cursor["topic_name"] not in names:
            return _invalid(requested)
    if cursor is not None and cursor["partition_index"] < 0:
        return _invalid(requested)
    limit = max(
        min(ctx.core.config["max.request.partition.size.limit"], body["response_partition_limit"]),
        1,
    )
    topics, refused, next_cursor = _walk(ctx, sorted(names), cursor, limit, every_topic)
    for entry in topics:
        entry["topic_authorized_operations"] = authorized_operations(ctx, RT.TOPIC, entry["name"])
    return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}


def _walk(ctx, names: list[str], cursor, limit: int, every_topic: bool):
    """(listed topics, refused named topics, next cursor) of one page."""
    known = ctx.core.cluster.topics
    topics: list[dict] = []
    refused: list[dict] = []
    remaining = limit
    for name in names:
        if not allowed(ctx, Op.DESCRIBE, RT.TOPIC, name):
            if not every_topic:
                refused.append(_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, internal=False))
            continue
        if remaining == 0:
            return topics, refused, {"topic_name": name, "partition_index": 0}
        meta = known.get(name)
        if meta is None:
            if not every_topic:
                topics.append(_entry(name, _missing_code(name), internal=is_internal(name)))
            continue
        at_cursor = cursor is not None and name == cursor["topic_name"]
        first = cursor["partition_index"] if at_cursor else 0
        end = min(meta.partitions, first + remaining)
        entry = _entry(name, ErrorCode.NONE, internal=is_internal(name), topic_id=topic_uuid(meta))
        entry["partitions"] = [_partition(ctx.core, name, i) for i in range(first, end)]
        topics.append(entry)
        if end < meta.partitions:
            return topics, refused, {"topic_name": name, "partition_index": end}
        remaining -= len(entry["partitions"])
    return topics, refused, None


def _partition(core, name: str, index: int) -> dict:
    entry = partition_entry(core, name, index)
    entry["error_code"] = ErrorCode.NONE
    entry["eligible_leader_replicas"] = []
    entry["last_known_elr"] = []
    return entry


def _entry(name: str, code: ErrorCode, internal: bool, topic_id=NO_TOPIC_ID) -> dict:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": internal,
        "partitions": [],
    }


def _missing_code(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except InvalidTopicName:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _invalid(requested: list[dict]) -> dict:
    """Kafka's error response to a request it refuses whole."""
    return {
        "throttle_time_ms": 0,
        "topics": [_entry(t["name"], ErrorCode.INVALID_REQUEST, internal=False) for t in requested],
        "next_cursor": None,
    }
