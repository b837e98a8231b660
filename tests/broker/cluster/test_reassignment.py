"""The pure steps of a partition reassignment (broker/cluster/reassignment.py), with
Kafka's ReplicaAssignment rules: the replica set during a move, the target and the
origin read back from it, the check of a target, and the states of a move's end."""

import orjson
import pytest

from broker.cluster import zk
from broker.cluster.assignment import InvalidAssignment
from broker.cluster.reassignment import (
    check_target,
    complete,
    moved_state,
    origin_of,
    reassign_to,
    target_of,
)
from broker.cluster.zk import Moving, PartitionState


def test_a_move_lists_the_target_first_then_the_origin():
    full, moving = reassign_to([0], None, [1, 2])
    assert full == [1, 2, 0]
    assert moving == Moving(adding=(1, 2), removing=(0,))
    assert target_of(full, moving) == [1, 2]
    assert origin_of(full, moving) == [0]


def test_a_replaced_move_keeps_its_origin():
    full, moving = reassign_to([1, 2, 0], Moving((1, 2), (0,)), [3, 0])
    assert full == [3, 0]
    assert moving == Moving(adding=(3,), removing=())


def test_a_cancel_is_a_move_back_to_the_origin():
    full, moving = reassign_to([1, 2, 0], Moving((1, 2), (0,)), [0])
    assert (full, moving) == ([0], Moving())


def test_the_target_is_checked_with_the_origin_counted_as_registered():
    check_target(0, [0, 1], [0], live={1})  # 0 is down but already a replica
    with pytest.raises(InvalidAssignment, match="Unknown broker"):
        check_target(0, [5], [0], live={0, 1})
    with pytest.raises(InvalidAssignment, match="Duplicate"):
        check_target(0, [1, 1], [0], live={0, 1})
    with pytest.raises(InvalidAssignment, match="replication factor of 0"):
        check_target(0, [], [0], live={0, 1})


def test_the_end_of_a_move_moves_leadership_off_a_removed_leader():
    state = PartitionState(leader=0, leader_epoch=3, isr=(0, 1, 2), version=7)
    assert complete([1, 2], state)
    done = moved_state(state, [1, 2], live={0, 1, 2})
    assert (done.leader, done.leader_epoch, done.isr) == (1, 4, (1, 2))


def test_the_end_of_a_move_keeps_a_live_leader_it_keeps():
    state = PartitionState(leader=2, leader_epoch=1, isr=(0, 2, 1))
    done = moved_state(state, [1, 2], live={0, 1, 2})
    assert (done.leader, done.leader_epoch, done.isr) == (2, 2, (2, 1))
    assert not complete([1, 3], state)


def test_a_dead_leader_is_replaced_by_a_live_target_replica():
    state = PartitionState(leader=1, leader_epoch=1, isr=(1, 2))
    assert moved_state(state, [1, 2], live={2}).leader == 2
    assert moved_state(state, [1, 2], live=set()).leader == -1


def test_the_topic_znode_carries_the_moves_as_kafka_writes_them():
    data = zk.encode_assignment([[1, 2, 0], [0]], "id", {0: Moving((1, 2), (0,))})
    assert zk.decode_assignment(data) == ([[1, 2, 0], [0]], "id")
    assert zk.decode_reassigning(data) == {0: Moving((1, 2), (0,))}
    raw = orjson.loads(data)
    assert raw["adding_replicas"] == {"0": [1, 2]}
    assert raw["removing_replicas"] == {"0": [0]}
    plain = zk.encode_assignment([[0]], "id")
    assert zk.decode_reassigning(plain) == {}
    assert zk.decode_reassigning(b'{"version": 1, "partitions": {"0": [0]}}') == {}
