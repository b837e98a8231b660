"""The one check handlers call before a request touches data.

`allowed(ctx, op, rtype, name)` asks the broker's authorizer whether the request's
principal, from its client host, may do `op` on the resource; with no authorizer
configured it is True at the cost of one attribute test. Handlers answer a refusal
with Kafka's code for the resource type (`DENIED`). Which checks each API makes is
stated once, as data, in `broker.server.api_acls`.

`authorized_operations` fills KIP-430's fields (Metadata, DescribeGroups,
DescribeCluster); it asks the authorizer for the whole bit field at once, apart from
the per-request checks above.
"""

from __future__ import annotations

from broker.protocol import ErrorCode
from broker.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType

Op = Operation
RT = ResourceType

DENIED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def allowed(ctx, op: Operation, rtype: ResourceType, name: str = CLUSTER_NAME) -> bool:
    authorizer = ctx.core.authorizer
    return authorizer is None or authorizer.authorize(
        ctx.principal, ctx.client_host, op, rtype, name
    )


def allowed_on_some(ctx, op: Operation, rtype: ResourceType) -> bool:
    """`op` on at least one resource of `rtype` (Kafka's authorizeByResourceType)."""
    authorizer = ctx.core.authorizer
    return authorizer is None or authorizer.authorize_any(ctx.principal, ctx.client_host, op, rtype)


def may_create_topic(ctx, name: str) -> bool:
    """CREATE on the cluster or on the topic (CreateTopics, auto-creation)."""
    return allowed(ctx, Op.CREATE, RT.CLUSTER) or allowed(ctx, Op.CREATE, RT.TOPIC, name)


def may_auto_create(ctx, name: str) -> bool:
    """Whether a request may have topic `name` created on first use: CREATE as above
    when the topic is missing and auto-creation is on (else nothing is created, and
    nothing needs checking)."""
    core = ctx.core
    if core.authorizer is None or core.replicas.topic(name) is not None:
        return True
    return not core.config["auto.create.topics.enable"] or may_create_topic(ctx, name)


# The value of an authorized-operations field that was not asked for (INT32_MIN).
NOT_REQUESTED = -(2**31)


def authorized_operations(ctx, rtype: ResourceType, name: str = CLUSTER_NAME) -> int:
    """KIP-430's bit field for the request's principal on rtype/name; with no
    authorizer every supported operation, as Kafka answers."""
    authorizer = ctx.core.authorizer
    if authorizer is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype])
    return authorizer.operations(ctx.principal, ctx.client_host, rtype, name)
