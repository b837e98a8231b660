"""Transactional offset commits in the group coordinator: pending until the marker,
UNSTABLE for require_stable, dropped on abort, and replayed from the log honouring
markers (an in-memory __consumer_offsets holding real batches)."""

from __future__ import annotations

from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.protocol.control import end_txn_marker_batch
from broker.protocol.errors import ErrorCode as E
from broker.protocol.records import iter_batches
from tests.broker.groups.fakes import MemoryStore


def coordinator(store):
    coord = GroupCoordinator(store, CoordinatorConfig(num_partitions=1))
    coord.load_partition(0, 0)
    return coord


async def commit(coord, pid, offset, epoch=0, group="g"):
    return await coord.commit_txn_offsets(
        group, pid, epoch, "", None, -1, {("t", 0): (offset, -1, "m")}, 10
    )


async def test_pending_until_commit_marker():
    store = MemoryStore()
    coord = coordinator(store)
    assert await commit(coord, 7, 42) == {("t", 0): E.NONE}
    assert coord.fetch_offsets("g", [("t", 0)]) == (E.NONE, {("t", 0): None})
    assert coord.unstable("g", [("t", 0), ("t", 1)]) == {("t", 0)}
    coord.complete_txn(0, 7, True)
    assert coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 42
    assert coord.unstable("g", [("t", 0)]) == set()


async def test_abort_drops_the_offsets():
    coord = coordinator(MemoryStore())
    await commit(coord, 7, 42)
    coord.complete_txn(0, 7, False)
    assert coord.fetch_offsets("g", [("t", 0)]) == (E.NONE, {("t", 0): None})
    assert coord.unstable("g", [("t", 0)]) == set()


async def test_batches_are_transactional_with_increasing_sequences():
    store = MemoryStore()
    coord = coordinator(store)
    await commit(coord, 7, 1)
    await commit(coord, 7, 2)
    await commit(coord, 7, 3, epoch=1)
    batches = list(iter_batches(bytes(store.data[0])))
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in batches] == [
        (7, 0, 0),
        (7, 0, 1),
        (7, 1, 0),
    ]
    assert all(b.is_transactional for b in batches)


async def test_replay_applies_committed_drops_aborted_and_keeps_open_ones_pending():
    store = MemoryStore()
    coord = coordinator(store)
    await commit(coord, 1, 10, group="committed")
    await commit(coord, 2, 20, group="aborted")
    await commit(coord, 3, 30, group="open")
    store.data[0] += end_txn_marker_batch(1, 0, True, 0)
    store.data[0] += end_txn_marker_batch(2, 0, False, 0)
    fresh = coordinator(store)
    assert fresh.fetch_offsets("committed", [("t", 0)])[1][("t", 0)].offset == 10
    assert fresh.fetch_offsets("aborted", [("t", 0)])[1][("t", 0)] is None
    assert fresh.fetch_offsets("open", [("t", 0)])[1][("t", 0)] is None
    assert fresh.unstable("open", [("t", 0)]) == {("t", 0)}
    fresh.complete_txn(0, 3, True)
    assert fresh.fetch_offsets("open", [("t", 0)])[1][("t", 0)].offset == 30
    await commit(fresh, 1, 11, group="committed")  # the sequence continues after replay
    last = list(iter_batches(bytes(store.data[0])))[-1]
    assert (last.producer_id, last.base_sequence) == (1, 1)


async def test_member_checks_of_v3():
    coord = coordinator(MemoryStore())
    got = await coord.commit_txn_offsets("g", 1, 0, "who", None, 3, {("t", 0): (1, -1, "")}, 1)
    assert got == {("t", 0): E.UNKNOWN_MEMBER_ID}


async def test_sequences_are_per_offsets_partition():
    store = MemoryStore()
    coord = GroupCoordinator(store, CoordinatorConfig(num_partitions=2))
    coord.load_partition(0, 0)
    coord.load_partition(1, 0)
    groups = {}
    for name in ("a", "b", "c", "d", "e"):
        groups.setdefault(coord.partition_for(name), name)
    assert len(groups) == 2
    for group in groups.values():
        await commit(coord, 7, 1, group=group)
        await commit(coord, 7, 2, group=group)
    for partition in groups:
        batches = list(iter_batches(bytes(store.data[partition])))
        assert [b.base_sequence for b in batches] == [0, 1]


async def test_a_fenced_producer_gets_producer_fenced():
    store = MemoryStore()
    coord = coordinator(store)
    store.fail_with = E.INVALID_PRODUCER_EPOCH
    assert await commit(coord, 7, 1) == {("t", 0): E.PRODUCER_FENCED}
    assert coord.unstable("g", [("t", 0)]) == set()
