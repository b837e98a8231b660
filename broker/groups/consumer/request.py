"""ConsumerGroupHeartbeat's request and answer as the coordinator sees them, and the
checks Kafka makes before anything changes: the request's shape
(throwIfConsumerGroupHeartbeatRequestIsInvalid) and the member's epoch
(throwIfConsumerGroupMemberEpochIsInvalid). Pure."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Collection, Mapping

from broker.groups.consumer import regex as rx
from broker.groups.consumer.group import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerMember
from broker.protocol.errors import ApiError, ErrorCode

TopicId = uuid.UUID


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[TopicId, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Mapping[TopicId, frozenset[int]] | None = None


def new_member_id() -> str:
    """A random id as Kafka's Uuid.toString(): URL-safe base64 of 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def validate(r: HeartbeatRequest, assignors: Collection[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    if not r.group_id:
        raise _invalid("GroupId can't be empty.")
    if r.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if r.rack_id == "":
        raise _invalid("RackId can't be empty.")
    if r.api_version >= 1 and not r.member_id:
        raise _invalid("MemberId can't be empty.")
    if r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH:
        if not r.member_id:
            raise _invalid("MemberId can't be empty.")
    elif r.member_epoch == 0:
        if r.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or any(r.owned.values()):
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
            raise _invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif r.member_epoch == STATIC_LEAVE_EPOCH:
        if not r.member_id:
            raise _invalid("MemberId can't be empty.")
        if r.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid("MemberEpoch is invalid.")
    if r.subscribed_topic_regex:
        rx.check(r.subscribed_topic_regex)
    if r.server_assignor is not None and r.server_assignor not in assignors:
        raise ApiError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
            + ", ".join(assignors)
            + ".",
        )


def check_epoch(member: ConsumerMember, r: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the member's epoch, or its
    previous one when it owns a subset of its assignment (the response that bumped
    it may have been lost)."""
    current = member.epoch
    if r.member_epoch > current:
        raise ApiError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({r.member_epoch}) than "
            f"the one known by the group coordinator ({current}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if r.member_epoch < current:
        assigned = member.assignment.assigned
        subset = r.owned is not None and all(
            ps <= assigned.get(t, frozenset()) for t, ps in r.owned.items()
        )
        if r.member_epoch != member.assignment.previous_member_epoch or not subset:
            raise ApiError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({r.member_epoch}) "
                f"than the one known by the group coordinator ({current}). The member must "
                "abandon all its partitions and rejoin.",
            )
