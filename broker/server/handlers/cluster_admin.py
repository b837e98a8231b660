"""DescribeCluster, DescribeLogDirs and ElectLeaders: what `kafka-log-dirs`,
`kafka-leader-election` and admin UIs show and do about the brokers.

DescribeCluster lists the live brokers (as Metadata does: their endpoints of the
listener the request came in on), the controller, the cluster id and, when asked
for, the caller's authorized operations on the cluster (KIP-430). DescribeLogDirs answers for the one log
directory of this broker: the size of every hosted partition it was asked about
(null topics: all), its offset lag (how far its log end is behind the high
watermark: 0 on a leader) and, from v4, the directory's total and usable bytes.

ElectLeaders is the controller's, as in Kafka's ZooKeeper mode (another broker
answers NOT_CONTROLLER; clients send it to the controller): a preferred election
(v0, or election type 0) moves leadership to the first replica if it is live and in
the ISR, an unclean one (type 1) gives a partition without a live leader to its
first live replica (controller.py `elect`). A single node leads everything:
ELECTION_NOT_NEEDED.

Authorization: DescribeLogDirs needs DESCRIBE on the cluster, ElectLeaders ALTER
(CLUSTER_AUTHORIZATION_FAILED, at the top and for every partition asked about);
DescribeCluster needs nothing, as in Kafka.
"""

from __future__ import annotations

import os

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import NOT_REQUESTED, RT, Op, allowed, authorized_operations
from broker.server.dispatch import handles
from broker.server.handlers.metadata import live_brokers


@handles(ApiKey.DESCRIBE_CLUSTER)
def describe_cluster(ctx, body):
    """Any principal may ask (Kafka's handler checks nothing); the authorized
    operations, when asked for, need DESCRIBE on the cluster (else 0)."""
    core = ctx.core
    operations = NOT_REQUESTED
    if body.get("include_cluster_authorized_operations"):
        operations = 0
        if allowed(ctx, Op.DESCRIBE, RT.CLUSTER):
            operations = authorized_operations(ctx, RT.CLUSTER)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": core.cluster_id,
        "controller_id": core.cluster.active_controller_id(),
        "brokers": [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in live_brokers(core, ctx.listener)
        ],
        "cluster_authorized_operations": operations,
    }


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def describe_log_dirs(ctx, body):
    core = ctx.core
    if not allowed(ctx, Op.DESCRIBE, RT.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    wanted = None
    if body["topics"] is not None:
        wanted = {(t["topic"], p) for t in body["topics"] for p in t["partitions"]}
    topics: dict[str, list[dict]] = {}
    for key, part in sorted(core.replicas.partitions.items()):
        if wanted is not None and key not in wanted:
            continue
        topics.setdefault(key[0], []).append(
            {
                "partition_index": key[1],
                "partition_size": part.log.size_bytes,
                "offset_lag": max(0, part.high_watermark - part.log_end_offset),
                "is_future_key": False,
            }
        )
    disk = os.statvfs(core.data_dir)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "results": [
            {
                "error_code": ErrorCode.NONE,
                "log_dir": str(core.data_dir.resolve()),
                "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                "total_bytes": disk.f_blocks * disk.f_frsize,
                "usable_bytes": disk.f_bavail * disk.f_frsize,
            }
        ],
    }


_STRATEGY = {
    False: "PreferredReplicaPartitionLeaderElectionStrategy",
    True: "OfflinePartitionLeaderElectionStrategy",
}


@handles(ApiKey.ELECT_LEADERS)
async def elect_leaders(ctx, body):
    core = ctx.core
    unclean = ctx.api_version >= 1 and body["election_type"] == 1
    wanted = None
    if body["topic_partitions"] is not None:
        wanted = [(t["topic"], p) for t in body["topic_partitions"] for p in t["partitions"]]
    if not allowed(ctx, Op.ALTER, RT.CLUSTER):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _election_answer(refused, dict.fromkeys(wanted or (), refused), unclean)
    results = await core.cluster.elect_leaders(wanted, unclean)
    return _election_answer(ErrorCode.NONE, results, unclean)


def _election_answer(code: ErrorCode, results: dict, unclean: bool) -> dict:
    """The response: a top-level code (v1+) and one entry per partition."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), code_of in results.items():
        message = None
        if code_of in (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ):
            message = (
                f"Failed to elect leader for partition {topic}-{p} under strategy "
                f"{_STRATEGY[unclean]}"
            )
        by_topic.setdefault(topic, []).append(
            {"partition_id": p, "error_code": code_of, "error_message": message}
        )
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "replica_election_results": [
            {"topic": t, "partition_result": parts} for t, parts in by_topic.items()
        ],
    }
