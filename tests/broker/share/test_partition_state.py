"""The share-partition state machine (broker.share.partition_state), pure: examples
of each transition, and hypothesis driving random acquisitions, acknowledgements,
member departures and lock expiries against the invariants of KIP-932."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import ErrorCode
from broker.share.partition_state import (
    AckType,
    Acquired,
    LogBatch,
    RecordState,
    SharePartitionState,
)

LOCK = 1000


def state(start=0, limit=3, max_in_flight=100) -> SharePartitionState:
    return SharePartitionState(start, LOCK, limit, max_in_flight)


def log_of(n: int, per_batch: int = 1, start: int = 0) -> list[LogBatch]:
    return [
        LogBatch(o, min(o + per_batch, start + n) - 1) for o in range(start, start + n, per_batch)
    ]


def read(sp: SharePartitionState, batches: list[LogBatch]) -> list[LogBatch]:
    """What a read of the log at the next fetch offset returns: batches from the one
    holding it on."""
    offset = sp.next_fetch_offset()
    if offset is None:
        return []
    return [b for b in batches if b.last_offset >= offset]


def test_acquire_then_accept_moves_the_start():
    sp = state()
    got = sp.acquire("a", log_of(5), 10, 0)
    assert got == [Acquired(0, 4, 1)]
    assert sp.acknowledge("a", 0, 4, [AckType.ACCEPT]) == ErrorCode.NONE
    assert (sp.start, sp.end, sp.records) == (5, 5, {})


def test_other_members_get_only_what_is_available():
    sp = state()
    log = log_of(6, per_batch=3)
    assert sp.acquire("a", log, 2, 0) == [Acquired(0, 2, 1)]  # whole batches
    assert sp.acquire("b", read(sp, log), 10, 0) == [Acquired(3, 5, 1)]
    assert sp.acquire("c", read(sp, log), 10, 0) == []


def test_release_redelivers_with_the_next_delivery_count():
    sp = state()
    sp.acquire("a", log_of(2), 10, 0)
    assert sp.acknowledge("a", 0, 0, [AckType.RELEASE]) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", log_of(2), 10, 0) == [Acquired(0, 0, 2)]


def test_reject_archives_for_good():
    sp = state()
    sp.acquire("a", log_of(3), 10, 0)
    assert sp.acknowledge("a", 0, 2, [AckType.ACCEPT, AckType.REJECT, AckType.RELEASE]) == 0
    assert sp.start == 2  # 0 accepted, 1 archived: both behind the start
    assert sp.acquire("b", read(sp, log_of(3)), 10, 0) == [Acquired(2, 2, 2)]


def test_lock_expiry_releases_and_the_limit_archives():
    sp = state(limit=2)
    sp.acquire("a", log_of(1), 10, 0)
    assert sp.expire_locks(LOCK - 1) == 0
    assert sp.expire_locks(LOCK) == 1
    assert sp.acquire("b", log_of(1), 10, LOCK) == [Acquired(0, 0, 2)]
    assert sp.expire_locks(2 * LOCK) == 1
    assert sp.state_of(0) == RecordState.ACKNOWLEDGED  # archived, then passed by the start
    assert sp.start == 1 and sp.acquire("c", log_of(1), 10, 0) == []


def test_acknowledging_what_another_member_holds_changes_nothing():
    sp = state()
    sp.acquire("a", log_of(3), 10, 0)
    assert sp.acknowledge("b", 0, 2, [AckType.ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 2, 3, [AckType.ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 0, 1, [1, 2, 3]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 0, [9]) == ErrorCode.INVALID_REQUEST
    assert all(sp.state_of(o) == RecordState.ACQUIRED for o in range(3))


def test_control_batches_and_compacted_gaps_are_archived():
    sp = state()
    log = [LogBatch(0, 1), LogBatch(2, 2, is_control=True), LogBatch(5, 6)]
    assert sp.acquire("a", log, 10, 0) == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    assert [sp.state_of(o) for o in (2, 3, 4)] == [RecordState.ARCHIVED] * 3
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT])
    assert sp.start == 5


def test_a_gap_acknowledgement_settles_an_offset_that_was_no_record():
    sp = state()
    sp.acquire("a", [LogBatch(0, 3)], 10, 0)
    types = [AckType.ACCEPT, AckType.GAP, AckType.GAP, AckType.ACCEPT]
    assert sp.acknowledge("a", 0, 3, types) == ErrorCode.NONE
    assert sp.start == 4


def test_in_flight_limit_holds_back_acquisition_until_the_start_moves():
    sp = state(max_in_flight=4)
    log = log_of(10)
    assert sp.acquire("a", log, 100, 0) == [Acquired(0, 3, 1)]
    assert sp.next_fetch_offset() is None
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT])
    assert sp.acquire("a", read(sp, log), 100, 0) == [Acquired(4, 5, 1)]


def test_release_member_frees_only_its_records():
    sp = state()
    sp.acquire("a", log_of(2), 1, 0)
    sp.acquire("b", read(sp, log_of(2)), 1, 0)
    assert sp.release_member("a") == 1
    assert sp.state_of(0) == RecordState.AVAILABLE and sp.state_of(1) == RecordState.ACQUIRED


def test_the_start_follows_the_log_start():
    sp = state()
    sp.acquire("a", log_of(3), 10, 0)
    sp.move_start(2)
    assert sp.start == 2 and sp.acknowledge("a", 0, 0, [AckType.ACCEPT]) != ErrorCode.NONE


def test_snapshot_and_restore_keep_states_and_counts_and_drop_locks():
    sp = state()
    sp.acquire("a", log_of(6), 10, 0)
    sp.acknowledge("a", 1, 1, [AckType.ACCEPT])
    sp.acknowledge("a", 2, 2, [AckType.RELEASE])
    sp.acknowledge("a", 3, 3, [AckType.REJECT])
    start, runs = sp.snapshot()
    again = state()
    again.restore(start, runs)
    assert again.start == 0 and again.end == 6
    assert [again.state_of(o) for o in range(6)] == [
        RecordState.AVAILABLE,
        RecordState.ACKNOWLEDGED,
        RecordState.AVAILABLE,
        RecordState.ARCHIVED,
        RecordState.AVAILABLE,
        RecordState.AVAILABLE,
    ]
    assert again.acquire("b", log_of(6), 1, 0) == [Acquired(0, 0, 2)]


# -- random walks ------------------------------------------------------------------------

MEMBERS = ["a", "b", "c"]

step = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 8)),
    st.tuples(
        st.just("ack"),
        st.sampled_from(MEMBERS),
        st.lists(st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT]), min_size=1),
    ),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.just(0)),
    st.tuples(st.just("tick"), st.just(""), st.integers(0, 2 * LOCK)),
)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    steps=st.lists(step, max_size=60),
    limit=st.integers(2, 4),
    max_in_flight=st.integers(1, 20),
)
def test_random_walks_keep_the_invariants(sizes, steps, limit, max_in_flight):
    log, offset = [], 0
    for size in sizes:
        log.append(LogBatch(offset, offset + size - 1))
        offset += size
    sp = state(limit=limit, max_in_flight=max_in_flight)
    now = 0
    deliveries: dict[int, int] = {}
    settled: set[int] = set()
    for kind, member, arg in steps:
        if kind == "acquire":
            before = {o: sp.state_of(o) for o in range(offset)}
            for run in sp.acquire(member, read(sp, log), arg, now):
                for o in range(run.first_offset, run.last_offset + 1):
                    assert before[o] == RecordState.AVAILABLE and o not in settled
                    deliveries[o] = deliveries.get(o, 0) + 1
                    assert run.delivery_count == deliveries[o] <= limit
        elif kind == "ack":
            held = sorted(
                o
                for o, r in sp.records.items()
                if r.state is RecordState.ACQUIRED and r.member == member
            )
            for o, ack in zip(held, arg, strict=False):
                assert sp.acknowledge(member, o, o, [ack]) == ErrorCode.NONE
                if ack != AckType.RELEASE or deliveries[o] >= limit:
                    settled.add(o)
        elif kind == "leave":
            sp.release_member(member)
        else:
            now += arg
            sp.expire_locks(now)
        assert sp.end - sp.start <= max_in_flight
        assert all(sp.start <= o < sp.end for o in sp.records)
        assert len(sp.records) == sp.end - sp.start
        for o, r in sp.records.items():
            assert r.delivery_count <= limit
            assert (r.state is RecordState.ACQUIRED) == (r.member is not None)
            if o in settled:
                assert r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        if sp.records:
            assert sp.records[sp.start].state not in (
                RecordState.ACKNOWLEDGED,
                RecordState.ARCHIVED,
            )
