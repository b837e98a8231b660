"""TransactionCoordinator with an in-memory `__transaction_state` and marker writer:
the request rules (fencing, CONCURRENT_TRANSACTIONS, state checks), durability before
answers, markers then Complete*, reload finishing Prepare* transactions, timeouts and
expiry."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from broker.groups.storage import StoreError, records_in
from broker.protocol.errors import ErrorCode as E
from broker.transactions.config import TxnConfig
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.log_format import decode_key, decode_value
from broker.transactions.state import TxnState as S


class MemoryStore:
    def __init__(self):
        self.data: dict[int, bytearray] = defaultdict(bytearray)
        self.fail_with = None
        self.gate: asyncio.Event | None = None  # appends wait for it when set

    async def append(self, partition: int, records: bytes) -> int:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise StoreError(self.fail_with)
        self.data[partition] += records
        return 0

    def read_all(self, partition: int):
        return list(records_in(bytes(self.data[partition])))

    def states(self, tid: str) -> list[S | None]:
        out = []
        for part in self.data:
            for k, v in self.read_all(part):
                if decode_key(k) == tid:
                    out.append(None if v is None else decode_value(tid, v).state)
        return out


class FakeMarkers:
    def __init__(self):
        self.written: list[tuple] = []
        self.hold: asyncio.Event | None = None

    async def write(self, pid, epoch, commit, coordinator_epoch, partitions, still_owner):
        if self.hold is not None:
            await self.hold.wait()
        if not still_owner():
            return False
        self.written.append((pid, epoch, commit, coordinator_epoch, frozenset(partitions)))
        return True


def make(store=None, markers=None, tv=0, **config):
    config.setdefault("num_partitions", 3)
    ids = iter(range(1000, 2000))

    async def next_pid():
        return next(ids)

    coord = TransactionCoordinator(
        store or MemoryStore(), markers or FakeMarkers(), next_pid, TxnConfig(**config), lambda: tv
    )
    for p in range(coord.config.num_partitions):
        coord.load_partition(p, 7)
    return coord


async def settle(coord):
    for _ in range(20):
        await asyncio.sleep(0)
    tasks = list(coord._completing.values())
    if tasks:
        await asyncio.gather(*tasks)


async def test_init_gives_a_producer_id_and_bumps_the_epoch_on_each_init():
    coord = make()
    assert await coord.init_producer_id("t", 60000, -1, -1, 0) == (E.NONE, 1000, 0)
    assert await coord.init_producer_id("t", 60000, -1, -1, 1) == (E.NONE, 1000, 1)
    assert coord.txns["t"].state == S.EMPTY


async def test_init_rejects_bad_timeouts_and_empty_ids():
    coord = make(max_timeout_ms=1000)
    assert (await coord.init_producer_id("t", 1001, -1, -1, 0))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await coord.init_producer_id("t", 0, -1, -1, 0))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await coord.init_producer_id("", 100, -1, -1, 0))[0] == E.INVALID_REQUEST


async def test_commit_writes_prepare_then_markers_then_complete():
    store, markers = MemoryStore(), FakeMarkers()
    coord = make(store, markers)
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    assert await coord.add_partitions("t", pid, epoch, {("a", 0), ("b", 1)}, 5) == E.NONE
    assert coord.txns["t"].state == S.ONGOING and coord.txns["t"].txn_start_ms == 5
    assert (await coord.end_txn("t", pid, epoch, True, 6))[0] == E.NONE
    assert coord.txns["t"].state == S.PREPARE_COMMIT  # answered once Prepare is durable
    await settle(coord)
    assert markers.written == [(pid, epoch, True, 7, frozenset({("a", 0), ("b", 1)}))]
    assert coord.txns["t"].state == S.COMPLETE_COMMIT and not coord.txns["t"].partitions
    assert store.states("t") == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    # a retried EndTxn of the same outcome is fine, the other is not
    assert (await coord.end_txn("t", pid, epoch, True, 7))[0] == E.NONE
    assert (await coord.end_txn("t", pid, epoch, False, 7))[0] == E.INVALID_TXN_STATE


async def test_requests_while_markers_are_written_get_concurrent_transactions():
    markers = FakeMarkers()
    markers.hold = asyncio.Event()
    coord = make(markers=markers)
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    assert (await coord.end_txn("t", pid, epoch, False, 2))[0] == E.NONE
    await asyncio.sleep(0)
    assert await coord.add_partitions("t", pid, epoch, {("a", 1)}, 3) == E.CONCURRENT_TRANSACTIONS
    assert (await coord.end_txn("t", pid, epoch, False, 3))[0] == E.CONCURRENT_TRANSACTIONS
    assert (await coord.init_producer_id("t", 60000, -1, -1, 3))[0] == E.CONCURRENT_TRANSACTIONS
    markers.hold.set()
    await settle(coord)
    assert coord.txns["t"].state == S.COMPLETE_ABORT
    assert (await coord.init_producer_id("t", 60000, -1, -1, 4))[0] == E.NONE


async def test_old_epoch_and_unknown_producer_are_refused():
    coord = make()
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.init_producer_id("t", 60000, -1, -1, 0)  # a new producer: epoch + 1
    assert await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1) == E.PRODUCER_FENCED
    assert (await coord.end_txn("t", pid, epoch, True, 1))[0] == E.PRODUCER_FENCED
    assert await coord.add_partitions("t", pid + 5, 1, {("a", 0)}, 1) == (
        E.INVALID_PRODUCER_ID_MAPPING
    )
    assert (await coord.end_txn("nope", pid, 1, True, 1))[0] == E.INVALID_PRODUCER_ID_MAPPING
    assert (await coord.end_txn("t", pid, epoch + 1, True, 1))[0] == E.INVALID_TXN_STATE  # Empty


async def test_init_during_an_ongoing_transaction_aborts_it_under_a_new_epoch():
    markers = FakeMarkers()
    coord = make(markers=markers)
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    assert (await coord.init_producer_id("t", 60000, -1, -1, 2))[0] == E.CONCURRENT_TRANSACTIONS
    await settle(coord)
    assert markers.written == [(pid, epoch + 1, False, 7, frozenset({("a", 0)}))]
    assert coord.txns["t"].state == S.COMPLETE_ABORT
    assert await coord.init_producer_id("t", 60000, -1, -1, 3) == (E.NONE, pid, epoch + 2)
    assert await coord.add_partitions("t", pid, epoch, {("a", 0)}, 4) == E.PRODUCER_FENCED


async def test_kip360_init_with_the_current_epoch_bumps_and_a_retry_gets_the_same():
    coord = make()
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    assert await coord.init_producer_id("t", 60000, pid, epoch, 1) == (E.NONE, pid, epoch + 1)
    assert await coord.init_producer_id("t", 60000, pid, epoch, 2) == (E.NONE, pid, epoch + 1)
    assert (await coord.init_producer_id("t", 60000, pid + 1, 0, 2))[0] == E.PRODUCER_FENCED


async def test_exhausted_epoch_moves_to_a_new_producer_id():
    coord = make()
    _, pid, _ = await coord.init_producer_id("t", 60000, -1, -1, 0)
    coord.txns["t"].producer_epoch = 32766
    err, new_pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 1)
    assert (err, epoch) == (E.NONE, 0) and new_pid != pid
    assert coord.txns["t"].last_producer_id == pid


async def test_failed_write_leaves_the_state_and_answers_kafkas_error():
    store = MemoryStore()
    coord = make(store)
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    store.fail_with = E.NOT_LEADER_OR_FOLLOWER
    assert await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1) == E.NOT_COORDINATOR
    store.fail_with = E.NOT_ENOUGH_REPLICAS
    assert await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1) == (
        E.COORDINATOR_NOT_AVAILABLE
    )
    assert coord.txns["t"].state == S.EMPTY and coord.txns["t"].pending is None


async def test_not_coordinator_for_partitions_not_owned():
    coord = make()
    coord.unload_partition(coord.partition_for("t"))
    assert (await coord.init_producer_id("t", 60000, -1, -1, 0))[0] == E.NOT_COORDINATOR
    assert coord.describe("t")[0] == E.NOT_COORDINATOR


async def test_reload_finishes_a_prepared_commit_with_the_new_epoch():
    store = MemoryStore()
    markers = FakeMarkers()
    markers.hold = asyncio.Event()  # the old coordinator never gets its markers out
    first = make(store, markers)
    _, pid, epoch = await first.init_producer_id("t", 60000, -1, -1, 0)
    await first.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    await first.end_txn("t", pid, epoch, True, 2)
    first.unload_partition(first.partition_for("t"))
    await first.close()
    second_markers = FakeMarkers()
    second = TransactionCoordinator(store, second_markers, None, TxnConfig(num_partitions=3))
    second.load_partition(second.partition_for("t"), 8)
    await settle(second)
    assert second_markers.written == [(pid, epoch, True, 8, frozenset({("a", 0)}))]
    assert second.txns["t"].state == S.COMPLETE_COMMIT


async def test_verify_answers_per_partition():
    coord = make()
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    assert coord.verify("t", pid, epoch, [("a", 0)]) == {("a", 0): E.INVALID_TXN_STATE}
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    assert coord.verify("t", pid, epoch, [("a", 0), ("a", 1)]) == {
        ("a", 0): E.NONE,
        ("a", 1): E.INVALID_TXN_STATE,
    }
    assert coord.verify("t", pid, epoch - 1, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}
    assert coord.verify("x", pid, epoch, [("a", 0)]) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}


async def test_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    markers = FakeMarkers()
    coord = make(markers=markers)
    _, pid, epoch = await coord.init_producer_id("t", 1000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 100)
    assert await coord.abort_timed_out(1100) == 0
    assert await coord.abort_timed_out(1101) == 1
    await settle(coord)
    assert markers.written == [(pid, epoch + 1, False, 7, frozenset({("a", 0)}))]
    assert coord.txns["t"].state == S.COMPLETE_ABORT
    assert (await coord.end_txn("t", pid, epoch, True, 1200))[0] == E.PRODUCER_FENCED


async def test_expired_ids_are_tombstoned():
    store = MemoryStore()
    coord = make(store, id_expiration_ms=1000)
    await coord.init_producer_id("t", 60000, -1, -1, 0)
    assert await coord.remove_expired(1000) == 0
    assert await coord.remove_expired(1001) == 1
    assert "t" not in coord.txns
    assert store.states("t")[-1] is None
    fresh = make(store)
    assert "t" not in fresh.txns


async def test_list_and_describe():
    coord = make()
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.init_producer_id("u", 60000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 10)
    unknown, found = coord.list(["Ongoing", "Bogus"], [], -1, 20)
    assert unknown == ["Bogus"] and [m.transactional_id for m in found] == ["t"]
    assert [m.transactional_id for m in coord.list(["Ongoing"], [], 5, 20)[1]] == ["t"]
    assert coord.list(["Ongoing"], [], 50, 20)[1] == []
    assert {m.transactional_id for m in coord.list([], [], -1, 20)[1]} == {"t", "u"}
    err, meta = coord.describe("t")
    assert err == E.NONE and meta.partitions == {("a", 0)}
    assert coord.describe("zzz")[0] == E.TRANSACTIONAL_ID_NOT_FOUND


@pytest.mark.parametrize("commit", [True, False])
async def test_adding_partitions_to_an_ongoing_transaction_accumulates(commit):
    coord = make()
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    await coord.add_partitions("t", pid, epoch, {("b", 0)}, 2)
    assert coord.txns["t"].partitions == {("a", 0), ("b", 0)}
    assert coord.txns["t"].txn_start_ms == 1
    await coord.end_txn("t", pid, epoch, commit, 3)
    await settle(coord)
    await coord.add_partitions("t", pid, epoch, {("c", 0)}, 4)
    assert coord.txns["t"].partitions == {("c", 0)} and coord.txns["t"].txn_start_ms == 4


async def test_a_failed_fence_write_leaves_the_transaction_ongoing():
    store = MemoryStore()
    coord = make(store)
    _, pid, epoch = await coord.init_producer_id("t", 1000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 0)
    store.fail_with = E.NOT_ENOUGH_REPLICAS
    assert await coord.abort_timed_out(5000) == 0
    assert coord.txns["t"].state == S.ONGOING and coord.txns["t"].producer_epoch == epoch
    store.fail_with = None
    assert await coord.abort_timed_out(5000) == 1
    await settle(coord)
    assert coord.txns["t"].state == S.COMPLETE_ABORT


async def test_no_producer_id_available_is_retriable():
    async def unavailable():
        raise StoreError(E.COORDINATOR_NOT_AVAILABLE)

    coord = TransactionCoordinator(MemoryStore(), FakeMarkers(), unavailable, TxnConfig())
    coord.load_partition(coord.partition_for("t"), 0)
    assert await coord.init_producer_id("t", 1000, -1, -1, 0) == (
        E.COORDINATOR_NOT_AVAILABLE,
        -1,
        -1,
    )
    assert "t" not in coord.txns


# -- transactions v2 (KIP-890 part 2) ------------------------------------------------------


async def test_v2_end_bumps_the_epoch_and_the_markers_carry_it():
    store, markers = MemoryStore(), FakeMarkers()
    coord = make(store, markers)
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    assert await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1, client_tv=2) == E.NONE
    assert await coord.end_txn("t", pid, epoch, True, 2, client_tv=2) == (E.NONE, pid, epoch + 1)
    assert coord.txns["t"].producer_epoch == epoch + 1  # bumped with PrepareCommit
    await settle(coord)
    assert markers.written == [(pid, epoch + 1, True, 7, frozenset({("a", 0)}))]
    # The EndTxn retried with the old epoch is answered with the bumped one.
    assert await coord.end_txn("t", pid, epoch, True, 3, client_tv=2) == (E.NONE, pid, epoch + 1)
    # The next transaction runs under the bumped epoch; the old one is fenced.
    assert await coord.add_partitions("t", pid, epoch, {("a", 0)}, 4, client_tv=2) == (
        E.PRODUCER_FENCED
    )
    assert await coord.add_partitions("t", pid, epoch + 1, {("a", 1)}, 4, client_tv=2) == E.NONE
    assert await coord.end_txn("t", pid, epoch, False, 5, client_tv=2) == (
        E.PRODUCER_FENCED,
        -1,
        -1,
    )
    assert await coord.end_txn("t", pid, epoch + 1, False, 5, client_tv=2) == (
        E.NONE,
        pid,
        epoch + 2,
    )
    await settle(coord)
    assert markers.written[-1] == (pid, epoch + 2, False, 7, frozenset({("a", 1)}))


async def test_v1_end_keeps_the_epoch():
    markers = FakeMarkers()
    coord = make(markers=markers)
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    assert await coord.end_txn("t", pid, epoch, True, 2) == (E.NONE, pid, epoch)
    await settle(coord)
    assert markers.written == [(pid, epoch, True, 7, frozenset({("a", 0)}))]


async def test_v2_end_moves_to_a_new_producer_id_when_the_epoch_runs_out():
    store, markers = MemoryStore(), FakeMarkers()
    coord = make(store, markers, tv=2)
    _, pid, _ = await coord.init_producer_id("t", 60000, -1, -1, 0)
    meta = coord.txns["t"]
    meta.producer_epoch = 32766  # the last epoch a producer may run transactions under
    await coord.add_partitions("t", pid, 32766, {("a", 0)}, 1, client_tv=2)
    err, new_pid, new_epoch = await coord.end_txn("t", pid, 32766, True, 2, client_tv=2)
    assert (err, new_epoch) == (E.NONE, 0) and new_pid != pid
    await settle(coord)
    assert markers.written == [(pid, 32767, True, 7, frozenset({("a", 0)}))]
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (new_pid, 0, pid)
    # a retry under the old id is recognised after the rotation
    assert await coord.end_txn("t", pid, 32766, True, 3, client_tv=2) == (E.NONE, new_pid, 0)
    # and the rotation survives a reload from __transaction_state (value version 1)
    reloaded = make(store, FakeMarkers(), tv=2).txns["t"]
    assert (reloaded.producer_id, reloaded.producer_epoch) == (new_pid, 0)
    assert (reloaded.last_producer_id, reloaded.client_tv) == (pid, 2)


async def test_timeout_abort_of_a_v2_transaction_lets_its_producer_abort_and_go_on():
    markers = FakeMarkers()
    coord = make(markers=markers)
    _, pid, epoch = await coord.init_producer_id("t", 1000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1, client_tv=2)
    assert await coord.abort_timed_out(5000) == 1
    await settle(coord)
    assert markers.written == [(pid, epoch + 1, False, 7, frozenset({("a", 0)}))]
    # The producer's abort (old epoch) is the retry of what the coordinator did.
    assert await coord.end_txn("t", pid, epoch, False, 6000, client_tv=2) == (
        E.NONE,
        pid,
        epoch + 1,
    )
    assert (await coord.end_txn("t", pid, epoch, True, 6000, client_tv=2))[0] == (
        E.INVALID_TXN_STATE
    )


async def test_verify_answers_what_the_caller_asks_for_partitions_not_added():
    coord = make()
    _, pid, epoch = await coord.init_producer_id("t", 60000, -1, -1, 0)
    await coord.add_partitions("t", pid, epoch, {("a", 0)}, 1)
    assert coord.verify("t", pid, epoch, [("a", 0), ("a", 1)], E.TRANSACTION_ABORTABLE) == {
        ("a", 0): E.NONE,
        ("a", 1): E.TRANSACTION_ABORTABLE,
    }
    assert coord.verify("t", pid, epoch, [("a", 1)]) == {("a", 1): E.INVALID_TXN_STATE}
