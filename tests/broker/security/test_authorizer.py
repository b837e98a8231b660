"""Authorizer with the single-node store: changes persist, deletes report what went."""

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from broker.security.acl import (
    AclBinding,
    AclFilter,
    Entry,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    decide,
)
from broker.security.acl_store import LocalAclStore
from broker.security.authorizer import Authorizer, parse_super_users

LOGS = Resource(ResourceType.TOPIC, "logs")
WEB = Resource(ResourceType.TOPIC, "web-", PatternType.PREFIXED)


def _authorizer(path) -> Authorizer:
    store = LocalAclStore(path)
    return Authorizer(store, store.load(), frozenset(), False)


def entry(who, op, perm=Permission.ALLOW):
    return Entry(who, "*", op, perm)


def test_changes_persist_and_deletes_report_what_went(tmp_path):
    a = _authorizer(tmp_path)
    asyncio.run(
        a.create(
            [
                AclBinding(LOGS, entry("User:alice", Operation.WRITE)),
                AclBinding(LOGS, entry("User:bob", Operation.READ)),
                AclBinding(WEB, entry("User:alice", Operation.WRITE)),
            ]
        )
    )
    assert a.authorize("User:alice", "h", Operation.WRITE, ResourceType.TOPIC, "web-1")
    again = _authorizer(tmp_path)
    assert sorted(map(repr, again.bindings())) == sorted(map(repr, a.bindings()))
    removed = asyncio.run(again.delete(AclFilter(principal="User:alice")))
    assert {b.resource for b in removed} == {LOGS, WEB}
    third = _authorizer(tmp_path)
    assert third.bindings() == [AclBinding(LOGS, entry("User:bob", Operation.READ))]
    assert not third.authorize("User:alice", "h", Operation.WRITE, ResourceType.TOPIC, "logs")


def test_super_users_parse():
    assert parse_super_users(" User:admin; User:CN=broker,O=x ;") == {
        "User:admin",
        "User:CN=broker,O=x",
    }
    assert parse_super_users("") == frozenset()


class _NoStore:
    on_change = None


names = st.text("ab*", min_size=1, max_size=4)
bindings_st = st.lists(
    st.builds(
        lambda name, pattern, op, perm, who: AclBinding(
            Resource(ResourceType.TOPIC, name, pattern), Entry(who, "*", op, perm)
        ),
        names,
        st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
        st.sampled_from([Operation.READ, Operation.WRITE, Operation.ALL, Operation.DESCRIBE]),
        st.sampled_from([Permission.ALLOW, Permission.DENY]),
        st.sampled_from(["User:alice", "User:*"]),
    ),
    max_size=8,
)


@given(bindings_st, names, st.sampled_from([Operation.READ, Operation.DESCRIBE]))
def test_the_index_decides_as_the_full_scan(bindings, name, op):
    acls: dict = {}
    for b in bindings:
        acls.setdefault(b.resource, set()).add(b.entry)
    a = Authorizer(_NoStore(), {r: frozenset(e) for r, e in acls.items()}, frozenset(), False)
    full = decide(bindings, "User:alice", "h", op, ResourceType.TOPIC, name)
    assert a.authorize("User:alice", "h", op, ResourceType.TOPIC, name) is full
