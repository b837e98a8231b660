"""Stand-ins for APIs whose real handlers live in other areas (consumer groups,
idempotent producer). Registered with `fallback=True`: a module that registers the
same api keys normally replaces them. Each answers with COORDINATOR_NOT_AVAILABLE in
the response's error fields, a retriable error, so clients back off and retry
instead of seeing their connection closed.
"""

from broker.protocol import ApiKey, ErrorCode
from broker.server.dispatch import handles

_UNAVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE


@handles(ApiKey.FIND_COORDINATOR, fallback=True)
def find_coordinator(ctx, body):
    return {
        "error_code": _UNAVAILABLE,
        "error_message": "group coordinator not available",
        "node_id": -1,
        "host": "",
        "port": -1,
    }


@handles(
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.LIST_GROUPS,
    ApiKey.INIT_PRODUCER_ID,
    fallback=True,
)
def plain_error(ctx, body):
    return {"error_code": _UNAVAILABLE}


@handles(ApiKey.OFFSET_COMMIT, fallback=True)
def offset_commit(ctx, body):
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": _UNAVAILABLE}
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }


@handles(ApiKey.OFFSET_FETCH, fallback=True)
def offset_fetch(ctx, body):
    return {
        "error_code": _UNAVAILABLE,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": i,
                        "committed_offset": -1,
                        "metadata": None,
                        "error_code": _UNAVAILABLE,
                    }
                    for i in t["partition_indexes"]
                ],
            }
            for t in body["topics"] or []
        ],
    }


@handles(ApiKey.DESCRIBE_GROUPS, fallback=True)
def describe_groups(ctx, body):
    return {
        "groups": [
            {"error_code": _UNAVAILABLE, "group_id": g, "group_state": "", "protocol_type": ""}
            for g in body["groups"]
        ]
    }
