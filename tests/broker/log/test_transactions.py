"""Transactions in a partition log: producer-state rules, markers, the last stable
offset's inputs, snapshots and replay, follower appends, recovery and compaction."""

import time

import pytest

from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.log.producer_snapshot import encode
from broker.log.producer_state import (
    UNVERIFIED,
    CompletedTxn,
    ProducerStateError,
    ProducerStateManager,
    snapshot_name,
)
from broker.log.txn_index import AbortedTxn
from broker.protocol.errors import ErrorCode
from broker.protocol.records import BatchBuilder, iter_batches
from tests.broker.log.util import read_all

PID, OTHER = 7, 8
NOW_MS = int(time.time() * 1000)


def txn_batch(seq: int, *values: bytes, pid=PID, epoch=0, transactional=True, keys=None):
    b = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    for i, v in enumerate(values):
        b.append(v, key=None if keys is None else keys[i], timestamp_ms=NOW_MS)
    return b.build()


def plain_batch(*values: bytes, keys=None):
    b = BatchBuilder()
    for i, v in enumerate(values):
        b.append(v, key=None if keys is None else keys[i], timestamp_ms=NOW_MS)
    return b.build()


def open_log(path, **config):
    """Open as after a clean shutdown (close() flushed everything)."""
    return PartitionLog(path / "t-0", LogConfig(**config), clean_shutdown=True)


def crash(log: PartitionLog) -> None:
    """Drop the log as a killed process would: no snapshot, no final flush."""
    log.local_log.reap_flushes(wait=True)
    for seg in log.segments:
        seg.close()


def reopen_after_crash(path, **config):
    return PartitionLog(path / "t-0", LogConfig(**config), recovery_point=0)


def error_of(call) -> ErrorCode:
    with pytest.raises(ProducerStateError) as e:
        call()
    return e.value.code


def test_transaction_opens_at_its_first_batch_and_a_marker_ends_it(tmp_path):
    log = open_log(tmp_path)
    log.append(plain_batch(b"before"))
    log.append(txn_batch(0, b"a", b"b"))
    log.append(txn_batch(2, b"c"))
    ps = log.producer_state
    assert ps.ongoing == {1: PID} and ps.has_ongoing(PID)
    assert log.first_unstable_offset(high_watermark=4) == 1
    log.append_txn_marker(PID, 0, commit=True, coordinator_epoch=3)
    assert not ps.has_ongoing(PID)
    assert list(ps.unreplicated) == [CompletedTxn(PID, 1, 4, aborted=False)]
    # Stable only once the high watermark passed the marker (offset 4).
    assert log.first_unstable_offset(high_watermark=4) == 1
    assert log.first_unstable_offset(high_watermark=5) is None
    assert not ps.unreplicated
    assert not log.has_aborted and log.collect_aborted(0, 10) == []
    log.close()


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a"))
    code = error_of(lambda: log.append(txn_batch(1, b"b", transactional=False)))
    assert code == ErrorCode.INVALID_TXN_STATE
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    log.append(txn_batch(1, b"b", transactional=False))  # no transaction now: fine
    log.close()


def test_marker_epochs_are_checked(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a", epoch=5))
    stale = lambda: log.append_txn_marker(PID, 4, commit=True, coordinator_epoch=1)  # noqa: E731
    assert error_of(stale) == ErrorCode.INVALID_PRODUCER_EPOCH
    log.append_txn_marker(PID, 5, commit=True, coordinator_epoch=2)
    fenced = lambda: log.append_txn_marker(PID, 5, commit=True, coordinator_epoch=1)  # noqa: E731
    assert error_of(fenced) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # A coordinator aborting on timeout bumps the epoch: the producer's old epoch is fenced.
    log.append(txn_batch(0, b"b", epoch=6))
    log.append_txn_marker(PID, 7, commit=False, coordinator_epoch=2)
    assert error_of(lambda: log.append(txn_batch(1, b"c", epoch=6))) == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert log.log_end_offset == 4
    log.close()


def test_marker_without_a_transaction_completes_nothing(tmp_path):
    log = open_log(tmp_path)
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    assert not log.producer_state.unreplicated and not log.has_aborted
    log.close()


def test_clients_may_not_write_control_batches(tmp_path):
    log = open_log(tmp_path)
    b = BatchBuilder(producer_id=PID, producer_epoch=0, is_transactional=True, is_control=True)
    b.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x01")
    assert error_of(lambda: log.append(b.build())) == ErrorCode.INVALID_RECORD
    log.close()


def test_abort_is_indexed_with_the_stable_offset_after_it(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a", pid=PID))  # 0
    log.append(txn_batch(0, b"b", pid=OTHER))  # 1
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)  # 2
    log.append_txn_marker(OTHER, 0, commit=False, coordinator_epoch=0)  # 3
    entries = log.active.txn_index.entries
    assert entries == [AbortedTxn(PID, 0, 2, 1), AbortedTxn(OTHER, 1, 3, 4)]
    assert log.collect_aborted(0, 4) == entries
    assert log.collect_aborted(3, 4) == [entries[1]]
    assert log.first_unstable_offset(high_watermark=3) == 1
    assert log.first_unstable_offset(high_watermark=4) is None
    log.close()


def test_ongoing_transaction_survives_close_and_reopen(tmp_path):
    log = open_log(tmp_path)
    log.append(plain_batch(b"x"))
    log.append(txn_batch(0, b"a"))
    log.close()
    log = open_log(tmp_path)
    assert log.producer_state.ongoing == {1: PID}
    entry = log.producer_state.producers[PID]
    assert entry.txn_first_offset == 1
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=9)
    assert log.collect_aborted(0, 10) == [AbortedTxn(PID, 1, 2, 3)]
    log.close()
    log = open_log(tmp_path)
    assert log.producer_state.producers[PID].coordinator_epoch == 9
    assert log.has_aborted and log.collect_aborted(0, 10) == [AbortedTxn(PID, 1, 2, 3)]
    log.close()


def test_version_1_snapshot_is_still_read(tmp_path):
    state = ProducerStateManager(tmp_path)
    state.update(_Header(PID, 2, 0, 0, 0), 0, 0, 1000)
    (tmp_path / snapshot_name(1)).write_bytes(encode(state.producers.values(), version=1))
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, 1, lambda offset: iter(()), now_ms=1000)
    entry = fresh.producers[PID]
    assert (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset) == (2, -1, None)
    assert entry.batches[0].first_offset == 0


class _Header:
    def __init__(self, pid, epoch, seq, base, last, transactional=False):
        self.producer_id, self.producer_epoch = pid, epoch
        self.base_sequence = self.last_sequence = seq
        self.base_offset, self.last_offset = base, last
        self.max_timestamp = 1000
        self.is_transactional, self.is_control = transactional, False


def test_truncation_below_a_transaction_start_forgets_it(tmp_path):
    log = open_log(tmp_path)
    log.append(plain_batch(b"x"))
    log.append(txn_batch(0, b"a"))
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    log.truncate_to(2)  # the marker goes: the transaction is ongoing again
    assert log.producer_state.ongoing == {1: PID}
    assert log.collect_aborted(0, 10) == []
    log.truncate_to(1)
    assert log.producer_state.ongoing == {}
    assert log.first_unstable_offset(high_watermark=1) is None
    log.close()


def test_expiry_keeps_producers_with_a_transaction_ongoing(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a", pid=PID))
    log.append(txn_batch(0, b"b", pid=OTHER, transactional=False))
    assert log.producer_state.remove_expired(NOW_MS + 10**10) == 1
    assert set(log.producer_state.producers) == {PID}
    log.close()


def test_follower_carries_markers_into_producer_state_and_txn_index(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append(txn_batch(0, b"a", b"b"))
    leader.append(txn_batch(0, b"c", pid=OTHER))
    leader.append_txn_marker(PID, 0, commit=False, coordinator_epoch=1)
    follower = open_log(tmp_path / "follower")
    for batch in read_all(leader):
        follower.append_as_follower(bytes(batch.raw()))
    assert follower.collect_aborted(0, 10) == leader.collect_aborted(0, 10)
    assert follower.collect_aborted(0, 10) == [AbortedTxn(PID, 0, 3, 2)]
    assert follower.producer_state.ongoing == {2: OTHER}
    leader.close()
    follower.close()


def test_verification_guard_is_voided_by_a_marker_in_between(tmp_path):
    log = open_log(tmp_path)
    ps = log.producer_state
    # Unverified: a transactional first batch with verification on is refused.
    first = txn_batch(0, b"a")
    assert error_of(lambda: log.append(first, guard=UNVERIFIED)) == ErrorCode.INVALID_TXN_STATE
    guard = ps.start_verification(PID, 0)
    # The coordinator aborts (a marker lands) while the produce awaited verification.
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    assert error_of(lambda: log.append(first, guard=guard)) == ErrorCode.INVALID_TXN_STATE
    guard = ps.start_verification(PID, 0)
    log.append(first, guard=guard)
    assert ps.has_ongoing(PID) and PID not in ps.verifications
    # Later batches of the ongoing transaction need no verification.
    log.append(txn_batch(1, b"b"), guard=UNVERIFIED)
    # Verification off (no verifier): accepted unverified.
    log.append(txn_batch(0, b"c", pid=OTHER))
    log.close()


def test_recovery_rebuilds_the_txn_index_of_an_unflushed_segment(tmp_path):
    cfg = {"segment_bytes": 300}
    log = open_log(tmp_path, **cfg)
    log.append(txn_batch(0, b"a" * 50))
    log.append(txn_batch(0, b"b" * 50, pid=OTHER))
    log.append(plain_batch(b"c" * 50))
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    log.append(plain_batch(b"d" * 50))
    log.append_txn_marker(OTHER, 0, commit=False, coordinator_epoch=0)
    expected = log.collect_aborted(0, log.log_end_offset)
    assert len(expected) == 2 and len(log.segments) > 1
    crash(log)
    for p in (tmp_path / "t-0").glob("*.txnindex"):
        p.unlink()
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    log = reopen_after_crash(tmp_path, **cfg)
    assert log.collect_aborted(0, log.log_end_offset) == expected
    assert log.has_aborted
    log.close()


def test_torn_txn_index_is_rebuilt_after_a_clean_shutdown(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a"))
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    expected = log.collect_aborted(0, 10)
    log.close()
    (path,) = (tmp_path / "t-0").glob("*.txnindex")
    path.write_bytes(path.read_bytes() + b"\x00\x01\x02")
    log = open_log(tmp_path)
    assert log.collect_aborted(0, 10) == expected
    assert path.stat().st_size == 34
    log.close()


def test_crash_cutting_the_marker_reopens_the_transaction(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a"))
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)
    crash(log)
    (seg,) = (tmp_path / "t-0").glob("*.log")
    seg.write_bytes(seg.read_bytes()[:-5])  # the marker was torn
    log = reopen_after_crash(tmp_path)
    assert log.log_end_offset == 1
    assert log.producer_state.ongoing == {0: PID}
    assert log.collect_aborted(0, 10) == [] and not list((tmp_path / "t-0").glob("*.txnindex"))
    log.close()


def test_compaction_drops_aborted_transactions_and_keeps_markers(tmp_path):
    cfg = {"cleanup_policy": "compact", "segment_bytes": 250, "min_compaction_lag_ms": 0}
    log = open_log(tmp_path, **cfg)
    log.append(plain_batch(b"v1", keys=[b"k"]))  # 0
    log.append(txn_batch(0, b"aborted", keys=[b"k"]))  # 1
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)  # 2
    log.append(txn_batch(1, b"committed", keys=[b"j"]))  # 3
    log.append_txn_marker(PID, 0, commit=True, coordinator_epoch=0)  # 4
    log.append(txn_batch(2, b"open", keys=[b"j"]))  # 5: ongoing, must not shadow 3
    log.append(plain_batch(b"pad" * 30, keys=[b"p"]))
    log.append(plain_batch(b"pad" * 30, keys=[b"q"]))
    log.roll()
    log.first_unstable_offset(high_watermark=log.log_end_offset)  # the HW passed both markers
    log.compact()
    batches = [b for s in log.segments for b in _segment_batches(s)]
    data = {r.value for b in batches if not b.is_control for r in b.records()}
    assert b"aborted" not in data
    assert {b"v1", b"committed", b"open"} <= data
    assert [b.base_offset for b in batches if b.is_control] == [2, 4]
    assert log.collect_aborted(0, log.log_end_offset) == [AbortedTxn(PID, 1, 2, 3)]
    log.close()
    log = open_log(tmp_path, **cfg)
    assert log.collect_aborted(0, log.log_end_offset) == [AbortedTxn(PID, 1, 2, 3)]
    log.close()
    # Recovery replays the log, where the aborted data is gone: the entry is kept.
    log = reopen_after_crash(tmp_path, **cfg)
    assert log.collect_aborted(0, log.log_end_offset) == [AbortedTxn(PID, 1, 2, 3)]
    log.close()


@pytest.mark.parametrize("retention_ms", [0, 86_400_000])
def test_compaction_drops_commit_markers_of_emptied_transactions_once_old(tmp_path, retention_ms):
    cfg = {
        "cleanup_policy": "compact",
        "segment_bytes": 250,
        "min_compaction_lag_ms": 0,
        "delete_retention_ms": retention_ms,
    }
    log = open_log(tmp_path, **cfg)
    log.append(txn_batch(0, b"superseded", keys=[b"a"]))  # 0
    log.append_txn_marker(PID, 0, commit=True, coordinator_epoch=0)  # 1: nothing left of it
    log.append(plain_batch(b"newer", keys=[b"a"]))  # 2
    log.append(txn_batch(0, b"latest", keys=[b"b"], pid=OTHER))  # 3
    log.append_txn_marker(OTHER, 0, commit=True, coordinator_epoch=0)  # 4: its record stays
    log.append(txn_batch(1, b"aborted", keys=[b"c"]))  # 5
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)  # 6: indexed, kept
    log.append(plain_batch(b"pad" * 30, keys=[b"p"]))
    log.append(plain_batch(b"pad" * 30, keys=[b"q"]))
    log.roll()
    log.first_unstable_offset(high_watermark=log.log_end_offset)
    log.compact()
    batches = [b for s in log.segments for b in _segment_batches(s)]
    markers = [b.base_offset for b in batches if b.is_control]
    assert markers == ([4, 6] if retention_ms == 0 else [1, 4, 6])
    data = {r.value for b in batches if not b.is_control for r in b.records()}
    assert {b"newer", b"latest"} <= data and not {b"superseded", b"aborted"} & data
    assert log.collect_aborted(0, log.log_end_offset) == [AbortedTxn(PID, 5, 6, 7)]
    log.close()
    log = reopen_after_crash(tmp_path, **cfg)  # replays what is left: no transaction open
    assert log.first_unstable_offset(log.log_end_offset) is None
    assert log.collect_aborted(0, log.log_end_offset) == [AbortedTxn(PID, 5, 6, 7)]
    log.close()


def _segment_batches(seg):
    import os

    return list(iter_batches(os.pread(seg.file.fileno(), seg.size, 0), validate=False))


def test_txn_index_write_failing_on_a_full_disk_is_retried(tmp_path, monkeypatch):
    import errno

    from broker.log import txn_index

    log = open_log(tmp_path)
    log.append(txn_batch(0, b"a"))
    real_write = txn_index.os.write
    failing = {"left": 1}

    def write(fd, data):
        if failing["left"]:
            failing["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(txn_index.os, "write", write)
    log.append_txn_marker(PID, 0, commit=False, coordinator_epoch=0)  # the marker stands
    assert log.collect_aborted(0, 10) == [AbortedTxn(PID, 0, 1, 2)]
    log.close()  # the segment's finish writes the index out
    log = open_log(tmp_path)
    assert log.collect_aborted(0, 10) == [AbortedTxn(PID, 0, 1, 2)]
    log.close()
