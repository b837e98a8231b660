"""The one check handlers call before a request touches data.

`allowed(ctx, op, rtype, name)` asks the broker's authorizer whether the request's
principal, from its client host, may do `op` on the resource; with no authorizer
configured it is True at the cost of one attribute test. Handlers answer a refusal
with Kafka's code for the resource type (`DENIED`).
"""

from __future__ import annotations

from broker.protocol import ErrorCode
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType

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
