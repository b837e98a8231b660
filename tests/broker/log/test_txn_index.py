"""The transaction index: Kafka's file format, the aborted-transaction search across
segments, truncation and the rebuild after a crash, against a model (hypothesis)."""

import os
import struct
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.log.txn_index import AbortedTxn, TransactionIndex
from broker.protocol.records import BatchBuilder

NOW_MS = int(time.time() * 1000)
CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=64)


def test_entries_are_kafkas_34_byte_records(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    assert not path.exists()  # created with the first entry
    index.append(AbortedTxn(7, 10, 20, 15))
    index.append(AbortedTxn(8, 12, 30, 31))
    data = path.read_bytes()
    assert len(data) == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 7, 10, 20, 15)
    again = TransactionIndex(path)
    again.sanity_check()
    assert again.entries == [AbortedTxn(7, 10, 20, 15), AbortedTxn(8, 12, 30, 31)]
    assert again.collect(21, 31) == ([AbortedTxn(8, 12, 30, 31)], True)
    assert again.collect(21, 40) == ([AbortedTxn(8, 12, 30, 31)], False)
    assert again.collect(0, 11) == ([AbortedTxn(7, 10, 20, 15)], True)
    assert again.collect(0, 100) == ([AbortedTxn(7, 10, 20, 15), AbortedTxn(8, 12, 30, 31)], False)
    again.truncate_to(30)
    assert again.entries == [AbortedTxn(7, 10, 20, 15)] and path.stat().st_size == 34
    again.truncate_to(0)
    assert again.entries == [] and not path.exists()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_no_descriptor_is_held_and_a_change_is_fsynced_once(tmp_path, monkeypatch):
    path = tmp_path / "00000000000000000000.txnindex"
    before = _open_descriptors()
    index = TransactionIndex(path)
    index.append(AbortedTxn(7, 10, 20, 15))
    assert _open_descriptors() == before  # one descriptor per segment: its .log only
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    index.flush()
    index.flush()  # nothing changed since
    assert len(synced) == 1 and _open_descriptors() == before
    index.append(AbortedTxn(8, 12, 30, 31))
    fd = index.open_for_sync()  # the roll's fsync on the flush thread
    assert fd is not None and index.open_for_sync() is None
    os.close(fd)
    index.truncate_to(30)
    index.flush()
    assert len(synced) == 2 and _open_descriptors() == before
    assert TransactionIndex(path).entries == [AbortedTxn(7, 10, 20, 15)]


def test_unknown_version_fails_the_sanity_check(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 1, 7, 10, 20, 15))
    index = TransactionIndex(path)
    try:
        index.sanity_check()
    except ValueError as e:
        assert "version" in str(e)
    else:
        raise AssertionError("version 1 accepted")


PIDS = (1, 2, 3)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(PIDS), st.integers(1, 3)),
        st.tuples(st.just("commit"), st.sampled_from(PIDS)),
        st.tuples(st.just("abort"), st.sampled_from(PIDS)),
        st.tuples(st.just("plain"), st.integers(1, 3)),
    ),
    max_size=40,
)


class Model:
    """What the index must hold: Kafka's rules written out directly."""

    def __init__(self):
        self.end = 0
        self.seq = dict.fromkeys(PIDS, 0)
        self.ongoing: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []

    def write(self, pid, n):
        self.ongoing.setdefault(pid, self.end)
        self.seq[pid] += n
        self.end += n

    def marker(self, pid, commit):
        first = self.ongoing.pop(pid, None)
        if first is not None and not commit:
            lso = min(self.ongoing.values(), default=self.end + 1)
            self.aborted.append(AbortedTxn(pid, first, self.end, lso))
        self.end += 1


def run(log: PartitionLog, script) -> Model:
    model = Model()
    for op in script:
        if op[0] == "write":
            _, pid, n = op
            b = BatchBuilder(
                producer_id=pid,
                producer_epoch=0,
                base_sequence=model.seq[pid],
                is_transactional=True,
            )
            for i in range(n):
                b.append(b"v%d" % i * 20, timestamp_ms=NOW_MS)
            log.append(b.build())
            model.write(pid, n)
        elif op[0] == "plain":
            b = BatchBuilder()
            for i in range(op[1]):
                b.append(b"p%d" % i * 20, timestamp_ms=NOW_MS)
            log.append(b.build())
            model.end += op[1]
        else:
            log.append_txn_marker(op[1], 0, commit=op[0] == "commit", coordinator_epoch=0)
            model.marker(op[1], op[0] == "commit")
    assert log.log_end_offset == model.end
    return model


def expected(model: Model, fetch_offset: int, upper: int) -> list[AbortedTxn]:
    return [e for e in model.aborted if e.last_offset >= fetch_offset and e.first_offset < upper]


quick = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@quick
@given(script=ops, data=st.data())
def test_collect_matches_the_model(tmp_path_factory, script, data):
    log = PartitionLog(tmp_path_factory.mktemp("p") / "t-0", CONFIG)
    model = run(log, script)
    assert log.collect_aborted(0, log.log_end_offset + 1) == model.aborted
    fetch = data.draw(st.integers(0, model.end))
    upper = data.draw(st.integers(fetch, model.end + 1))
    assert log.collect_aborted(fetch, upper) == expected(model, fetch, upper)
    log.close()


@quick
@given(script=ops, lose_snapshots=st.booleans())
def test_rebuild_after_a_crash_gives_the_same_index(tmp_path_factory, script, lose_snapshots):
    path = tmp_path_factory.mktemp("p") / "t-0"
    log = PartitionLog(path, CONFIG)
    model = run(log, script)
    log.local_log.reap_flushes(wait=True)
    for seg in log.segments:  # killed: no close snapshot, no flush
        seg.close()
    for p in path.glob("*.txnindex"):
        p.unlink()
    if lose_snapshots:
        for p in path.glob("*.snapshot"):
            p.unlink()
    log = PartitionLog(path, CONFIG, recovery_point=0)
    assert log.collect_aborted(0, log.log_end_offset + 1) == model.aborted
    assert sorted(log.producer_state.ongoing) == sorted(model.ongoing.values())
    log.close()


@quick
@given(script=ops, data=st.data())
def test_truncation_trims_the_index(tmp_path_factory, script, data):
    log = PartitionLog(tmp_path_factory.mktemp("p") / "t-0", CONFIG)
    model = run(log, script)
    cut = data.draw(st.integers(0, model.end))
    log.truncate_to(cut)
    end = log.log_end_offset
    assert log.collect_aborted(0, end + 1) == [e for e in model.aborted if e.last_offset < end]
    log.close()
