import pytest

from broker.log import LogConfig, LogManager, OffsetOutOfRangeError
from broker.log.manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE
from tests.broker.log.util import make_batch


def test_create_reload_and_checkpoints(tmp_path):
    data = tmp_path / "data"
    manager = LogManager(data, LogConfig(segment_bytes=500))
    a = manager.create("web-logs", 0)
    b = manager.create("web-logs", 1, LogConfig(segment_bytes=500, flush_messages=1))
    assert manager.create("web-logs", 0) is a
    for _ in range(10):
        a.append(make_batch(2, size=100))
        b.append(make_batch(1))
    manager.checkpoint_recovery_points()
    points = (data / RECOVERY_POINT_FILE).read_text().splitlines()
    assert points[:2] == ["0", "2"] and "web-logs 1 10" in points
    manager.flush_dirty()
    manager.close()
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    manager = LogManager(data, LogConfig(segment_bytes=500))
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    assert sorted((p.topic, p.partition, p.log_end_offset) for p in manager.all_logs()) == [
        ("web-logs", 0, 20),
        ("web-logs", 1, 10),
    ]
    manager.delete("web-logs", 1)
    assert manager.get("web-logs", 1) is None
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["web-logs-0"]
    manager.close()


def test_flush_dirty_by_flush_ms_and_retention(tmp_path):
    t = [1000.0]
    manager = LogManager(
        tmp_path,
        LogConfig(flush_ms=5000, segment_bytes=300, retention_bytes=600),
        clock=lambda: t[0],
    )
    log = manager.create("t", 0)
    for _ in range(10):
        log.append(make_batch(1, size=200))
    manager.flush_dirty()
    assert log.recovery_point < log.log_end_offset
    t[0] += 6
    manager.flush_dirty()
    assert log.recovery_point == log.log_end_offset
    assert manager.run_retention() > 0
    assert log.log_start_offset > 0
    manager.close()


@pytest.mark.parametrize("topic", ["../evil", "a/b", "..", ".", "", "x\0y"])
def test_refuses_escaping_names(tmp_path, topic):
    manager = LogManager(tmp_path / "data", LogConfig())
    with pytest.raises(ValueError):
        manager.create(topic, 0)
    manager.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("crash", [False, True])
def test_delete_records_moves_the_log_start_inside_a_segment_and_keeps_it(tmp_path, crash):
    data = tmp_path / "data"
    manager = LogManager(data, LogConfig(segment_bytes=500))
    log = manager.create("trim", 0)
    for _ in range(10):
        log.append(make_batch(2, size=100))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    target = bases[2] + 1  # inside the third segment
    assert log.delete_records_before(target)
    assert not log.delete_records_before(target - 1)  # never backwards
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == target
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 1 << 20)
    assert log.read(target, 1 << 20) is not None
    manager.checkpoint_log_starts()
    if crash:  # no clean close: the checkpoint alone brings the start back
        for p in manager.all_logs():
            p.flush()
    else:
        manager.close()
    manager = LogManager(data, LogConfig(segment_bytes=500))
    assert manager.get("trim", 0).log_start_offset == target
    assert manager.get("trim", 0).delete_records_before(10_000)  # at most the log end
    assert manager.get("trim", 0).log_start_offset == 20


def test_close_fsyncs_only_what_changed_since_the_last_flush(tmp_path, monkeypatch):
    """A clean stop of partitions untouched since the last one fsyncs none of their
    files (no producer snapshot is written again either); a partition that took
    writes fsyncs its snapshot, its `.log` and the index entries it gained. The logs
    close on several threads, and what they wrote is read back whole."""
    import os
    import threading
    from collections import Counter
    from pathlib import Path

    config = LogConfig(index_interval_bytes=1)
    manager = LogManager(tmp_path, config)
    for p in range(20):
        manager.create("t", p).append(make_batch(3, ts=1000 + p))
    manager.close()

    synced: Counter = Counter()
    threads: set[str] = set()
    real_fsync = os.fsync

    def fsync(fd):
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        in_partition = target.is_file() and target.parent.name.startswith("t-")
        synced[target.suffix if in_partition else "elsewhere"] += 1
        threads.add(threading.current_thread().name)
        real_fsync(fd)

    manager = LogManager(tmp_path, config)
    monkeypatch.setattr(os, "fsync", fsync)
    manager.close()
    # the checkpoints, the marker, the directory: nothing of the 20 partitions
    assert set(synced) == {"elsewhere"}

    monkeypatch.undo()
    manager = LogManager(tmp_path, config)
    for p in (3, 7):
        manager.get("t", p).append(make_batch(2, ts=2000))
    monkeypatch.setattr(os, "fsync", fsync)
    synced.clear()
    manager.close()
    # .tmp: the producer snapshot, before its rename
    assert synced - Counter({"elsewhere": synced["elsewhere"]}) == Counter(
        {".log": 2, ".tmp": 2, ".index": 2, ".timeindex": 2}
    )
    assert any(name.startswith("log-close") for name in threads)

    monkeypatch.undo()
    manager = LogManager(tmp_path, config)
    ends = {p.partition: p.log_end_offset for p in manager.all_logs()}
    assert ends == {p: 5 if p in (3, 7) else 3 for p in range(20)}
    assert manager.get("t", 7).active.index.entries == 1  # the second batch's entry
    assert manager.get("t", 7).local_log.offset_for_timestamp(2000) == (3, 2000)
    manager.close()
