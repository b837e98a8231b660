"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455, as
Kafka 3.9 in ZooKeeper mode answers them: the controller's (another broker answers
NOT_CONTROLLER for the whole request; clients send them to the controller). The
moves themselves: broker.cluster.reassignment.

Alter: each partition is started, replaced or (null replicas) cancelled on its own:
INVALID_REPLICA_ASSIGNMENT for an empty list, a broker twice or an added broker that
is not registered; UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist;
NO_REASSIGNMENT_IN_PROGRESS for a cancel of a partition not being moved. The answer
comes once the move is recorded in ZooKeeper, not when it completes. A partition
named twice counts once, with its last replica list (Kafka keeps a map).

List: the partitions asked about (null topics: all) that are being moved, with their
replicas, adding and removing replicas; the others are left out.

Authorization: altering needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED
at the top and for every partition), listing DESCRIBE on the cluster (else
CLUSTER_AUTHORIZATION_FAILED at the top).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles

_MESSAGES = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
}


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def alter_partition_reassignments(ctx, body):
    wanted = {
        (t["name"], p["partition_index"]): p["replicas"]
        for t in body["topics"]
        for p in t["partitions"]
    }
    if not allowed(ctx, Op.ALTER, RT.CLUSTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _alter_answer(code, dict.fromkeys(wanted, (code, _MESSAGES[code])))
    code, results = await ctx.core.cluster.alter_reassignments(wanted)
    return _alter_answer(code, results)


def _alter_answer(code: ErrorCode, results: dict) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), (code_of, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": p, "error_code": code_of, "error_message": message}
        )
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": _MESSAGES.get(code),
        "responses": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
def list_partition_reassignments(ctx, body):
    if not allowed(ctx, Op.DESCRIBE, RT.CLUSTER):
        return _list_answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {})
    wanted = None
    if body["topics"] is not None:
        wanted = [(t["name"], p) for t in body["topics"] for p in t["partition_indexes"]]
    code, found = ctx.core.cluster.list_reassignments(wanted)
    return _list_answer(code, found)


def _list_answer(code: ErrorCode, found: dict) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), (replicas, adding, removing) in found.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": p,
                "replicas": replicas,
                "adding_replicas": adding,
                "removing_replicas": removing,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": _MESSAGES.get(code),
        "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }
