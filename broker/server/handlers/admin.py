"""Topic admin: CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords.

CreateTopics accepts per-topic configs (any topic config the log understands:
retention.ms, retention.bytes, segment.bytes, segment.ms, cleanup.policy,
min.insync.replicas, max.message.bytes ...) and `validate_only`. The replication
factor may not exceed the live brokers (a single node: 1); manual assignments
(partition count and replication factor -1) may name only registered brokers
(TopicAdmin checks them). Errors: TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST (a topic
named twice in one request).

CreateTopics v5+ also answers the created topic's partitions, replication factor and
configs (v7: its id); DeleteTopics v6 may name topics by id.

Authorization (TOPIC_AUTHORIZATION_FAILED per topic): CreateTopics needs CREATE on
the cluster or the topic (and DESCRIBE_CONFIGS on it for v5+ to describe what was
made), DeleteTopics and DeleteRecords DELETE, CreatePartitions ALTER on the topic.
DeleteTopics v6 answers with the id the request gave (zero for a topic named by
name) and, for a topic named by id that the caller may not DESCRIBE, a null name,
so that a refusal discloses neither. Records of the internal topics are never
deleted (INVALID_TOPIC_EXCEPTION), as in Kafka.

CreatePartitions and DeleteRecords: see their handlers; the checks and the changes
themselves are TopicAdmin's (with_partitions / alter_topic) and ReplicaManager's
(delete_records).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from broker.cluster.metadata_store import TopicMeta
from broker.cluster.replica_manager import TopicError
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.errors import ApiError
from broker.server.authz import RT, Op, allowed, may_create_topic
from broker.server.dispatch import handles
from broker.server.handlers.configs import SOURCE_DEFAULT, SOURCE_TOPIC
from broker.server.handlers.metadata import NO_TOPIC_ID, named_topic, topic_uuid
from common.topic_names import is_internal


def _require(ctx, op: Op, topic: str) -> None:
    """Raise TOPIC_AUTHORIZATION_FAILED unless the caller may `op` the topic."""
    if not allowed(ctx, op, RT.TOPIC, topic):
        raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")


@handles(ApiKey.CREATE_TOPICS)
def create_topics(ctx, body):
    """The cluster view creates each topic: a single node at once, a cluster by writing
    it to ZooKeeper and answering when this broker serves it (bounded by the request's
    timeout_ms)."""
    counts = Counter(t["name"] for t in body["topics"])
    planned = [_plan(ctx, topic, counts[topic["name"]]) for topic in body["topics"]]
    if body["validate_only"]:
        return _response(ctx, body, planned)
    return _create_all(ctx, body, planned)


async def _create_all(ctx, body, planned):
    timeout_s = body["timeout_ms"] / 1000
    for i, (meta, _) in enumerate(planned):
        if meta is not None:
            try:
                await ctx.core.cluster.create_and_wait(meta, timeout_s)
            except TopicError as e:  # e.g. no space left for its files, or a timeout
                planned[i] = (None, e)
    return _response(ctx, body, planned)


def _plan(ctx, topic: dict, named: int):
    """(TopicMeta, None) for a topic that can be created, else (None, TopicError)."""
    name = topic["name"]
    try:
        if named > 1:
            raise TopicError(
                ErrorCode.INVALID_REQUEST, f"Create topics request has duplicate topic {name}."
            )
        if not may_create_topic(ctx, name):
            raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        given = [(a["partition_index"], a["broker_ids"]) for a in topic["assignments"]]
        configs = {c["name"]: c["value"] for c in topic["configs"]}
        meta = ctx.core.topic_admin.plan_topic(
            name, topic["num_partitions"], topic["replication_factor"], configs, given
        )
        return meta, None
    except TopicError as e:
        return None, e


def _response(ctx, body, planned) -> dict:
    """v5+ describes a created topic only to a caller that may DESCRIBE_CONFIGS it;
    anyone else gets `topic_config_error_code` TOPIC_AUTHORIZATION_FAILED instead
    (also for a topic refused for CREATE), as Kafka answers."""
    counts = Counter(t["name"] for t in body["topics"])
    results = []
    for topic, (meta, error) in zip(body["topics"], planned, strict=True):
        name = topic["name"]
        result = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        described = ctx.api_version >= 5 and allowed(ctx, Op.DESCRIBE_CONFIGS, RT.TOPIC, name)
        if error is not None:
            result |= {"error_code": error.code, "error_message": error.message}
            # a topic refused before its creation was tried (a failed creation clears it)
            refused = counts[name] > 1 or error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if ctx.api_version >= 5 and not described and refused:
                result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif described:
            result |= _created(ctx.core, meta, body["validate_only"])
        elif ctx.api_version >= 5:
            result |= _undescribed(ctx.core, meta, body["validate_only"])
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}


def _undescribed(core, planned: TopicMeta, validate_only: bool) -> dict:
    """A created topic's answer without its configs, partitions and replication."""
    meta = None if validate_only else core.replicas.topic(planned.name)
    return {
        "topic_id": topic_uuid(meta) if meta is not None else NO_TOPIC_ID,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
        "topic_config_error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }


def _created(core, planned: TopicMeta, validate_only: bool):
    """What v5+ tells about a created topic: id, partitions, replication and configs
    (for validate_only, the topic as it would be)."""
    meta = None if validate_only else core.replicas.topic(planned.name)
    if meta is None:
        values = core.replicas.log_config(planned.configs).to_props()
        topic_id = None
        meta = planned
    else:
        values, _ = core.replicas.effective_configs(meta)
        topic_id = topic_uuid(meta)
    sources = dict.fromkeys(meta.configs, SOURCE_TOPIC)
    partitions, rf = meta.partitions, len(meta.assignments[0])
    return {
        "topic_id": topic_id or NO_TOPIC_ID,
        "num_partitions": partitions,
        "replication_factor": rf,
        "configs": [
            {
                "name": key,
                "value": value,
                "read_only": False,
                "config_source": sources.get(key, SOURCE_DEFAULT),
                "is_sensitive": False,
            }
            for key, value in values.items()
        ],
    }


@handles(ApiKey.DELETE_TOPICS)
def delete_topics(ctx, body):
    """v0-5 name topics; v6 names them or gives their ids (an unknown id answers
    UNKNOWN_TOPIC_ID with a null name). The answer comes once this broker no longer
    knows the deleted topics (a single node at once), as Kafka's delayed delete does."""
    if ctx.api_version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    else:
        wanted = [(name, NO_TOPIC_ID) for name in body["topic_names"]]
    results = []
    for name, topic_id in wanted:
        by_id = name is None
        if by_id:
            name = named_topic({"topic_id": topic_id}, ctx.core.replicas.topics())
            if isinstance(name, dict):
                results.append(name | {"error_message": "unknown topic id"})
                continue
        result = {
            "name": name,
            "topic_id": topic_id,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        if by_id and not allowed(ctx, Op.DESCRIBE, RT.TOPIC, name):
            result |= {"name": None, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            results.append(result)
            continue
        try:
            _require(ctx, Op.DELETE, name)
            ctx.core.topic_admin.delete_topic(name)
        except TopicError as e:
            result["error_code"], result["error_message"] = e.code, e.message
        results.append(result)
    response = {"throttle_time_ms": 0, "responses": results}
    deleted = [r for r in results if r["error_code"] == ErrorCode.NONE]
    if not any(r["name"] in ctx.core.cluster.topics for r in deleted):
        return response
    return _when_deleted(ctx, body["timeout_ms"] / 1000, deleted, response)


async def _when_deleted(ctx, timeout_s: float, deleted: list[dict], response: dict) -> dict:
    """A cluster's answer: once the controller removed the topics from ZooKeeper and
    this broker's watch dropped them, so that a client's next Metadata does not find
    them; REQUEST_TIMED_OUT for those still known after `timeout_s` (their deletion
    goes on), as in Kafka."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while any(r["name"] in ctx.core.cluster.topics for r in deleted):
        if loop.time() >= deadline:
            break
        await asyncio.sleep(0.02)
    for r in deleted:
        if r["name"] in ctx.core.cluster.topics:
            r["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return response


@handles(ApiKey.CREATE_PARTITIONS)
async def create_partitions(ctx, body):
    """Grow topics to `count` partitions (never shrink: INVALID_PARTITIONS), with the
    given replica lists or assigned as for a new topic; `validate_only` checks only."""
    topic_admin = ctx.core.topic_admin
    counts = Counter(t["name"] for t in body["topics"])
    results = []
    for topic in body["topics"]:
        name = topic["name"]
        code, message = ErrorCode.NONE, None
        try:
            if counts[name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            _require(ctx, Op.ALTER, name)
            given = topic["assignments"]
            assignments = None if given is None else [a["broker_ids"] for a in given]
            meta = topic_admin.with_partitions(name, topic["count"], assignments)
            if not body["validate_only"]:
                await topic_admin.alter_topic(meta)
        except TopicError as e:
            code, message = e.code, e.message
        results.append({"name": name, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}


@handles(ApiKey.DELETE_RECORDS)
def delete_records(ctx, body):
    """Move each partition's log start up to the given offset (-1: the high
    watermark); the answer's low watermark is the leader's new log start."""
    replicas = ctx.core.replicas
    topics = []
    for t in body["topics"]:
        partitions = []
        for p in t["partitions"]:
            low, code = -1, ErrorCode.NONE
            try:
                _require(ctx, Op.DELETE, t["name"])
                if is_internal(t["name"]):
                    raise ApiError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"Cannot delete records of internal topic {t['name']}",
                    )
                low = replicas.delete_records(t["name"], p["partition_index"], p["offset"])
            except ApiError as e:
                code = e.code
            partitions.append(
                {"partition_index": p["partition_index"], "low_watermark": low, "error_code": code}
            )
        topics.append({"name": t["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
