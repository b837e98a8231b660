"""Metadata: brokers, controller, cluster id and topic/partition leadership.

Version quirks (see reference/kafka-protocol.md): v0 sends an empty topic list to
mean "all topics"; v1+ uses null for all and empty for none. Requested topics that
do not exist are created when `auto.create.topics.enable` is on and (v4+) the client
allows it; the single node creates them synchronously, so the answer already
carries their partitions.
"""

from broker.cluster.names import is_internal
from broker.protocol import ApiKey, ErrorCode
from broker.server.dispatch import handles


def topic_entry(core, name: str) -> dict:
    meta = core.replicas.topic(name)
    partitions = []
    for index in range(meta.partitions):
        p = core.replicas.get_partition(name, index)
        partitions.append(
            {
                "error_code": ErrorCode.NONE,
                "partition_index": index,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": sorted(p.isr),
                "offline_replicas": [],
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": is_internal(name),
        "partitions": partitions,
    }


@handles(ApiKey.METADATA)
def metadata(ctx, body):
    core = ctx.core
    version = ctx.api_version
    requested = body["topics"]
    if requested is None or (version == 0 and not requested):
        names = sorted(core.replicas.topics())
        topics = [topic_entry(core, n) for n in names]
    else:
        allow_create = version < 4 or body["allow_auto_topic_creation"]
        topics = []
        for item in requested:
            name = item["name"]
            if core.replicas.topic(name) is None:
                code = core.replicas.auto_create(name) if allow_create else None
                if code is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if code != ErrorCode.NONE:
                    topics.append(
                        {"error_code": code, "name": name, "is_internal": False, "partitions": []}
                    )
                    continue
            topics.append(topic_entry(core, name))
    host, port = core.advertised
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": core.broker_id, "host": host, "port": port, "rack": None}],
        "cluster_id": core.cluster_id,
        "controller_id": core.broker_id,
        "topics": topics,
    }
