import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager, PartitionLog
from broker.log.segment import LogSegment
from broker.protocol.records import iter_batches
from tests.broker.log.crash_writer import CONFIG, batch_for
from tests.broker.log.util import all_records, make_batch, read_all

REPO = Path(__file__).resolve().parents[3]
SMALL = LogConfig(segment_bytes=4000, index_interval_bytes=300)


def filled_log(tmp_path, n=60, config=SMALL):
    log = PartitionLog(tmp_path / "r-0", config)
    for i in range(n):
        log.append(make_batch(3, size=100, ts=1000 + i))
    return log


def reopen(tmp_path, recovery_point=0, clean=False, config=SMALL):
    return PartitionLog(
        tmp_path / "r-0", config, recovery_point=recovery_point, clean_shutdown=clean
    )


def assert_intact(log, n_records):
    assert [r.offset for r in all_records(log)] == list(range(n_records))
    assert log.log_end_offset == n_records


def count_recoveries(monkeypatch):
    calls = []
    original = LogSegment.recover

    def counting(self):
        calls.append(self.base_offset)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


@pytest.mark.parametrize("damage", ["garbage", "torn", "bad_crc", "zeros"])
def test_damaged_tail_is_truncated_at_last_valid_batch(tmp_path, damage):
    log = filled_log(tmp_path)
    log.close()
    path = log.active.log_path
    size = path.stat().st_size
    last = list(iter_batches(path.read_bytes()))[-1]
    with open(path, "r+b") as f:
        if damage == "garbage":
            f.seek(0, 2)
            f.write(os.urandom(500))
        elif damage == "torn":
            f.truncate(size - 7)
        elif damage == "bad_crc":
            f.seek(size - 3)
            f.write(b"\xff\xfe\xfd")
        else:
            f.seek(0, 2)
            f.write(bytes(4096))  # preallocated-looking tail
    log = reopen(tmp_path)
    expected = 180 if damage in ("garbage", "zeros") else last.base_offset
    assert_intact(log, expected)
    assert log.active.size == (size if expected == 180 else size - last.size)
    log.append(make_batch(2))
    assert_intact(log, expected + 2)
    log.close()


def test_corruption_in_unflushed_closed_segment_drops_everything_after(tmp_path, monkeypatch):
    log = filled_log(tmp_path)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    victim = log.segments[2]
    first = list(iter_batches(victim.log_path.read_bytes()))[0]
    log.close()
    with open(victim.log_path, "r+b") as f:
        f.seek(first.size + 40)
        f.write(b"\x00\x01")
    calls = count_recoveries(monkeypatch)
    log = reopen(tmp_path, recovery_point=bases[1] + 1)
    assert calls == [bases[1], bases[2]]  # earlier segments are trusted
    assert [s.base_offset for s in log.segments] == bases[:3]
    assert_intact(log, first.next_offset)
    assert not any(p.name.startswith(f"{bases[3]:020d}") for p in log.dir.iterdir())
    log.close()


def test_clean_shutdown_skips_rescan_and_crash_rescans_only_unflushed(tmp_path, monkeypatch):
    log = filled_log(tmp_path)
    log.close()
    bases = [s.base_offset for s in log.segments]
    calls = count_recoveries(monkeypatch)
    log = reopen(tmp_path, clean=True)
    assert calls == []
    assert_intact(log, 180)
    log.close()
    log = reopen(tmp_path, recovery_point=bases[-2] + 1)
    assert calls == bases[-2:]
    assert_intact(log, 180)
    log.close()


@pytest.mark.parametrize("damage", ["deleted", "garbage", "odd_length", "time_deleted"])
def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path, monkeypatch, damage):
    log = filled_log(tmp_path)
    log.close()
    seg = log.segments[1]
    index, time_index = seg.index.path, seg.time_index.path
    entries = index.stat().st_size // 8
    assert entries > 3
    if damage == "deleted":
        index.unlink()
    elif damage == "time_deleted":
        time_index.unlink()
    elif damage == "garbage":
        with open(index, "r+b") as f:
            f.seek(-8, 2)
            f.write(b"\x7f\xff\xff\xff\x7f\xff\xff\xff")
    else:
        with open(index, "ab") as f:
            f.write(b"\x01\x02\x03")
    calls = count_recoveries(monkeypatch)
    log = reopen(tmp_path, clean=True)
    assert calls == [seg.base_offset]
    assert log.segments[1].index.entries == entries
    assert_intact(log, 180)
    assert log.offset_for_timestamp(1030) == (90, 1030)
    log.close()


def test_leftover_files_are_removed(tmp_path):
    log = filled_log(tmp_path, n=5)
    log.close()
    (log.dir / "00000000000000000000.log.cleaned").write_bytes(b"x")
    (log.dir / "00000000000000099999.index").write_bytes(b"")
    log = reopen(tmp_path)
    assert sorted(p.name for p in log.dir.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000015.snapshot",
        "leader-epoch-checkpoint",
    ]
    log.close()


def _expected_batches():
    offset = 0
    for i in range(10**9):
        yield offset, batch_for(i)
        offset += 1 + i % 5


def test_sigkill_at_random_points(tmp_path):
    """Kill the writer at random points, recover, let the next writer continue."""
    rng = random.Random(1234)
    data_dir = tmp_path / "data"
    flushed = 0
    for round in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.broker.log.crash_writer", str(data_dir), "7"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        lines = [proc.stdout.readline() for _ in range(rng.randint(1, 40))]
        time.sleep(rng.uniform(0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        assert all(line.strip() for line in lines), "writer died early"
        flushed = int(lines[-1])
        manager = LogManager(data_dir, CONFIG)
        log = manager.get("crash", 0)
        assert log.log_end_offset >= flushed
        expected = _expected_batches()
        batches = read_all(log)
        for batch in batches:
            offset, raw = next(expected)
            assert batch.base_offset == offset
            assert bytes(batch.raw())[16:] == raw[16:]
            batch.validate()
        assert batches[-1].next_offset == log.log_end_offset
        if round % 2:
            manager.close()  # the next writer starts after a clean shutdown
        else:
            for plog in manager.all_logs():
                plog.close()
