"""Pure unit tests: replica assignment and the controller's election decisions."""

import re

import pytest

from broker.cluster.assignment import (
    AssignmentError,
    InvalidAssignment,
    assign_replicas,
    check_new_assignments,
    check_replicas,
    check_topic_assignment,
)
from broker.cluster.controller import decide, elect, initial_state, preferred_moves
from broker.cluster.zk import PartitionState
from broker.protocol.errors import ErrorCode


def test_round_robin_like_kafka():
    brokers = {0: None, 1: None, 2: None}
    assert assign_replicas(brokers, 4, 3) == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]
    assert assign_replicas(brokers, 2, 2, start=1) == [[1, 2], [2, 0]]


def test_rack_aware_spreads_replicas_over_racks():
    brokers = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    for replicas in assign_replicas(brokers, 12, 3):
        assert len({brokers[b] for b in replicas}) == 3
        assert len(set(replicas)) == 3
    leaders = [r[0] for r in assign_replicas(brokers, 6, 3)]
    assert sorted(leaders) == [0, 1, 2, 3, 4, 5]


def test_assignment_errors():
    with pytest.raises(AssignmentError):
        assign_replicas({0: None, 1: None}, 1, 3)
    with pytest.raises(AssignmentError):
        assign_replicas({0: "a", 1: None}, 1, 2)


def st(leader, epoch, isr, version=3):
    return PartitionState(leader, epoch, tuple(isr), 1, version)


def test_leader_loss_elects_first_live_isr_replica_and_bumps_epoch():
    new = decide([0, 1, 2], st(0, 4, [0, 2, 1]), live={1, 2}, leaving=set(), unclean=False)
    assert (new.leader, new.leader_epoch, new.isr, new.version) == (1, 5, (2, 1), 3)


def test_dead_follower_leaves_isr_without_epoch_bump():
    new = decide([0, 1, 2], st(0, 4, [0, 1, 2]), live={0, 1}, leaving=set(), unclean=False)
    assert (new.leader, new.leader_epoch, new.isr) == (0, 4, (0, 1))
    assert decide([0, 1, 2], st(0, 4, [0, 1]), live={0, 1}, leaving=set(), unclean=False) is None


def test_no_isr_replica_left_goes_offline_unless_unclean():
    state = st(0, 4, [0])
    offline = decide([0, 1, 2], state, live={1, 2}, leaving=set(), unclean=False)
    assert (offline.leader, offline.isr, offline.leader_epoch) == (-1, (0,), 5)
    assert decide([0, 1, 2], offline, live={1, 2}, leaving=set(), unclean=False) is None
    unclean = decide([0, 1, 2], offline, live={1, 2}, leaving=set(), unclean=True)
    assert (unclean.leader, unclean.isr) == (1, (1,))
    back = decide([0, 1, 2], offline, live={0, 1, 2}, leaving=set(), unclean=False)
    assert (back.leader, back.isr) == (0, (0,))


def test_controlled_shutdown_moves_leader_unless_alone():
    moved = decide([0, 1, 2], st(0, 1, [0, 1, 2]), live={0, 1, 2}, leaving={0}, unclean=False)
    assert (moved.leader, moved.isr, moved.leader_epoch) == (1, (1, 2), 2)
    assert decide([0, 1, 2], st(0, 1, [0]), live={0, 1, 2}, leaving={0}, unclean=False) is None


def test_initial_state_and_preferred_leader_moves():
    assert initial_state([2, 0, 1], {0, 1, 2}, 7) == PartitionState(2, 0, (2, 0, 1), 7)
    assert initial_state([2, 0], {0}, 7).leader == 0
    states = {
        ("t", 0): ([0, 1, 2], st(1, 3, [1, 2, 0])),
        ("t", 1): ([1, 2, 0], st(1, 0, [1, 2, 0])),
        ("t", 2): ([2, 0, 1], st(1, 2, [1, 0])),
    }
    moves = dict(preferred_moves(states, {0, 1, 2}, set(), 10))
    assert moves[("t", 0)].leader == 0 and moves[("t", 0)].leader_epoch == 4
    assert ("t", 2) not in moves  # broker 2 is not in the ISR
    assert ("t", 1) not in moves


def test_elect_leaders_preferred_and_unclean():
    state = PartitionState(leader=2, leader_epoch=4, isr=(2, 1))
    code, new = elect([1, 2, 3], state, {1, 2, 3}, unclean=False)
    assert code == ErrorCode.NONE and (new.leader, new.leader_epoch, new.isr) == (1, 5, (2, 1))
    assert elect([2, 1, 3], state, {1, 2, 3}, False) == (ErrorCode.ELECTION_NOT_NEEDED, None)
    assert elect([3, 2, 1], state, {1, 2, 3}, False) == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        None,
    )  # 3 is live but not in the ISR
    assert elect([1, 2], state, {2, 3}, False)[0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert elect([1, 2], state, {1, 2}, True) == (ErrorCode.ELECTION_NOT_NEEDED, None)
    offline = PartitionState(leader=-1, leader_epoch=7, isr=(2,))
    code, new = elect([2, 3, 1], offline, {1, 3}, unclean=True)
    assert code == ErrorCode.NONE and (new.leader, new.leader_epoch, new.isr) == (3, 8, (3,))
    assert elect([2], offline, {1, 3}, True) == (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)


def test_client_given_replica_lists_are_checked_with_kafkas_messages():
    live = {0, 1, 2}
    check_new_assignments([[0, 1], [1, 2]], 2, 2, live, first=3)
    bad = [
        ([[0, 1]], "Increasing the number of partitions by 2 but 1 assignments provided."),
        ([[0, 1], [1, 1]], "Duplicate brokers not allowed in replica assignment: 1, 1"),
        ([[0, 1], [2]], "partition 0 has 2 while partition 4 has 1."),
        ([[0, 1], [1, 7]], "Unknown broker(s) in replica assignment: 7."),
    ]
    for assignments, message in bad:
        with pytest.raises(InvalidAssignment, match=re.escape(message)):
            check_new_assignments(assignments, 2, 2, live, first=3)


def test_a_new_topics_replica_lists_come_back_in_partition_order_as_given():
    live = {1, 2, 3}
    given = [(1, [3, 1, 2]), (0, [2, 3, 1])]
    assert check_topic_assignment(given, live) == [[2, 3, 1], [3, 1, 2]]
    assert check_topic_assignment([(0, [1])], {1}) == [[1]]


def test_a_new_topics_replica_lists_are_checked_with_kafkas_messages():
    live = {1, 2, 3}
    bad = [
        ([(0, [1, 2]), (0, [2, 3])], "Found multiple manual partition assignments for partition 0"),
        ([(0, [1, 2]), (1, [3])], "All partitions should have the same number of replicas"),
        ([(0, [1]), (2, [2])], "partitions should be a consecutive 0-based integer sequence"),
        ([(1, [1])], "partitions should be a consecutive 0-based integer sequence"),
        ([(0, [1, 2]), (1, [3, 3])], "Duplicate brokers not allowed in replica assignment: 3, 3"),
        ([(0, [0, 1, 2])], "Unknown broker(s) in replica assignment: 0."),
        ([(0, [])], "Cannot have replication factor of 0 for partition id 0."),
        ([], "All partitions should have the same number of replicas"),
    ]
    for given, message in bad:
        with pytest.raises(InvalidAssignment, match=re.escape(message)):
            check_topic_assignment(given, live)


def test_one_partitions_replica_list_is_checked_against_the_registered_brokers():
    check_replicas(4, [3, 1], {1, 2, 3})
    with pytest.raises(InvalidAssignment, match=re.escape("in replica assignment: 5, 7.")):
        check_replicas(4, [7, 1, 5], {1, 2, 3})
    with pytest.raises(InvalidAssignment, match=re.escape("1, 2, 1 for partition id 4.")):
        check_replicas(4, [1, 2, 1], {1, 2, 3})
