"""A group's state changes only along Kafka's table of valid previous states
(GroupMetadata.scala, 3.9); anything else is an internal error."""

import itertools

import pytest

from broker.groups.group import (
    VALID_PREVIOUS_STATES,
    Group,
    GroupState,
    IllegalStateError,
)
from broker.groups.offsets_topic import GroupValue, MemberRecord

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# Kafka's table, written out: target state <- the states it may be entered from.
KAFKA = {
    PREPARING: {STABLE, COMPLETING, EMPTY},
    COMPLETING: {PREPARING},
    STABLE: {COMPLETING},
    DEAD: {STABLE, PREPARING, COMPLETING, EMPTY, DEAD},
    EMPTY: {PREPARING},
}

# A legal path from a new (Empty) group to each state.
PATHS = {
    EMPTY: [],
    PREPARING: [PREPARING],
    COMPLETING: [PREPARING, COMPLETING],
    STABLE: [PREPARING, COMPLETING, STABLE],
    DEAD: [DEAD],
}


def group_in(state: GroupState) -> Group:
    group = Group("g", 0)
    for i, step in enumerate(PATHS[state], 1):
        group.transition(step, i)
    assert group.state is state
    return group


def test_the_table_is_kafkas():
    assert set(VALID_PREVIOUS_STATES) == set(GroupState)
    assert {target: set(prev) for target, prev in VALID_PREVIOUS_STATES.items()} == KAFKA


@pytest.mark.parametrize(
    "source,target", list(itertools.product(GroupState, GroupState)), ids=lambda s: s.value
)
def test_every_transition_follows_the_table(source, target):
    group = group_in(source)
    if source in KAFKA[target]:
        group.transition(target, 100)
        assert (group.state, group.state_timestamp) == (target, 100)
    else:
        before = group.state_timestamp
        with pytest.raises(IllegalStateError, match=f"{source.value} to {target.value}"):
            group.transition(target, 100)
        assert (group.state, group.state_timestamp) == (source, before)


def test_the_state_cannot_be_assigned():
    group = Group("g", 0)
    with pytest.raises(AttributeError):
        group.state = STABLE
    assert group.state is EMPTY


def test_the_table_cannot_be_changed():
    with pytest.raises(TypeError):
        VALID_PREVIOUS_STATES[EMPTY] = frozenset(GroupState)
    with pytest.raises(AttributeError):
        VALID_PREVIOUS_STATES[STABLE].add(EMPTY)


def test_a_loaded_group_starts_in_its_stored_state():
    """Loading is not a transition (Kafka's loadGroup builds the group in its state):
    Stable with members, Empty without, whatever record came before."""
    member = MemberRecord("m", None, "c", "/h", 30_000, 10_000, b"sub", b"asg")
    stable = Group.from_record("g", GroupValue("consumer", 3, "range", "m", 5, (member,)), 10)
    assert (stable.state, stable.state_timestamp, stable.generation) == (STABLE, 5, 3)
    assert stable.members["m"].assignment == b"asg"
    empty = Group.from_record("g", GroupValue("consumer", 4, None, None, -1, ()), 10)
    assert (empty.state, empty.state_timestamp, empty.generation) == (EMPTY, 10, 4)
