"""Reconciliation (pure): revoke before assign, withhold partitions not yet released."""

import uuid

from broker.groups.consumer.reconcile import MemberAssignment, MemberState, reconcile

T = uuid.UUID(int=7)


def fs(*ps):
    return frozenset(ps)


def nobody(t, p):
    return None


def test_stable_member_moves_to_new_epoch_with_free_partitions():
    cur = MemberAssignment(MemberState.STABLE, 1, 0, {T: fs(0, 1)}, {})
    nxt = reconcile(cur, 2, {T: fs(0, 1, 2)}, {T: fs(0, 1)}, nobody, "a")
    assert nxt == MemberAssignment(MemberState.STABLE, 2, 1, {T: fs(0, 1, 2)}, {})


def test_revocation_first_keeps_the_epoch_until_the_member_lets_go():
    cur = MemberAssignment(MemberState.STABLE, 1, 0, {T: fs(0, 1, 2)}, {})
    step = reconcile(cur, 2, {T: fs(0)}, {T: fs(0, 1, 2)}, nobody, "a")
    assert step.state is MemberState.UNREVOKED_PARTITIONS
    assert step.member_epoch == 1 and step.assigned == {T: fs(0)}
    assert step.revoking == {T: fs(1, 2)}
    still = reconcile(step, 2, {T: fs(0)}, {T: fs(0, 1)}, nobody, "a")
    assert still is step
    done = reconcile(step, 2, {T: fs(0)}, {T: fs(0)}, nobody, "a")
    assert done == MemberAssignment(MemberState.STABLE, 2, 1, {T: fs(0)}, {})


def test_partitions_held_by_another_member_are_withheld():
    cur = MemberAssignment(MemberState.STABLE, 1, 0, {}, {})

    def held_by_b(t, p):
        return "b" if p == 1 else None

    step = reconcile(cur, 2, {T: fs(0, 1)}, {}, held_by_b, "a")
    assert step.state is MemberState.UNRELEASED_PARTITIONS
    assert step.member_epoch == 2 and step.assigned == {T: fs(0)}
    done = reconcile(step, 2, {T: fs(0, 1)}, {T: fs(0)}, nobody, "a")
    assert done.state is MemberState.STABLE and done.assigned == {T: fs(0, 1)}


def test_a_member_at_the_target_epoch_is_left_alone():
    cur = MemberAssignment(MemberState.STABLE, 3, 2, {T: fs(0)}, {})
    assert reconcile(cur, 3, {T: fs(0)}, None, nobody, "a") is cur
