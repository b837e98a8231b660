"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat (v0-1) and
ConsumerGroupDescribe (v0-1; v1 tells each member's type, classic or consumer,
KIP-1099), answered by the group coordinator's ConsumerGroups
(broker/groups/consumer/).

The client finds the coordinator with FindCoordinator as for a classic group; a
broker that does not coordinate the group answers NOT_COORDINATOR. Topic ids in
assignments are the ids Metadata v10+ shows. Authorization follows KafkaApis:
ConsumerGroupHeartbeat needs READ on the group and, for the subscribed topic names,
DESCRIBE on each (TOPIC_AUTHORIZATION_FAILED naming them); ConsumerGroupDescribe
needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and fills the authorized
operations when asked. A group id that is a classic or share group is described as
GROUP_ID_NOT_FOUND ("... is not a consumer group"), as Kafka does, and a heartbeat
for a share group's id is refused so.
"""

from __future__ import annotations

import time
import uuid

from broker.groups.consumer.heartbeat import HeartbeatRequest
from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import NOT_REQUESTED, RT, Op, allowed, authorized_operations
from broker.server.dispatch import handles

# ConsumerGroupDescribe v1's MemberType (KIP-1099): a classic member of a consumer
# group, or a member of the consumer protocol
_CLASSIC_MEMBER, _CONSUMER_MEMBER = 0, 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _owned(items: list | None) -> dict[uuid.UUID, frozenset[int]] | None:
    if items is None:
        return None
    owned: dict[uuid.UUID, frozenset[int]] = {}
    for t in items:
        owned[t["topic_id"]] = owned.get(t["topic_id"], frozenset()) | frozenset(t["partitions"])
    return owned


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT)
async def consumer_group_heartbeat(ctx, body):
    def error(code: ErrorCode, message: str | None = None) -> dict:
        """Kafka's answer to a refused heartbeat: the defaults but the error."""
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": message,
            "member_id": None,
            "member_epoch": 0,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    group_id = body["group_id"]
    if not allowed(ctx, Op.READ, RT.GROUP, group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = body["subscribed_topic_names"]
    if names:
        denied = sorted(n for n in set(names) if not allowed(ctx, Op.DESCRIBE, RT.TOPIC, n))
        if denied:
            return error(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "The following topics are unauthorized: " + ", ".join(denied),
            )
    if group_id in ctx.core.shares.groups:
        return error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
    r = await ctx.core.groups.consumer.heartbeat(
        HeartbeatRequest(
            group_id=group_id,
            member_id=body["member_id"],
            member_epoch=body["member_epoch"],
            instance_id=body["instance_id"],
            rack_id=body["rack_id"],
            rebalance_timeout_ms=body["rebalance_timeout_ms"],
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=body.get("subscribed_topic_regex"),
            server_assignor=body["server_assignor"],
            owned=_owned(body["topic_partitions"]),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.client_host,
            api_version=ctx.api_version,
        ),
        _now_ms(),
    )
    if r.error:
        return error(r.error, r.message)
    assignment = None
    if r.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": t, "partitions": sorted(ps)}
                for t, ps in sorted(r.assignment.items(), key=lambda i: str(i[0]))
            ]
        }
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "heartbeat_interval_ms": r.heartbeat_interval_ms,
        "assignment": assignment,
    }


def _described(assignment, names: dict[uuid.UUID, str]) -> dict:
    return {
        "topic_partitions": [
            {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
            for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
        ]
    }


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE)
def consumer_group_describe(ctx, body):
    coordinator = ctx.core.groups
    names = coordinator.consumer.names_of()
    groups = []
    for group_id in body["group_ids"]:
        entry = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
            "authorized_operations": NOT_REQUESTED,
        }
        groups.append(entry)
        if not allowed(ctx, Op.DESCRIBE, RT.GROUP, group_id):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        code = coordinator.partition_error(group_id)
        group = coordinator.consumer_group(group_id)
        if code:
            entry["error_code"] = code
            continue
        if group is None:
            other = group_id in ctx.core.shares.groups or group_id in coordinator.groups
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = (
                f"Group {group_id} is not a consumer group"
                if other
                else f"Group {group_id} not found."
            )
            continue
        entry |= {
            "group_state": group.state,
            "group_epoch": group.epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor_name,
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_names),
                    "subscribed_topic_regex": m.subscribed_regex,
                    "assignment": _described(m.assignment.assigned, names),
                    "target_assignment": _described(group.target.get(m.member_id, {}), names),
                    "member_type": _CLASSIC_MEMBER if m.classic is not None else _CONSUMER_MEMBER,
                }
                for m in group.members.values()
            ],
        }
        if body["include_authorized_operations"]:
            entry["authorized_operations"] = authorized_operations(ctx, RT.GROUP, group_id)
    return {"throttle_time_ms": 0, "groups": groups}
