"""The share coordinator (broker.share.state_store) over an in-memory store: writes
merged and replayed by a new coordinator, fencing by leader and state epochs,
initialization (AlterShareGroupOffsets) replacing a state, tombstones, and refusals
for partitions it does not lead."""

from __future__ import annotations

import asyncio

from broker.protocol import ErrorCode
from broker.share.state_store import ShareStateStore
from tests.broker.groups.fakes import MemoryStore

KEY = ("g", "0123456789abcdef0123456789abcdef", 0)


def store_leading_all(memory: MemoryStore | None = None, partitions: int = 3) -> ShareStateStore:
    store = ShareStateStore(memory or MemoryStore(), partitions)
    for index in range(partitions):
        store.load_partition(index)
    return store


def test_a_write_is_merged_and_a_new_coordinator_replays_it():
    async def go():
        memory = MemoryStore()
        store = store_leading_all(memory)
        code, fresh = store.read(KEY, 0)
        assert code == ErrorCode.NONE and fresh.start_offset == -1  # never initialized
        assert await store.write(KEY, 0, 1, 10, [(10, 14, 0, 1)]) == ErrorCode.NONE
        assert await store.write(KEY, 0, 1, 12, [(13, 13, 2, 1)]) == ErrorCode.NONE
        replayed = store_leading_all(memory)
        code, state = replayed.read(KEY, 1)
        assert code == ErrorCode.NONE
        assert (state.start_offset, state.batches) == (
            12,
            [(12, 12, 0, 1), (13, 13, 2, 1), (14, 14, 0, 1)],
        )
        assert await replayed.delete(KEY) == ErrorCode.NONE
        assert store_leading_all(memory).read(KEY, 1)[1].start_offset == -1

    asyncio.run(go())


def test_older_leader_and_state_epochs_are_fenced():
    async def go():
        store = store_leading_all()
        assert await store.write(KEY, 2, 5, 0, []) == ErrorCode.NONE
        assert await store.write(KEY, 2, 4, 0, []) == ErrorCode.FENCED_LEADER_EPOCH
        assert await store.write(KEY, 1, 5, 0, []) == ErrorCode.FENCED_STATE_EPOCH
        assert store.read(KEY, 4)[0] == ErrorCode.FENCED_LEADER_EPOCH
        assert store.read(KEY, 6)[0] == ErrorCode.NONE
        assert store.read(KEY, -1)[0] == ErrorCode.NONE  # the admin's read

    asyncio.run(go())


def test_initialize_replaces_the_state_and_fences_the_old_epoch():
    async def go():
        memory = MemoryStore()
        store = store_leading_all(memory)
        assert await store.write(KEY, 0, 3, 10, [(10, 11, 2, 1), (12, 14, 0, 2)]) == ErrorCode.NONE
        assert await store.initialize(KEY, 1, 4) == ErrorCode.NONE
        code, state = store_leading_all(memory).read(KEY, 3)
        assert code == ErrorCode.NONE
        assert (state.state_epoch, state.start_offset, state.batches) == (1, 4, [])
        # the leader that loaded the old state cannot write it back
        assert await store.write(KEY, 0, 3, 12, [(12, 14, 2, 2)]) == ErrorCode.FENCED_STATE_EPOCH
        assert await store.initialize(KEY, 0, 0) == ErrorCode.FENCED_STATE_EPOCH
        assert store.read(KEY, -1)[1].start_offset == 4

    asyncio.run(go())


def test_deleting_a_state_never_written_writes_nothing():
    async def go():
        memory = MemoryStore()
        store = store_leading_all(memory)
        assert await store.delete(KEY) == ErrorCode.NONE
        assert list(memory.read_all(store.partition_for(KEY))) == []

    asyncio.run(go())


def test_a_failed_append_answers_its_code_and_changes_nothing():
    async def go():
        memory = MemoryStore()
        store = store_leading_all(memory)
        assert await store.write(KEY, 0, 0, 5, []) == ErrorCode.NONE
        memory.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        assert await store.write(KEY, 0, 0, 9, []) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert store.read(KEY, 0)[1].start_offset == 5

    asyncio.run(go())


def test_a_partition_not_led_here_is_not_coordinated():
    async def go():
        store = store_leading_all()
        store.unload_partition(store.partition_for(KEY))
        assert store.read(KEY, 0) == (ErrorCode.NOT_COORDINATOR, None)
        assert await store.write(KEY, 0, 0, 0, []) == ErrorCode.NOT_COORDINATOR

    asyncio.run(go())
