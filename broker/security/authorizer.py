"""The broker's authorizer: the ACL bindings in memory, decisions, and changes that
go through a store (acl_store: a local file on a single node, ZooKeeper in a
cluster).

`Authorizer` is owned by the BrokerCore and used on the event loop only. A decision
looks only at the bindings that can match the resource: an index by (type, name)
gives the literal ones of the name and of `*`, and the prefixed ones are found by
looking up each prefix of the name, so its cost grows with the name's length, not
with the number of ACLs. With no `authorizer.class.name`
there is no Authorizer at all (`core.authorizer is None`) and handlers skip every
check (broker.server.authz).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.security.acl import (
    WILDCARD,
    AclBinding,
    AclFilter,
    Entry,
    Operation,
    PatternType,
    Resource,
    ResourceType,
    authorized_operations,
    decide,
    decide_any,
)

AUTHORIZER_CLASSES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:broker`)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class Authorizer:
    """ACL decisions and changes; event-loop only."""

    def __init__(
        self,
        store,
        acls: dict[Resource, frozenset[Entry]],
        super_users: frozenset[str],
        allow_if_no_acl: bool,
    ):
        """`acls`: what `store.load()` gave."""
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls = {r: e for r, e in acls.items() if e}
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self._by_name: dict[tuple[ResourceType, PatternType, str], list[AclBinding]] = {}
        self._reindex()
        store.on_change = self.apply

    def apply(self, resource: Resource, entries: frozenset[Entry]) -> None:
        """A resource's bindings changed (here or on another broker)."""
        if entries:
            self._acls[resource] = entries
        else:
            self._acls.pop(resource, None)
        self._reindex()

    def _reindex(self) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        by_name: dict[tuple[ResourceType, PatternType, str], list[AclBinding]] = {}
        for r, entries in self._acls.items():
            bindings = [AclBinding(r, e) for e in entries]
            by_type.setdefault(r.type, []).extend(bindings)
            by_name.setdefault((r.type, r.pattern, r.name), []).extend(bindings)
        self._by_type, self._by_name = by_type, by_name

    def _candidates(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern may match rtype/name (a superset is fine:
        `decide` checks the match itself)."""
        index = self._by_name
        out = [
            *index.get((rtype, PatternType.LITERAL, name), ()),
            *index.get((rtype, PatternType.LITERAL, WILDCARD), ()),
        ]
        for end in range(1, len(name) + 1):
            out += index.get((rtype, PatternType.PREFIXED, name[:end]), ())
        return out

    def authorize(
        self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str
    ) -> bool:
        return decide(
            self._candidates(rtype, name),
            principal,
            host,
            op,
            rtype,
            name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def authorize_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        return decide_any(
            self._by_type.get(rtype, ()),
            principal,
            host,
            op,
            rtype,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """The KIP-430 bit field of what `principal` may do on rtype/name."""
        return authorized_operations(
            self._candidates(rtype, name),
            principal,
            host,
            rtype,
            name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def bindings(self) -> list[AclBinding]:
        return [b for bs in self._by_type.values() for b in bs]

    def describe(self, f: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if f.matches(b)]

    async def create(self, bindings: Iterable[AclBinding]) -> None:
        by_resource: dict[Resource, set[Entry]] = {}
        for b in bindings:
            by_resource.setdefault(b.resource, set()).add(b.entry)
        for resource, entries in by_resource.items():
            _, new = await self.store.update(resource, lambda old, add=entries: old | add)
            self.apply(resource, new)

    async def delete(self, f: AclFilter) -> list[AclBinding]:
        """Remove the bindings `f` matches; returns those removed."""
        removed: list[AclBinding] = []
        for resource in sorted({b.resource for b in self.describe(f)}, key=repr):

            def keep(old: frozenset[Entry], r=resource) -> frozenset[Entry]:
                return frozenset(e for e in old if not f.matches(AclBinding(r, e)))

            old, new = await self.store.update(resource, keep)
            removed.extend(AclBinding(resource, e) for e in old - new)
            self.apply(resource, new)
        return removed
