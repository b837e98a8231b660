"""ListOffsets and OffsetForLeaderEpoch.

ListOffsets timestamps: -1 = latest (the high watermark: what a consumer can read;
the last stable offset for isolation_level 1, read_committed, v2+),
-2 = earliest (the log start), >= 0 = the first record with a timestamp at or after
it (offset -1 when none). v0 answers in the old form, an array `old_style_offsets`
with one offset (Kafka's v0 "offsets before" list, reduced to its useful element).

OffsetForLeaderEpoch answers from the log's leader-epoch cache: the end offset of
the requested epoch (the log end for the current one), which followers and
KIP-320 clients use to detect divergent logs.

Authorization: DESCRIBE on the topic (TOPIC_AUTHORIZATION_FAILED). OffsetForLeaderEpoch
is also asked by followers: CLUSTER_ACTION on the cluster allows every topic, else
DESCRIBE on each, whoever asks (KIP-320 consumers use it too), and a refusal is
TOPIC_AUTHORIZATION_FAILED, as Kafka answers.
"""

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles

LATEST = -1
EARLIEST = -2


def _lookup(core, topic: str, index: int, current_epoch: int, refused: ErrorCode | None):
    if refused is not None:
        return None, refused
    partition = core.replicas.get_partition(topic, index)
    if partition is None:
        return None, core.replicas.missing_partition_error(topic, index)
    code = partition.check_leader_epoch(current_epoch)
    if code == ErrorCode.NONE and not partition.is_leader:
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    return partition, code


def _refused(ctx, topic: str) -> ErrorCode | None:
    """The code every partition of `topic` answers when the caller may not DESCRIBE
    it, else None."""
    ok = allowed(ctx, Op.DESCRIBE, RT.TOPIC, topic)
    return None if ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED


@handles(ApiKey.LIST_OFFSETS)
def list_offsets(ctx, body):
    version = ctx.api_version
    read_committed = body.get("isolation_level", 0) == 1
    topics = []
    for topic in body["topics"]:
        refused = _refused(ctx, topic["name"])
        parts = []
        for req in topic["partitions"]:
            index = req["partition_index"]
            resp = {
                "partition_index": index,
                "error_code": ErrorCode.NONE,
                "old_style_offsets": [],
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            partition, code = _lookup(
                ctx.core, topic["name"], index, req["current_leader_epoch"], refused
            )
            if code != ErrorCode.NONE:
                resp["error_code"] = code
                parts.append(resp)
                continue
            ts = req["timestamp"]
            visible = partition.last_stable_offset if read_committed else partition.high_watermark
            if ts == LATEST:
                offset = visible
            elif ts == EARLIEST:
                offset = partition.log_start_offset
            elif ts < 0:
                resp["error_code"] = ErrorCode.INVALID_REQUEST if version > 0 else ErrorCode.NONE
                offset = -1
            else:
                hit = partition.log.offset_for_timestamp(ts)
                offset, found_ts = hit if hit is not None else (-1, -1)
                if offset >= visible:
                    offset, found_ts = -1, -1
                resp["timestamp"] = found_ts
            resp["offset"] = offset
            resp["leader_epoch"] = partition.leader_epoch if offset >= 0 else -1
            if version == 0 and req["max_num_offsets"] > 0 and offset >= 0:
                resp["old_style_offsets"] = [offset]
            parts.append(resp)
        topics.append({"name": topic["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def offset_for_leader_epoch(ctx, body):
    topics = []
    broker = allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER)
    for topic in body["topics"]:
        refused = None if broker else _refused(ctx, topic["topic"])
        parts = []
        for req in topic["partitions"]:
            index = req["partition"]
            resp = {
                "error_code": ErrorCode.NONE,
                "partition": index,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            partition, code = _lookup(
                ctx.core, topic["topic"], index, req["current_leader_epoch"], refused
            )
            if code != ErrorCode.NONE:
                resp["error_code"] = code
            else:
                epoch, end = partition.log.leader_epoch_cache.end_offset_for(req["leader_epoch"])
                if epoch < 0 and req["leader_epoch"] == partition.leader_epoch:
                    epoch, end = partition.leader_epoch, partition.log_end_offset
                resp["leader_epoch"] = epoch
                resp["end_offset"] = end
            parts.append(resp)
        topics.append({"topic": topic["topic"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
