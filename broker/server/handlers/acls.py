"""DescribeAcls, CreateAcls, DeleteAcls (kafka-acls, AdminClient *_acls).

Without an authorizer every answer is SECURITY_DISABLED. Describing needs DESCRIBE
on the cluster, creating and deleting ALTER (CLUSTER_AUTHORIZATION_FAILED else). A
filter or a binding with an unknown or unusable code is INVALID_REQUEST for that
entry only; the others go ahead, as in Kafka.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.security.acl import (
    AclBinding,
    AclFilter,
    Entry,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    binding_invalid,
)
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles


class _Invalid(ValueError):
    pass


def _enum(cls, value: int):
    try:
        return cls(value)
    except ValueError:
        raise _Invalid(f"unknown {cls.__name__} {value}") from None


def _to_filter(f: dict) -> AclFilter:
    return AclFilter(
        rtype=_enum(ResourceType, f["resource_type_filter"]),
        name=f["resource_name_filter"],
        pattern=_enum(PatternType, f["pattern_type_filter"]),
        principal=f["principal_filter"],
        host=f["host_filter"],
        operation=_enum(Operation, f["operation"]),
        permission=_enum(Permission, f["permission_type"]),
    )


def _to_binding(c: dict) -> AclBinding:
    b = AclBinding(
        Resource(
            _enum(ResourceType, c["resource_type"]),
            c["resource_name"],
            _enum(PatternType, c["resource_pattern_type"]),
        ),
        Entry(
            c["principal"],
            c["host"],
            _enum(Operation, c["operation"]),
            _enum(Permission, c["permission_type"]),
        ),
    )
    why = binding_invalid(b)
    if why is not None:
        raise _Invalid(why)
    return b


def _refusal(ctx, op: Operation) -> tuple[ErrorCode, str | None] | None:
    if ctx.core.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, "no authorizer is configured on the broker"
    if not allowed(ctx, op, RT.CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return None


@handles(ApiKey.DESCRIBE_ACLS)
def describe_acls(ctx, body):
    response: dict[str, object] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "resources": [],
    }
    refusal = _refusal(ctx, Op.DESCRIBE)
    if refusal is None:
        try:
            f = _to_filter(body)
        except _Invalid as e:
            refusal = ErrorCode.INVALID_REQUEST, str(e)
    if refusal is not None:
        response["error_code"], response["error_message"] = refusal
        return response
    by_resource: dict[Resource, list[Entry]] = {}
    for b in ctx.core.authorizer.describe(f):
        by_resource.setdefault(b.resource, []).append(b.entry)
    response["resources"] = [
        {
            "resource_type": r.type,
            "resource_name": r.name,
            "pattern_type": r.pattern,
            "acls": [
                {
                    "principal": e.principal,
                    "host": e.host,
                    "operation": e.operation,
                    "permission_type": e.permission,
                }
                for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))
            ],
        }
        for r, entries in sorted(by_resource.items(), key=lambda kv: (kv[0].type, kv[0].name))
    ]
    return response


@handles(ApiKey.CREATE_ACLS)
async def create_acls(ctx, body):
    refusal = _refusal(ctx, Op.ALTER)
    results = []
    good = []
    for c in body["creations"]:
        if refusal is not None:
            results.append({"error_code": refusal[0], "error_message": refusal[1]})
            continue
        try:
            good.append(_to_binding(c))
            results.append({"error_code": ErrorCode.NONE, "error_message": None})
        except _Invalid as e:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
    if good:
        await ctx.core.authorizer.create(good)
    return {"throttle_time_ms": 0, "results": results}


@handles(ApiKey.DELETE_ACLS)
async def delete_acls(ctx, body):
    refusal = _refusal(ctx, Op.ALTER)
    results = []
    for item in body["filters"]:
        matching: list[dict[str, object]] = []
        result: dict[str, object] = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "matching_acls": matching,
        }
        results.append(result)
        if refusal is not None:
            result["error_code"], result["error_message"] = refusal
            continue
        try:
            f = _to_filter(item)
        except _Invalid as e:
            result["error_code"], result["error_message"] = ErrorCode.INVALID_REQUEST, str(e)
            continue
        for b in await ctx.core.authorizer.delete(f):
            matching.append(
                {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "resource_type": b.resource.type,
                    "resource_name": b.resource.name,
                    "pattern_type": b.resource.pattern,
                    "principal": b.entry.principal,
                    "host": b.entry.host,
                    "operation": b.entry.operation,
                    "permission_type": b.entry.permission,
                }
            )
    return {"throttle_time_ms": 0, "filter_results": results}
