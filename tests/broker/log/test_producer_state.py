import dataclasses
import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import LogConfig, PartitionLog
from broker.log.producer_entry import INT32_MAX
from broker.log.producer_state import (
    APPEND,
    ProducerStateError,
    ProducerStateManager,
    snapshot_name,
)
from broker.protocol.errors import ErrorCode
from broker.protocol.records import BatchBuilder, RecordBatch

DAY = 86_400_000


@dataclasses.dataclass
class Batch:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int = 1
    base_offset: int = -1
    max_timestamp: int = 0
    is_transactional: bool = False
    is_control: bool = False

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.count - 1) % (INT32_MAX + 1)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1


class FakeLog:
    """Appends through the producer state the way a partition does."""

    def __init__(self, state: ProducerStateManager):
        self.state = state
        self.batches: list[Batch] = []
        self.end = 0

    def produce(self, batch: Batch, now: int = 1000):
        verdict = self.state.check(batch)
        if not verdict.append:
            return verdict
        stored = dataclasses.replace(batch, base_offset=self.end, max_timestamp=now)
        self.batches.append(stored)
        self.end += batch.count
        self.state.update(stored, stored.base_offset, stored.last_offset, now)
        return verdict

    def batches_from(self, offset):
        return (b for b in self.batches if b.last_offset >= offset)


def make(tmp_path):
    return FakeLog(ProducerStateManager(tmp_path))


def test_no_producer_id_always_appends(tmp_path):
    log = make(tmp_path)
    assert log.produce(Batch(-1, -1, -1)) is APPEND
    assert log.produce(Batch(-1, -1, -1)) is APPEND
    assert log.state.producers == {}


def test_duplicates_of_last_five_batches_return_original_offsets(tmp_path):
    log = make(tmp_path)
    for i in range(7):
        assert log.produce(Batch(7, 0, i * 3, count=3)).append
    # Batches 2..6 (the last five) are recognised with their offsets.
    for i in range(2, 7):
        v = log.state.check(Batch(7, 0, i * 3, count=3))
        assert v.error == ErrorCode.NONE
        assert v.duplicate == (i * 3, i * 3 + 2)
    # Older ones fall out of the window: an out-of-order sequence, as in Kafka.
    assert log.state.check(Batch(7, 0, 3, count=3)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.end == 21


def test_gap_is_out_of_order(tmp_path):
    log = make(tmp_path)
    log.produce(Batch(1, 0, 0, count=2))
    assert log.produce(Batch(1, 0, 3)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.produce(Batch(1, 0, 2)).append


def test_stale_epoch_is_refused(tmp_path):
    log = make(tmp_path)
    log.produce(Batch(1, 3, 0))
    assert log.produce(Batch(1, 2, 1)).error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_epoch_bump_resets_sequence(tmp_path):
    log = make(tmp_path)
    log.produce(Batch(1, 0, 0, count=5))
    assert log.produce(Batch(1, 1, 5)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.produce(Batch(1, 1, 0)).append
    # The previous epoch's batches are no longer duplicates: stale epoch instead.
    assert log.state.check(Batch(1, 0, 0, count=5)).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.produce(Batch(1, 1, 1)).append


def test_unknown_producer_accepted_with_any_sequence(tmp_path):
    log = make(tmp_path)
    assert log.produce(Batch(9, 0, 42)).append
    assert log.produce(Batch(9, 0, 44)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_wraps_at_int32_max(tmp_path):
    log = make(tmp_path)
    assert log.produce(Batch(1, 0, INT32_MAX - 1, count=2)).append
    assert log.produce(Batch(1, 0, 0, count=2)).append
    assert log.state.check(Batch(1, 0, INT32_MAX - 1, count=2)).duplicate == (0, 1)


def test_batch_spanning_the_wrap(tmp_path):
    log = make(tmp_path)
    log.produce(Batch(1, 0, INT32_MAX - 2, count=2))
    wrap = Batch(1, 0, INT32_MAX, count=3)
    assert wrap.last_sequence == 1
    assert log.produce(wrap).append
    assert log.state.check(wrap).duplicate == (2, 4)
    assert log.produce(Batch(1, 0, 2)).append


def test_snapshot_round_trip(tmp_path):
    log = make(tmp_path)
    for pid in (1, 2):
        for i in range(6):
            log.produce(Batch(pid, pid, i))
    log.state.take_snapshot(log.end)
    assert (tmp_path / snapshot_name(12)).exists()
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, log.end, log.batches_from, now_ms=2000)
    for pid in (1, 2):
        assert fresh.producers[pid].epoch == pid
        assert list(fresh.producers[pid].batches) == list(log.state.producers[pid].batches)
        for i in range(1, 6):
            assert fresh.check(Batch(pid, pid, i)).duplicate is not None


def test_recovery_from_snapshot_plus_log(tmp_path):
    log = make(tmp_path)
    for i in range(3):
        log.produce(Batch(1, 0, i))
    log.state.take_snapshot(log.end)
    for i in range(3, 5):
        log.produce(Batch(1, 0, i))
    log.produce(Batch(2, 0, 0))
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, log.end, log.batches_from, now_ms=2000)
    assert fresh.check(Batch(1, 0, 4)).duplicate == (4, 4)
    assert fresh.check(Batch(1, 0, 5)).append
    assert fresh.check(Batch(2, 0, 0)).duplicate == (5, 5)


def test_recovery_without_snapshot_replays_whole_log(tmp_path):
    log = make(tmp_path)
    for i in range(4):
        log.produce(Batch(1, 0, i))
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, log.end, log.batches_from, now_ms=2000)
    assert fresh.check(Batch(1, 0, 3)).duplicate == (3, 3)


def test_corrupt_snapshot_falls_back_to_older(tmp_path):
    log = make(tmp_path)
    log.produce(Batch(1, 0, 0))
    log.state.take_snapshot(1)
    log.produce(Batch(1, 0, 1))
    path = log.state.take_snapshot(2)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, log.end, log.batches_from, now_ms=2000)
    assert not path.exists()
    assert fresh.check(Batch(1, 0, 1)).duplicate == (1, 1)


def test_truncation_drops_later_state_and_snapshots(tmp_path):
    log = make(tmp_path)
    for i in range(3):
        log.produce(Batch(1, 0, i))
    log.state.take_snapshot(3)
    for i in range(3, 6):
        log.produce(Batch(1, 0, i))
    log.state.take_snapshot(6)
    # The log loses offsets 4 and 5 (a divergent leader's tail).
    log.batches = log.batches[:4]
    log.end = 4
    log.state.truncate_to(0, 4, log.batches_from, now_ms=2000)
    assert log.state.snapshot_offsets() == [3]
    assert log.state.check(Batch(1, 0, 3)).duplicate == (3, 3)
    assert log.state.check(Batch(1, 0, 4)).append


def test_truncate_fully_forgets_everything(tmp_path):
    log = make(tmp_path)
    log.produce(Batch(1, 0, 0))
    log.state.take_snapshot(1)
    log.state.truncate_fully()
    assert log.state.producers == {} and log.state.snapshot_offsets() == []


def test_expiry(tmp_path):
    state = ProducerStateManager(tmp_path, expiration_ms=DAY)
    log = FakeLog(state)
    log.produce(Batch(1, 0, 0), now=1000)
    log.produce(Batch(2, 0, 0), now=5000)
    assert state.remove_expired(DAY + 1000) == 1
    assert set(state.producers) == {2}
    state.take_snapshot(log.end)
    fresh = ProducerStateManager(tmp_path, expiration_ms=DAY)
    fresh.load(0, log.end, log.batches_from, now_ms=DAY + 5000)
    assert fresh.producers == {}


def test_delete_snapshots_below_keeps_newest(tmp_path):
    state = ProducerStateManager(tmp_path)
    for o in (10, 20, 30):
        state.take_snapshot(o)
    state.delete_snapshots_below(25)
    assert state.snapshot_offsets() == [30]
    state.delete_snapshots_below(100)
    assert state.snapshot_offsets() == [30]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(-2, 3), st.integers(1, 3)),
        max_size=40,
    )
)
def test_model_no_batch_is_appended_twice(tmp_path_factory, ops):
    """Random retries, gaps and epoch bumps: the log never holds a sequence range
    twice for one (producer, epoch), and each producer's sequences stay contiguous."""
    log = FakeLog(ProducerStateManager(tmp_path_factory.mktemp("ps")))
    next_seq: dict[tuple[int, int], int] = {}
    for pid, epoch, delta, count in ops:
        base = max(0, next_seq.get((pid, epoch), 0) + delta)
        v = log.produce(Batch(pid, epoch, base, count=count))
        if v.append:
            next_seq[(pid, epoch)] = base + count
    seen = set()
    last: dict[int, tuple[int, int]] = {}
    for b in log.batches:
        key = (b.producer_id, b.producer_epoch, b.base_sequence)
        assert key not in seen
        seen.add(key)
        prev = last.get(b.producer_id)
        if prev is not None:
            assert b.producer_epoch >= prev[0]
            if b.producer_epoch == prev[0]:
                assert b.base_sequence == prev[1] + 1
            else:
                assert b.base_sequence == 0
        last[b.producer_id] = (b.producer_epoch, b.last_sequence)


def idempotent_append(plog, state, records: bytes, now: int = 1000):
    """The produce path as wired into PartitionLog: check, append, update."""
    batch = RecordBatch(records)
    verdict = state.check(batch)
    if verdict.duplicate is not None:
        return verdict.duplicate[0]
    if not verdict.append:
        raise ProducerStateError(verdict.error)
    info = plog.append(records)
    state.update(batch, info.first_offset, info.last_offset, now)
    return info.first_offset


def test_with_a_real_partition_log_across_rolls_and_reopen(tmp_path):
    def batch(pid, epoch, seq, n=2):
        b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        for i in range(n):
            b.append(b"v%d" % (seq + i), timestamp_ms=1000)
        return b.build()

    config = LogConfig(segment_bytes=300)
    plog = PartitionLog(tmp_path / "t-0", config)
    state = ProducerStateManager(plog.dir)
    offsets = [idempotent_append(plog, state, batch(5, 0, seq)) for seq in range(0, 20, 2)]
    assert offsets == list(range(0, 20, 2))
    assert len(plog.segments) > 2
    assert idempotent_append(plog, state, batch(5, 0, 16)) == 16  # a retry: not appended
    assert plog.log_end_offset == 20
    with pytest.raises(ProducerStateError) as e:
        idempotent_append(plog, state, batch(5, 0, 30))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    state.take_snapshot(plog.segments[2].base_offset)  # as at a roll, mid-log
    plog.close()

    plog = PartitionLog(tmp_path / "t-0", config, clean_shutdown=True)
    fresh = ProducerStateManager(plog.dir)
    fresh.load(
        plog.log_start_offset,
        plog.log_end_offset,
        lambda o: (b for _, b in plog.segments.batches_from(o)),
        now_ms=2000,
    )
    assert idempotent_append(plog, fresh, batch(5, 0, 18)) == 18
    assert idempotent_append(plog, fresh, batch(5, 0, 20)) == 20
    assert plog.log_end_offset == 22
    plog.close()


def _idempotent(seq: int, n: int = 2) -> bytes:
    b = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=seq)
    for i in range(n):
        b.append(b"v%d" % (seq + i), timestamp_ms=1000)
    return b.build()


def test_a_roll_snapshot_is_fsynced_by_the_flush_thread_not_the_event_loop(tmp_path, monkeypatch):
    """Kafka's way: written at the roll without fsync, fsynced with the finished
    segment before the recovery point passes it. The close snapshot is fsynced."""
    real_fsync = os.fsync
    synced = []  # (on the main thread, path)

    def fsync(fd):
        here = threading.current_thread() is threading.main_thread()
        synced.append((here, os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    plog.append(_idempotent(0))  # (fsyncs the new leader-epoch checkpoint)
    synced.clear()
    plog.roll()
    assert [path for main, path in synced if main] == []
    snapshot = str(plog.dir / snapshot_name(2))
    assert os.path.exists(snapshot)
    plog.flush()  # waits for the roll's flush
    assert (False, snapshot) in synced
    assert plog.recovery_point == 2
    plog.append(_idempotent(2))
    synced.clear()
    plog.close()
    closing = str(plog.dir / snapshot_name(4))  # fsynced as its temp file, then renamed
    assert any(main and path.startswith(closing) for main, path in synced)


def test_a_torn_roll_snapshot_is_rebuilt_from_the_log(tmp_path):
    """What a power cut before the roll's flush can leave: an empty snapshot file.
    Recovery falls back to the log and still knows every retry."""
    config = LogConfig(segment_bytes=300)
    plog = PartitionLog(tmp_path / "t-0", config)
    for seq in range(0, 20, 2):
        plog.append(_idempotent(seq))
    assert len(plog.segments) > 2
    newest = plog.producer_state.snapshot_offsets()[-1]
    (plog.dir / snapshot_name(newest)).write_bytes(b"")
    plog.local_log.reap_flushes(wait=True)  # a crash: no close, no clean-shutdown snapshot
    reopened = PartitionLog(tmp_path / "t-0", config, recovery_point=plog.recovery_point)
    assert newest not in reopened.producer_state.snapshot_offsets()
    for seq in (14, 16, 18):
        info = reopened.append(_idempotent(seq))
        assert (info.first_offset, info.size) == (seq, 0)  # a duplicate, not appended
    assert reopened.log_end_offset == 20
    with pytest.raises(ProducerStateError):
        reopened.append(_idempotent(30))
    reopened.close()
    plog.close()
