"""Kafka's ACL model and AclAuthorizer's decision, pure.

An `AclBinding` = a resource pattern (type, name, LITERAL or PREFIXED) + an entry
(principal, host, operation, ALLOW/DENY). Codes are Kafka's wire values
(org.apache.kafka.common.acl / resource), so bindings cross the wire unchanged.

`decide` is AclAuthorizer's rule: a super user is allowed; otherwise among the
bindings whose pattern matches the resource (literal name equal, literal `*`, or a
prefix of the name) and whose principal (exact or `User:*`) and host (exact or `*`)
match, any DENY of the operation (or ALL) denies; any ALLOW of the operation, of
ALL, or of an operation that implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE,
ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows; with no binding on the resource at
all `allow.everyone.if.no.acl.found` decides; else deny.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from enum import IntEnum

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"

# The operations each resource type knows (Kafka's AclEntry.supportedOperations):
# what an ACL of the type may name, and what KIP-430's authorized-operations bit
# fields are computed over.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
}

# An ALLOW of the key also allows these (Kafka's AclOperation implications).
_IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    type: ResourceType
    name: str
    pattern: PatternType = PatternType.LITERAL

    def matches(self, name: str) -> bool:
        """Whether this stored (LITERAL or PREFIXED) pattern covers resource `name`."""
        if self.pattern == PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return name.startswith(self.name)


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


Entries = frozenset[Entry]  # one resource's entries, as the ACL stores hold them


@dataclasses.dataclass(frozen=True, slots=True)
class AclBinding:
    resource: Resource
    entry: Entry


def _entry_applies(e: Entry, principal: str, host: str) -> bool:
    return (e.principal == principal or e.principal == WILDCARD_PRINCIPAL) and (
        e.host == host or e.host == WILDCARD
    )


def decide(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    rtype: ResourceType,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    """AclAuthorizer's answer for `principal`@`host` doing `operation` on rtype/name."""
    if principal in super_users:
        return True
    allowing = (operation, Operation.ALL, *_IMPLIED_BY.get(operation, ()))
    any_on_resource = allowed = False
    for b in bindings:
        if b.resource.type != rtype or not b.resource.matches(name):
            continue
        any_on_resource = True
        e = b.entry
        if not _entry_applies(e, principal, host):
            continue
        if e.permission == Permission.DENY:
            if e.operation in (operation, Operation.ALL):
                return False
        elif e.operation in allowing:
            allowed = True
    if allowed:
        return True
    return allow_if_no_acl and not any_on_resource


def _covers(deny: Resource, allow: Resource) -> bool:
    """Whether a DENY on `deny` applies to every name an ALLOW on `allow` covers."""
    if deny.pattern == PatternType.LITERAL:
        return deny.name == WILDCARD or (allow.pattern == deny.pattern and allow.name == deny.name)
    return allow.name.startswith(deny.name)


def decide_any(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    rtype: ResourceType,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    """Whether `principal` may do `operation` on at least one resource of `rtype`
    (Kafka's authorizeByResourceType, used by InitProducerId: WRITE on some topic).
    As Kafka's, it first decides for a resource named "hardcode" (so super users, and
    `allow.everyone.if.no.acl.found` with a name no ACL covers, are allowed), then
    looks for some ALLOW that no DENY covers whole."""
    bindings = list(bindings)
    if decide(
        bindings,
        principal,
        host,
        operation,
        rtype,
        "hardcode",
        super_users=super_users,
        allow_if_no_acl=allow_if_no_acl,
    ):
        return True
    allowing = (operation, Operation.ALL, *_IMPLIED_BY.get(operation, ()))
    mine = [
        b for b in bindings if b.resource.type == rtype and _entry_applies(b.entry, principal, host)
    ]
    denies = [
        b.resource
        for b in mine
        if b.entry.permission == Permission.DENY and b.entry.operation in (operation, Operation.ALL)
    ]
    return any(
        b.entry.permission == Permission.ALLOW
        and b.entry.operation in allowing
        and not any(_covers(d, b.resource) for d in denies)
        for b in mine
    )


def authorized_operations(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    rtype: ResourceType,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> int:
    """KIP-430's bit field: bit `op` set for each supported operation of `rtype` that
    `principal` may do on `name` (Kafka's AuthHelper.authorizedOperations)."""
    bindings = list(bindings)
    bits = 0
    for op in SUPPORTED_OPERATIONS[rtype]:
        if decide(
            bindings,
            principal,
            host,
            op,
            rtype,
            name,
            super_users=super_users,
            allow_if_no_acl=allow_if_no_acl,
        ):
            bits |= 1 << op
    return bits


@dataclasses.dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter; None fields and ANY match everything. Pattern
    MATCH matches what would apply to the literal name: the literal name, the literal
    `*` and every prefix of it."""

    rtype: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        r, e = b.resource, b.entry
        if self.rtype != ResourceType.ANY and r.type != self.rtype:
            return False
        if self.pattern == PatternType.MATCH:
            if self.name is not None and not (
                r.name == self.name
                or (r.pattern == PatternType.LITERAL and r.name == WILDCARD)
                or (r.pattern == PatternType.PREFIXED and self.name.startswith(r.name))
            ):
                return False
        else:
            if self.pattern != PatternType.ANY and r.pattern != self.pattern:
                return False
            if self.name is not None and r.name != self.name:
                return False
        return (
            (self.principal is None or e.principal == self.principal)
            and (self.host is None or e.host == self.host)
            and (self.operation == Operation.ANY or e.operation == self.operation)
            and (self.permission == Permission.ANY or e.permission == self.permission)
        )


def binding_invalid(b: AclBinding) -> str | None:
    """Why a binding cannot be created, or None (CreateAcls answers INVALID_REQUEST)."""
    r, e = b.resource, b.entry
    if r.type == ResourceType.ANY:
        return "resource type must be concrete"
    if r.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "pattern type must be LITERAL or PREFIXED"
    if not r.name:
        return "resource name must not be empty"
    if r.type == ResourceType.CLUSTER and r.name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME}"
    if e.operation == Operation.ANY:
        return "operation must be concrete"
    if e.permission not in (Permission.ALLOW, Permission.DENY):
        return "permission must be ALLOW or DENY"
    if ":" not in e.principal:
        return f"principal {e.principal!r} is not TYPE:name"
    if not e.host:
        return "host must not be empty"
    return None


# --- Kafka's ZooKeeper JSON -------------------------------------------------------


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


_OP_BY_JSON = {_camel(op.name): op for op in Operation if op != Operation.ANY}
_PERM_BY_JSON = {"Allow": Permission.ALLOW, "Deny": Permission.DENY}
_TYPE_BY_JSON = {
    _camel(t.name): t for t in ResourceType if t != ResourceType.ANY
}  # Topic, Group, Cluster, TransactionalId ...


def zk_type_name(rtype: ResourceType) -> str:
    """The path component of a resource type (`Topic`, `TransactionalId`)."""
    return _camel(rtype.name)


def zk_type(name: str) -> ResourceType:
    return _TYPE_BY_JSON[name]


def entries_to_json(entries: Iterable[Entry]) -> dict:
    """Kafka's znode value: {"version":1,"acls":[{principal,permissionType,...}]}."""
    return {
        "version": 1,
        "acls": [
            {
                "principal": e.principal,
                "permissionType": _camel(e.permission.name),
                "operation": _camel(e.operation.name),
                "host": e.host,
            }
            for e in sorted(entries, key=_entry_key)
        ],
    }


def entries_from_json(raw: dict) -> Entries:
    return frozenset(
        Entry(
            a["principal"],
            a["host"],
            _OP_BY_JSON[a["operation"]],
            _PERM_BY_JSON[a["permissionType"]],
        )
        for a in raw.get("acls", ())
    )


def _entry_key(e: Entry) -> tuple:
    return (e.principal, e.host, int(e.operation), int(e.permission))
