"""Consumer-group APIs: FindCoordinator, Join/Sync/Heartbeat/LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete, all answered
by `broker.groups`.

(Just over the ~450 lines modules keep to: ~50 of them are this docstring, which
records every version detail and authorization rule of eleven APIs.)

The `GroupCoordinator` is `core.groups` (built by the composition root,
broker/server/core.py). Its state is the compacted internal topic
`__consumer_offsets`, created on the first FindCoordinator as Kafka does (so brokers
that never see a group carry no such topic), with `offsets.topic.num.partitions`
partitions. A broker coordinates the groups of the partitions it leads (a single
node leads them all), loaded as it becomes their leader
(broker/server/coordinators.py); FindCoordinator points at the leader of the
group's partition. FindCoordinator for key type 1 (transactional ids) points at the
leader of the id's `__transaction_state` partition (handlers/transactions.py creates
that topic).
OffsetFetch `require_stable` reports offsets still pending in a transaction
(handlers/txn_markers.py, broker/groups/txn_offsets.py) as UNSTABLE_OFFSET_COMMIT.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup for a consumer group (KIP-848) are
served for its classic members (broker/groups/consumer/classic.py). For a share
group's id, JoinGroup, SyncGroup, Heartbeat and OffsetCommit are refused as Kafka 4.1
refuses them (`_is_share_group`).

Version details handled here: OffsetCommit v9 and OffsetFetch v9 carry a
consumer-protocol member's epoch (checked by broker/groups/consumer/; such a member
must commit with v9+); DescribeGroups v6 answers GROUP_ID_NOT_FOUND with a message for an unknown group or
one of another type (KIP-1043; before: Dead); ListGroups v5 filters and answers group types (classic,
consumer: handlers/consumer_groups.py serves the consumer protocol's own APIs);
JoinGroup v0 has no rebalance timeout (the session timeout is used), v4+ requires a
known member id (KIP-394); LeaveGroup v0-2 carries one member and reports its error
at the top level; OffsetCommit v0 and commits with
generation -1 come from simple consumers; `retention_time_ms` (v2-4) is ignored as
in Kafka 2.1+ (retention follows offsets.retention.minutes); OffsetFetch v2+ null
topics means every committed partition; client hosts are shown as "/<ip>" like Kafka.

Authorization follows KafkaApis: FindCoordinator DESCRIBE on the group (or the
transactional id); Join/Sync/Heartbeat/LeaveGroup and OffsetCommit READ on the group;
OffsetFetch and DescribeGroups DESCRIBE on it; DeleteGroups and OffsetDelete DELETE
(GROUP_AUTHORIZATION_FAILED); a refused partition of an OffsetCommit stores nothing.
DescribeGroups v3+ fills each described group's authorized operations when asked. Offsets of a topic need READ (commit, delete) or
DESCRIBE (fetch) on it (TOPIC_AUTHORIZATION_FAILED; an all-partitions OffsetFetch
leaves such topics out). ListGroups lists every group with DESCRIBE on the cluster,
else those the caller may DESCRIBE.
"""

from __future__ import annotations

import logging
import time

from broker.cluster.replica_manager import TopicError
from broker.groups.coordinator import GroupCoordinator
from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import NOT_REQUESTED, RT, Op, allowed, authorized_operations
from broker.server.coordinators import load_offsets_partitions
from broker.server.dispatch import handles
from broker.server.handlers import transactions
from common.topic_names import CONSUMER_OFFSETS, TRANSACTION_STATE

log = logging.getLogger(__name__)

_GROUP_KEY_TYPE = 0
_DEAD = "Dead"  # how DescribeGroups before v6 describes a group it does not have
_TXN_KEY_TYPE = 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ensure_offsets_topic(core) -> ErrorCode:
    coordinator = core.groups
    if core.replicas.topic(CONSUMER_OFFSETS) is None:
        cfg = core.config
        try:
            core.topic_admin.create_topic(
                CONSUMER_OFFSETS,
                coordinator.config.num_partitions,
                cfg["offsets.topic.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                    "compression.type": "producer",
                },
            )
        except TopicError as e:
            log.error("cannot create %s: %s", CONSUMER_OFFSETS, e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if core.replicas.topic(CONSUMER_OFFSETS) is None:  # cluster mode: created in the background
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
    load_offsets_partitions(core.replicas, coordinator)
    return ErrorCode.NONE


def _coordinator(ctx) -> GroupCoordinator:
    return ctx.core.groups


def _group_denied(ctx, op: Op, group_id: str) -> bool:
    return not allowed(ctx, op, RT.GROUP, group_id)


_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def _is_share_group(ctx, group_id: str) -> bool:
    """A share group coordinated here: Kafka refuses the classic protocol's requests
    for its id (JoinGroup INCONSISTENT_GROUP_PROTOCOL, SyncGroup and Heartbeat
    UNKNOWN_MEMBER_ID, OffsetCommit GROUP_ID_NOT_FOUND)."""
    return group_id in ctx.core.shares.groups


@handles(ApiKey.FIND_COORDINATOR)
def find_coordinator(ctx, body):
    """v0-3 ask for one key; v4+ for a list (`coordinator_keys`), answered per key."""
    if ctx.api_version >= 4:
        return {
            "throttle_time_ms": 0,
            "coordinators": [
                {"key": key} | _coordinator_of(ctx, key, body["key_type"])
                for key in body["coordinator_keys"]
            ],
        }
    return {"throttle_time_ms": 0} | _coordinator_of(ctx, body["key"], body["key_type"])


def _coordinator_of(ctx, key: str, key_type: int) -> dict:
    core = ctx.core
    none = {"node_id": -1, "host": "", "port": -1}
    if key_type not in (_GROUP_KEY_TYPE, _TXN_KEY_TYPE):
        code, message = ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}"
    elif key_type == _GROUP_KEY_TYPE and _group_denied(ctx, Op.DESCRIBE, key):
        code, message = _GROUP_DENIED, None
    elif key_type == _TXN_KEY_TYPE and not allowed(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, key):
        code, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    elif key_type == _TXN_KEY_TYPE:
        code, message = transactions.ensure_txn_topic(core), None
    else:
        code, message = _ensure_offsets_topic(core), None
    if code != ErrorCode.NONE:
        return {"error_code": code, "error_message": message} | none
    if key_type == _TXN_KEY_TYPE:
        topic, index = TRANSACTION_STATE, transactions.coordinator_partition(core, key)
    else:
        topic, index = CONSUMER_OFFSETS, _coordinator(ctx).partition_for(key)
    leader = core.cluster.leader_of(topic, index)
    info = core.cluster.brokers.get(leader)
    address = info.endpoints.get(ctx.listener) if info is not None else None
    if address is None:
        why = "has no leader yet" if info is None else f"leader has no {ctx.listener} listener"
        return {
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "error_message": f"the coordinator's partition {why}",
        } | none
    found = {"error_code": ErrorCode.NONE, "error_message": None}
    return found | {"node_id": leader, "host": address[0], "port": address[1]}


@handles(ApiKey.JOIN_GROUP)
async def join_group(ctx, body):
    version = ctx.api_version
    if _group_denied(ctx, Op.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": _GROUP_DENIED, "generation_id": -1}
    if _is_share_group(ctx, body["group_id"]):
        code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return {"throttle_time_ms": 0, "error_code": code, "generation_id": -1, "member_id": ""}
    session = body["session_timeout_ms"]
    rebalance = body.get("rebalance_timeout_ms", -1) if version >= 1 else -1
    r = await _coordinator(ctx).join_group(
        body["group_id"],
        body["member_id"],
        body.get("group_instance_id"),
        ctx.header.client_id or "",
        "/" + ctx.client_host,
        session,
        rebalance if rebalance >= 0 else session,
        body["protocol_type"],
        [(p["name"], p["metadata"]) for p in body["protocols"]],
        version >= 4,
        _now_ms(),
    )
    return {
        "throttle_time_ms": 0,
        "error_code": r.error,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name if version >= 7 else r.protocol_name or "",
        "leader": r.leader,
        "member_id": r.member_id,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in r.members
        ],
    }


@handles(ApiKey.SYNC_GROUP)
async def sync_group(ctx, body):
    if _group_denied(ctx, Op.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": _GROUP_DENIED, "assignment": b""}
    if _is_share_group(ctx, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_MEMBER_ID, "assignment": b""}
    r = await _coordinator(ctx).sync_group(
        body["group_id"],
        body["member_id"],
        body.get("group_instance_id"),
        body["generation_id"],
        {a["member_id"]: a["assignment"] for a in body["assignments"]},
        _now_ms(),
        body.get("protocol_type"),
        body.get("protocol_name"),
    )
    return {
        "throttle_time_ms": 0,
        "error_code": r.error,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignment": r.assignment,
    }


@handles(ApiKey.HEARTBEAT)
def heartbeat(ctx, body):
    if _group_denied(ctx, Op.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": _GROUP_DENIED}
    if _is_share_group(ctx, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_MEMBER_ID}
    code = _coordinator(ctx).heartbeat(
        body["group_id"],
        body["member_id"],
        body.get("group_instance_id"),
        body["generation_id"],
        _now_ms(),
    )
    return {"throttle_time_ms": 0, "error_code": code}


@handles(ApiKey.LEAVE_GROUP)
async def leave_group(ctx, body):
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(body["member_id"], None)]
    else:
        members = [(m["member_id"], m["group_instance_id"]) for m in body["members"]]
    if _group_denied(ctx, Op.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": _GROUP_DENIED, "members": []}
    top, results = await _coordinator(ctx).leave_group(body["group_id"], members, _now_ms())
    if ctx.api_version < 3:
        return {"throttle_time_ms": 0, "error_code": top or (results[0] if results else top)}
    return {
        "throttle_time_ms": 0,
        "error_code": top,
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": code}
            for (m, i), code in zip(members, results, strict=False)
        ],
    }


def _partition_exists(core, topic: str, index: int) -> bool:
    meta = core.replicas.topic(topic)
    return meta is not None and 0 <= index < len(meta.assignments)


@handles(ApiKey.OFFSET_COMMIT)
async def offset_commit(ctx, body):
    """Commits for partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and
    store nothing (Kafka checks its metadata cache before the coordinator sees them)."""
    offsets = {}
    unknown = {}
    group_denied = _group_denied(ctx, Op.READ, body["group_id"])
    share_group = not group_denied and _is_share_group(ctx, body["group_id"])
    for t in body["topics"]:
        topic_denied = not group_denied and not allowed(ctx, Op.READ, RT.TOPIC, t["name"])
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            if group_denied or topic_denied:
                unknown[tp] = (
                    _GROUP_DENIED if group_denied else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                continue
            if not _partition_exists(ctx.core, *tp):
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if share_group:
                unknown[tp] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            offsets[tp] = (
                p["committed_offset"],
                p.get("committed_leader_epoch", -1),
                p["committed_metadata"],
            )
    generation = body.get("generation_id_or_member_epoch", -1) if ctx.api_version >= 1 else -1
    results = unknown
    if offsets:
        results |= await _coordinator(ctx).commit_offsets(
            body["group_id"],
            body.get("member_id", "") if ctx.api_version >= 1 else "",
            body.get("group_instance_id"),
            generation,
            offsets,
            _now_ms(),
            ctx.api_version,
        )
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": results[(t["name"], p["partition_index"])],
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ],
    }


@handles(ApiKey.OFFSET_FETCH)
def offset_fetch(ctx, body):
    """v0-7 ask for one group; v8+ for several (`groups`), answered per group. With
    `require_stable` (v7+) a partition whose offset is still pending in a transaction
    answers UNSTABLE_OFFSET_COMMIT (the client retries)."""
    stable = bool(body.get("require_stable"))
    if ctx.api_version >= 8:
        groups = []
        for group in body["groups"]:
            member = (group.get("member_id"), group.get("member_epoch", -1))
            code, topics = _group_offsets(ctx, group["group_id"], group["topics"], stable, member)
            groups.append({"group_id": group["group_id"], "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": groups}
    code, topics = _group_offsets(ctx, body["group_id"], body["topics"], stable)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": code}


def _group_offsets(
    ctx,
    group_id: str,
    requested: list | None,
    require_stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, list]:
    """`member` (v9): the member id and epoch of a consumer-protocol member, checked
    against its group (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
    if _group_denied(ctx, Op.DESCRIBE, group_id):
        return _GROUP_DENIED, []
    wanted = None
    if requested is not None:
        wanted = [(t["name"], i) for t in requested for i in t["partition_indexes"]]
    coordinator = _coordinator(ctx)
    code, offsets = coordinator.fetch_offsets(group_id, wanted, *member)
    unstable = set()
    if require_stable and not code:
        unstable = coordinator.unstable(group_id, wanted if wanted is not None else offsets)
    topics: dict[str, list] = {}
    may: dict[str, bool] = {}
    for tp in wanted if wanted is not None else sorted(offsets):
        if tp[0] not in may:
            may[tp[0]] = allowed(ctx, Op.DESCRIBE, RT.TOPIC, tp[0])
        if not may[tp[0]]:
            if wanted is not None:
                topics.setdefault(tp[0], []).append(
                    {
                        "partition_index": tp[1],
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    }
                )
            continue
        v = offsets.get(tp)
        if tp in unstable:
            topics.setdefault(tp[0], []).append(
                {
                    "partition_index": tp[1],
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT,
                }
            )
            continue
        topics.setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "committed_offset": v.offset if v is not None and not code else -1,
                "committed_leader_epoch": v.leader_epoch if v is not None and not code else -1,
                "metadata": v.metadata if v is not None and not code else "",
                "error_code": code,
            }
        )
    return code, [{"name": name, "partitions": parts} for name, parts in topics.items()]


@handles(ApiKey.DESCRIBE_GROUPS)
def describe_groups(ctx, body):
    groups = []
    for group_id in body["groups"]:
        if _group_denied(ctx, Op.DESCRIBE, group_id):
            groups.append({"error_code": _GROUP_DENIED, "group_id": group_id, "members": []})
            continue
        code, s = _coordinator(ctx).describe_group(group_id)
        message = None
        if ctx.api_version >= 6 and code == ErrorCode.NONE and s.state == _DEAD:
            other = _is_share_group(ctx, group_id) or ctx.core.groups.consumer_group(group_id)
            code = ErrorCode.GROUP_ID_NOT_FOUND
            message = f"Group {group_id} {'is not a classic group' if other else 'not found'}."
        groups.append(
            {
                "error_code": code,
                "error_message": message,
                "group_id": group_id,
                "group_state": s.state,
                "protocol_type": s.protocol_type,
                "protocol_data": s.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in s.members
                ],
                "authorized_operations": authorized_operations(ctx, RT.GROUP, group_id)
                if body.get("include_authorized_operations")
                else NOT_REQUESTED,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}


@handles(ApiKey.LIST_GROUPS)
def list_groups(ctx, body):
    """v4+ may filter by state, v5+ by type ("classic", "consumer", "share"), both
    case-insensitive as Kafka; v4+ answers each state, v5+ each type. Share groups
    (broker/share/) are listed beside the others, protocol type "share" as Kafka's."""
    wanted = {state.lower() for state in body["states_filter"]}
    types = {kind.lower() for kind in body["types_filter"]}
    every = allowed(ctx, Op.DESCRIBE, RT.CLUSTER)
    listed = list(_coordinator(ctx).list_groups())
    listed += [(g.group_id, "share", g.state, "share") for g in ctx.core.shares.list_groups()]
    groups = [
        {"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": kind}
        for gid, ptype, state, kind in listed
        if (not wanted or state.lower() in wanted)
        and (not types or kind in types)
        and (every or not _group_denied(ctx, Op.DESCRIBE, gid))
    ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}


@handles(ApiKey.DELETE_GROUPS)
async def delete_groups(ctx, body):
    """Only an Empty group (no members) can be deleted: its offsets go with it, a
    share group's durable state too (DeleteShareGroupState to its share coordinators)."""
    results = []
    for group_id in body["groups_names"]:
        if _group_denied(ctx, Op.DELETE, group_id):
            code = _GROUP_DENIED
        elif group_id in ctx.core.shares.groups:
            code = await ctx.core.shares.delete_group(group_id)
        else:
            code = await _coordinator(ctx).delete_group(group_id, _now_ms())
        results.append({"group_id": group_id, "error_code": code})
    return {"throttle_time_ms": 0, "results": results}


@handles(ApiKey.OFFSET_DELETE)
async def offset_delete(ctx, body):
    """Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION (Kafka checks its
    metadata first); the others are the coordinator's (see Offsets.delete_offsets)."""
    if _group_denied(ctx, Op.DELETE, body["group_id"]):
        return {"error_code": _GROUP_DENIED, "throttle_time_ms": 0, "topics": []}
    known, unknown = [], {}
    for t in body["topics"]:
        topic_ok = allowed(ctx, Op.READ, RT.TOPIC, t["name"])
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            if not topic_ok:
                unknown[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif _partition_exists(ctx.core, *tp):
                known.append(tp)
            else:
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    top, results = await _coordinator(ctx).delete_offsets(body["group_id"], known, _now_ms())
    topics = []
    if not top:
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                tp = (t["name"], p["partition_index"])
                code = unknown[tp] if tp in unknown else results[tp]
                partitions.append({"partition_index": tp[1], "error_code": code})
            topics.append({"name": t["name"], "partitions": partitions})
    return {"error_code": top, "throttle_time_ms": 0, "topics": topics}
