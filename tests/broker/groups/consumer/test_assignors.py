"""The server-side assignors (pure): every partition once, to a subscriber, balanced,
and for `uniform` sticky."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.consumer.assignors import (
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
    assignors_from_config,
)

T = [uuid.UUID(int=i + 1) for i in range(4)]


def owners(result):
    seen = {}
    for member, topics in result.items():
        for t, ps in topics.items():
            for p in ps:
                assert (t, p) not in seen, "a partition given twice"
                seen[(t, p)] = member
    return seen


def counts(result):
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def test_uniform_spreads_evenly_and_range_gives_consecutive_ranges():
    members = {m: MemberSpec(frozenset({T[0]})) for m in ("a", "b", "c")}
    uniform = UniformAssignor().assign(members, {T[0]: 7})
    assert sorted(counts(uniform).values()) == [2, 2, 3]
    ranged = RangeAssignor().assign(members, {T[0]: 7})
    assert ranged == {
        "a": {T[0]: frozenset({0, 1, 2})},
        "b": {T[0]: frozenset({3, 4})},
        "c": {T[0]: frozenset({5, 6})},
    }


def test_uniform_moves_only_what_balance_needs_when_a_member_joins():
    two = {m: MemberSpec(frozenset({T[0]})) for m in ("a", "b")}
    before = UniformAssignor().assign(two, {T[0]: 6})
    three = {m: MemberSpec(frozenset({T[0]}), before.get(m, {})) for m in ("a", "b", "c")}
    after = UniformAssignor().assign(three, {T[0]: 6})
    for m in ("a", "b"):
        assert after[m][T[0]] <= before[m][T[0]]  # kept partitions, gave one away
        assert len(after[m][T[0]]) == 2
    assert len(after["c"][T[0]]) == 2


def test_uniform_heterogeneous_subscriptions():
    members = {
        "a": MemberSpec(frozenset({T[0]})),
        "b": MemberSpec(frozenset({T[0], T[1]})),
        "c": MemberSpec(frozenset({T[1]})),
    }
    result = UniformAssignor().assign(members, {T[0]: 3, T[1]: 3})
    seen = owners(result)
    assert len(seen) == 6
    assert all(T[1] not in result["a"] for _ in [0]) and T[0] not in result["c"]
    assert sorted(counts(result).values()) == [2, 2, 2]


def test_config_names():
    assert list(assignors_from_config(["range", "uniform"])) == ["range", "uniform"]
    assert list(
        assignors_from_config(["org.apache.kafka.coordinator.group.assignor.UniformAssignor"])
    ) == ["uniform"]


@settings(max_examples=60, deadline=None)
@given(
    subs=st.dictionaries(
        st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
        st.frozensets(st.sampled_from(T[:3]), min_size=1),
        min_size=1,
    ),
    sizes=st.lists(st.integers(0, 7), min_size=3, max_size=3),
    data=st.data(),
)
def test_every_partition_once_to_a_subscriber(subs, sizes, data):
    topics = dict(zip(T[:3], sizes, strict=True))
    subscribed = set().union(*subs.values())
    for assignor in (UniformAssignor(), RangeAssignor()):
        current = {
            m: data.draw(
                st.dictionaries(
                    st.sampled_from(T[:3]), st.frozensets(st.integers(0, 8)), max_size=2
                )
            )
            for m in subs
        }
        members = {m: MemberSpec(s, current[m]) for m, s in subs.items()}
        result = assignor.assign(members, topics)
        seen = owners(result)
        expected = {(t, p) for t in subscribed for p in range(topics[t])}
        assert set(seen) == expected
        for (t, _), m in seen.items():
            assert t in subs[m]
        if isinstance(assignor, UniformAssignor) and len({s for s in subs.values()}) == 1:
            c = counts(result)
            assert max(c.values()) - min(c.values()) <= 1
