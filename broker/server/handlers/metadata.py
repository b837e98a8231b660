"""Metadata: brokers, controller, cluster id and topic/partition leadership.

Version quirks (see reference/kafka-protocol.md): v0 sends an empty topic list to
mean "all topics"; v1+ uses null for all and empty for none. Requested topics that
do not exist are created when `auto.create.topics.enable` is on and (v4+) the client
allows it (a single node at once, a cluster through ZooKeeper and the controller),
and the request that creates a topic is answered LEADER_NOT_AVAILABLE (retriable)
with no partitions, as Kafka's AutoTopicCreationManager answers: the client's retry
finds the topic. A cluster does not create a topic again while its deletion is
pending in ZooKeeper (Kafka's "marked for deletion", broker.cluster.zk_topics): the
answer is the same, and a later retry creates it.
Authorization: an all-topics answer lists only the topics the caller may DESCRIBE;
a named topic it may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED whether it
exists or not, so no answer reveals a name; auto-creation (when on) needs CREATE
on the cluster or the topic (TOPIC_AUTHORIZATION_FAILED else), as Kafka.
v8+ fills authorized operations when asked (KIP-430), as Kafka's KafkaApis: every
topic the caller may describe gets its bit field, a missing one too; an entry
refused for DESCRIBE or CREATE, or of an unknown id, keeps the "not requested"
value (`logflume agent test-output` reads WRITE from it).
v10+ carries each topic's id, and a requested topic may be named by id alone (name
null): an unknown id answers UNKNOWN_TOPIC_ID with a null name.
"""

import uuid

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed, authorized_operations, may_auto_create
from broker.server.dispatch import handles
from common.topic_names import is_internal

NO_TOPIC_ID = uuid.UUID(int=0)


def topic_uuid(meta) -> uuid.UUID:
    """The topic's id as a UUID (the zero UUID for a topic stored without a valid one)."""
    try:
        return uuid.UUID(hex=meta.topic_id)
    except (TypeError, ValueError):
        return NO_TOPIC_ID


def named_topic(item: dict, topics) -> str | dict:
    """The name a requested topic entry stands for, or the error entry of an unknown id."""
    if item.get("name") is not None:
        return item["name"]
    wanted = item.get("topic_id", NO_TOPIC_ID)
    for name, meta in topics.items():
        if wanted != NO_TOPIC_ID and topic_uuid(meta) == wanted:
            return name
    return {
        "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
        "name": None,
        "topic_id": wanted,
        "is_internal": False,
        "partitions": [],
    }


def _denied_entry(name: str | None, topic_id: uuid.UUID | None) -> dict:
    entry: dict[str, object] = {
        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "name": name,
        "is_internal": False,
        "partitions": [],
    }
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


def requested_topic(ctx, item: dict, topics) -> str | dict:
    """`named_topic`, with a topic the caller may not DESCRIBE answered
    TOPIC_AUTHORIZATION_FAILED whether it exists or not (a topic named by id keeps
    its name hidden)."""
    name = named_topic(item, topics)
    if isinstance(name, dict) or allowed(ctx, Op.DESCRIBE, RT.TOPIC, name):
        return name
    by_id = item.get("name") is None
    return _denied_entry(None if by_id else name, item.get("topic_id") if by_id else None)


def _may_create(ctx, name: str, allow_create: bool) -> ErrorCode | None:
    """None: create `name` if auto-creation is on; else the code to answer."""
    if not allow_create:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return None if may_auto_create(ctx, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED


def visible(ctx, names) -> list[str]:
    """The topics an all-topics answer lists: those the caller may DESCRIBE."""
    if ctx.core.authorizer is None:
        return sorted(names)
    return sorted(n for n in names if allowed(ctx, Op.DESCRIBE, RT.TOPIC, n))


def partition_entry(core, name: str, index: int) -> dict:
    """A partition as the cluster view describes it: leader, replicas, ISR and offline
    replicas (the fields Metadata and DescribeTopicPartitions share; no error code,
    which each API sets by its own rule)."""
    view = core.cluster.partition_view(name, index)
    return {
        "partition_index": index,
        "leader_id": view.leader,
        "leader_epoch": view.leader_epoch,
        "replica_nodes": view.replicas,
        "isr_nodes": view.isr,
        "offline_replicas": view.offline,
    }


def topic_entry(core, name: str, meta) -> dict:
    """A topic as the cluster view describes it: leaders, ISRs and offline replicas."""
    partitions = []
    for index in range(meta.partitions):
        entry = partition_entry(core, name, index)
        leaderless = entry["leader_id"] < 0
        entry["error_code"] = ErrorCode.LEADER_NOT_AVAILABLE if leaderless else ErrorCode.NONE
        partitions.append(entry)
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "topic_id": topic_uuid(meta),
        "is_internal": is_internal(name),
        "partitions": partitions,
    }


@handles(ApiKey.METADATA)
def metadata(ctx, body):
    core = ctx.core
    known = core.cluster.topics
    requested = body["topics"]
    if requested is None or (ctx.api_version == 0 and not requested):
        topics = [topic_entry(core, n, known[n]) for n in visible(ctx, known)]
    else:
        allow_create = ctx.api_version < 4 or body["allow_auto_topic_creation"]
        topics = []
        for item in requested:
            name = requested_topic(ctx, item, known)
            if isinstance(name, dict):
                topics.append(name)
                continue
            if name in known:
                topics.append(topic_entry(core, name, known[name]))
                continue
            refused = _may_create(ctx, name, allow_create)
            if refused == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                topics.append(_denied_entry(name, None))
                continue
            code = refused if refused is not None else core.topic_admin.auto_create(name)
            if code == ErrorCode.NONE:
                code = ErrorCode.LEADER_NOT_AVAILABLE
            topics.append(
                {
                    "error_code": code,
                    "name": name,
                    "is_internal": is_internal(name),
                    "partitions": [],
                }
            )
    response = {
        "throttle_time_ms": 0,
        "brokers": live_brokers(core, ctx.listener),
        "cluster_id": core.cluster_id,
        "controller_id": core.cluster.active_controller_id(),
        "topics": topics,
    }
    return with_authorized_operations(ctx, body, response)


def live_brokers(core, listener: str) -> list[dict]:
    """The live brokers, by id, as Metadata lists them to a client of `listener`:
    each with its advertised endpoint of that listener name, and a broker without
    such a listener left out (Kafka's behaviour). This broker is included even
    before its registration shows up (it serves already), and left out while it is
    fenced from ZooKeeper (broker.cluster.lease): clients forget brokers that a
    Metadata answer does not list and ask another one who leads now."""
    fenced = core.cluster.fenced
    brokers = {}
    if not fenced:
        host, port = core.advertised(listener)
        brokers[core.broker_id] = {
            "node_id": core.broker_id,
            "host": host,
            "port": port,
            "rack": core.config["broker.rack"],
        }
    for b in core.cluster.brokers.values():
        address = b.endpoints.get(listener)
        if address is not None and not (fenced and b.broker_id == core.broker_id):
            brokers[b.broker_id] = {
                "node_id": b.broker_id,
                "host": address[0],
                "port": address[1],
                "rack": b.rack,
            }
    return [brokers[b] for b in sorted(brokers)]


def with_authorized_operations(ctx, body, response: dict) -> dict:
    """KIP-430, when asked for (v8+): each described topic's authorized operations
    (not those of refused or unknown-id entries), and the cluster's (v8-10; 0
    without DESCRIBE on the cluster), as Kafka fills them."""
    if body.get("include_topic_authorized_operations"):
        for entry in response["topics"]:
            refused = entry["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if entry["name"] is not None and not refused:
                entry["topic_authorized_operations"] = authorized_operations(
                    ctx, RT.TOPIC, entry["name"]
                )
    if body.get("include_cluster_authorized_operations"):
        response["cluster_authorized_operations"] = (
            authorized_operations(ctx, RT.CLUSTER) if allowed(ctx, Op.DESCRIBE, RT.CLUSTER) else 0
        )
    return response
