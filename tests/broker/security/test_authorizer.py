"""Authorizer with the single-node store: changes persist, deletes report what went."""

import asyncio

from broker.security.acl import (
    AclBinding,
    AclFilter,
    Entry,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
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
