"""ACL model: AclAuthorizer's decisions, filters, Kafka's ZooKeeper JSON."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclFilter,
    Entry,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    authorized_operations,
    binding_invalid,
    decide,
    decide_any,
    entries_from_json,
    entries_to_json,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(name, op, perm=ALLOW, who="User:alice", host="*", rtype=T, pattern=LIT):
    return AclBinding(Resource(rtype, name, pattern), Entry(who, host, op, perm))


def may(bindings, op, name="logs", who="User:alice", host="10.0.0.1", rtype=T, **kw):
    return decide(bindings, who, host, op, rtype, name, **kw)


@pytest.mark.parametrize(
    ("bindings", "op", "name", "expected"),
    [
        ([], Op.READ, "logs", False),  # no ACL at all: denied by default
        ([acl("logs", Op.WRITE)], Op.WRITE, "logs", True),
        ([acl("logs", Op.WRITE)], Op.READ, "logs", False),
        ([acl("logs", Op.WRITE)], Op.WRITE, "other", False),
        ([acl("*", Op.WRITE)], Op.WRITE, "anything", True),  # literal * = every topic
        ([acl("log", Op.WRITE, pattern=PRE)], Op.WRITE, "logs", True),
        ([acl("log", Op.WRITE, pattern=PRE)], Op.WRITE, "alog", False),
        ([acl("log", Op.WRITE)], Op.WRITE, "logs", False),  # literal is not a prefix
        ([acl("logs", Op.ALL)], Op.DELETE, "logs", True),
        ([acl("logs", Op.READ)], Op.DESCRIBE, "logs", True),  # implied
        ([acl("logs", Op.WRITE)], Op.DESCRIBE, "logs", True),
        ([acl("logs", Op.DELETE)], Op.DESCRIBE, "logs", True),
        ([acl("logs", Op.ALTER)], Op.DESCRIBE, "logs", True),
        ([acl("logs", Op.CREATE)], Op.DESCRIBE, "logs", False),
        ([acl("logs", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, "logs", True),
        ([acl("logs", Op.DESCRIBE)], Op.READ, "logs", False),  # no upward implication
        ([acl("logs", Op.ALL), acl("logs", Op.READ, DENY)], Op.READ, "logs", False),
        ([acl("logs", Op.READ), acl("lo", Op.ALL, DENY, pattern=PRE)], Op.READ, "logs", False),
        ([acl("logs", Op.READ), acl("logs", Op.DESCRIBE, DENY)], Op.READ, "logs", True),
        ([acl("logs", Op.READ, who="User:*")], Op.READ, "logs", True),
        ([acl("logs", Op.READ, who="User:bob")], Op.READ, "logs", False),
        ([acl("logs", Op.READ, host="10.0.0.1")], Op.READ, "logs", True),
        ([acl("logs", Op.READ, host="10.0.0.2")], Op.READ, "logs", False),
        ([acl("logs", Op.READ, rtype=G)], Op.READ, "logs", False),  # another type
    ],
)
def test_decisions(bindings, op, name, expected):
    assert may(bindings, op, name) is expected


def test_super_user_beats_deny():
    bindings = [acl("logs", Op.ALL, DENY, who="User:admin")]
    assert may(bindings, Op.WRITE, who="User:admin", super_users=frozenset({"User:admin"}))


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls():
    assert may([], Op.READ, allow_if_no_acl=True)
    # bob has an ACL on the topic: alice is no longer let in by the default
    assert not may([acl("logs", Op.READ, who="User:bob")], Op.READ, allow_if_no_acl=True)
    assert may([acl("other", Op.READ, who="User:bob")], Op.READ, allow_if_no_acl=True)


def test_allowed_on_some_resource():
    assert decide_any([acl("a", Op.WRITE)], "User:alice", "h", Op.WRITE, T)
    assert not decide_any([acl("a", Op.READ)], "User:alice", "h", Op.WRITE, T)
    covered = [acl("a", Op.WRITE), acl("*", Op.WRITE, DENY)]
    assert not decide_any(covered, "User:alice", "h", Op.WRITE, T)
    partly = [acl("ab", Op.WRITE, pattern=PRE), acl("abc", Op.WRITE, DENY, pattern=PRE)]
    assert decide_any(partly, "User:alice", "h", Op.WRITE, T)


def test_allowed_on_some_resource_by_the_no_acl_default():
    """Kafka first asks about a resource named "hardcode": with
    allow.everyone.if.no.acl.found, ACLs on some topics (none of them for alice)
    leave every other topic open, so alice may write some topic."""
    others = [acl("billing", Op.WRITE, who="User:bob")]
    assert decide_any(others, "User:alice", "h", Op.WRITE, T, allow_if_no_acl=True)
    assert not decide_any(others, "User:alice", "h", Op.WRITE, T)
    everything = [acl("*", Op.WRITE, who="User:bob")]  # no topic is left without ACLs
    assert not decide_any(everything, "User:alice", "h", Op.WRITE, T, allow_if_no_acl=True)
    assert decide_any(others, "User:root", "h", Op.WRITE, T, super_users=frozenset({"User:root"}))


@pytest.mark.parametrize(
    ("rtype", "ops"),
    [
        (T, {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
             Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
        (G, {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
        (C, {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
             Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}),
        (ResourceType.TRANSACTIONAL_ID, {Op.DESCRIBE, Op.WRITE}),
    ],
)  # fmt: skip
def test_supported_operations_are_kafkas(rtype, ops):
    assert set(SUPPORTED_OPERATIONS[rtype]) == ops


def test_authorized_operations_bit_field():
    """KIP-430: bit i set = operation code i allowed, over the type's supported
    operations, implications included."""
    bits = authorized_operations([acl("logs", Op.READ)], "User:alice", "h", T, "logs")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert authorized_operations([], "User:alice", "h", T, "logs") == 0
    every = authorized_operations([], "User:root", "h", C, "kafka-cluster",
                                  super_users=frozenset({"User:root"}))  # fmt: skip
    assert every == sum(1 << op for op in SUPPORTED_OPERATIONS[C])


names = st.text("ab*", min_size=1, max_size=4)
ops = st.sampled_from([o for o in Operation if o != Op.ANY])
bindings_st = st.lists(
    st.builds(
        acl,
        names,
        ops,
        st.sampled_from([ALLOW, DENY]),
        st.sampled_from(["User:alice", "User:*", "User:bob"]),
        st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
        st.just(T),
        st.sampled_from([LIT, PRE]),
    ),
    max_size=6,
)


@given(bindings_st, ops, names)
def test_a_matching_deny_always_wins(bindings, op, name):
    deny = acl(name, op, DENY)
    assert not may([*bindings, deny], op, name)
    assert not may([*bindings, acl(name[:1], Op.ALL, DENY, pattern=PRE)], op, name)


@given(names, names)
def test_prefixed_matches_exactly_the_names_starting_with_it(pattern, name):
    assert may([acl(pattern, Op.READ, pattern=PRE)], Op.READ, name) is name.startswith(pattern)
    literal = name == pattern or pattern == "*"
    assert may([acl(pattern, Op.READ)], Op.READ, name) is literal


def test_filters():
    lit = acl("logs", Op.READ)
    star = acl("*", Op.WRITE, who="User:bob")
    pre = acl("lo", Op.READ, pattern=PRE)
    other = acl("x", Op.READ, rtype=G)
    every = [lit, star, pre, other]
    assert [b for b in every if AclFilter().matches(b)] == every
    match = AclFilter(rtype=T, name="logs", pattern=PatternType.MATCH)
    assert [b for b in every if match.matches(b)] == [lit, star, pre]
    exact = AclFilter(name="lo", pattern=PRE)
    assert [b for b in every if exact.matches(b)] == [pre]
    literal_any = AclFilter(name="logs", pattern=PatternType.ANY)
    assert [b for b in every if literal_any.matches(b)] == [lit]
    bob = AclFilter(principal="User:bob", operation=Op.WRITE, permission=ALLOW)
    assert [b for b in every if bob.matches(b)] == [star]


def test_binding_validation():
    assert binding_invalid(acl("logs", Op.READ)) is None
    assert binding_invalid(acl("logs", Op.ANY)) is not None
    assert binding_invalid(acl("logs", Op.READ, pattern=PatternType.MATCH)) is not None
    assert binding_invalid(acl("c", Op.ALTER, rtype=C)) is not None
    assert binding_invalid(acl("kafka-cluster", Op.ALTER, rtype=C)) is None
    assert binding_invalid(acl("logs", Op.READ, who="alice")) is not None


def test_zookeeper_json_round_trip():
    entries = frozenset(
        {
            Entry("User:alice", "*", Op.WRITE, ALLOW),
            Entry("User:bob", "10.0.0.1", Op.DESCRIBE_CONFIGS, DENY),
            Entry("User:x", "*", Op.IDEMPOTENT_WRITE, ALLOW),
        }
    )
    doc = entries_to_json(entries)
    assert doc["version"] == 1
    assert {
        "principal": "User:alice",
        "permissionType": "Allow",
        "operation": "Write",
        "host": "*",
    } in doc["acls"]
    assert {a["operation"] for a in doc["acls"]} == {"Write", "DescribeConfigs", "IdempotentWrite"}
    assert entries_from_json(doc) == entries
