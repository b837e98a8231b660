"""A full data directory: a failed append leaves the log exactly as before it.

The injected-failure tests make `os.pwrite` stop half way with ENOSPC, as a nearly
full file system does; the tmpfs tests fill a real one (root only), which also covers
the index preallocation: the active index's entries are written with pwrite into the
sparse file at flush, roll and close, so a full disk is an OSError, never the SIGBUS
that a store into a sparse mapping would be.
"""

import errno
import os

import pytest

from broker.log import LogConfig, PartitionLog
from broker.log.epoch import LeaderEpochCache
from broker.log.manager import LogManager
from broker.protocol.records import iter_batches
from common.fsutil import atomic_write
from tests.broker.log.util import all_records, make_batch, read_all
from tests.smallfs import SmallFs, fill, require_mount

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def open_log(dir, **cfg):
    return PartitionLog(dir / "t-0", LogConfig(**cfg), clock=lambda: 1_000_000.0)


def _half_then_enospc(real):
    """os.pwrite / os.pwritev stand-ins: the first call writes half its data, every
    later call fails with ENOSPC (a file system that just filled up)."""
    calls = []

    def pwrite(fd, data, pos):
        calls.append(len(data))
        if len(calls) > 1:
            raise ENOSPC
        return real(fd, bytes(data)[: max(1, len(data) // 2)], pos)

    def pwritev(fd, buffers, pos):
        return pwrite(fd, b"".join(bytes(b) for b in buffers), pos)

    return pwrite, pwritev, calls


def check_consistent(log: PartitionLog) -> None:
    """The active segment ends on a batch boundary equal to the file's length, and no
    index entry points at or past it."""
    seg = log.active
    assert os.fstat(seg.file.fileno()).st_size == seg.size
    if seg.index.entries:
        assert seg.index.last_entry()[1] < seg.size
    if seg.time_index.entries:
        assert seg.time_index.last_entry()[1] < log.log_end_offset
    batches = read_all(log)
    assert (batches[-1].next_offset if batches else log.log_start_offset) == log.log_end_offset


@pytest.mark.parametrize("batches_per_append", [1, 3], ids=["one-batch", "several"])
def test_enospc_mid_write_truncates_back_to_the_last_batch(
    tmp_path, monkeypatch, batches_per_append
):
    log = open_log(tmp_path, index_interval_bytes=1)
    for i in range(5):
        log.append(make_batch(2, tag=b"ok%d" % i))
    before = (log.log_end_offset, log.active.size, log.active.index.entries)
    pwrite, pwritev, calls = _half_then_enospc(os.pwrite)
    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "pwritev", pwritev)
    data = b"".join(make_batch(2, tag=b"lost%d" % i) for i in range(batches_per_append))
    with pytest.raises(OSError) as e:
        log.append(data)
    assert e.value.errno == errno.ENOSPC
    assert len(calls) == 2  # half written, then the disk was full
    monkeypatch.undo()
    assert (log.log_end_offset, log.active.size, log.active.index.entries) == before
    check_consistent(log)
    info = log.append(make_batch(1, tag=b"again"))
    assert info.first_offset == before[0]
    check_consistent(log)
    values = [r.value for r in all_records(log)]
    assert not any(v.startswith(b"lost") for v in values)
    log.close()
    # Crash-style reopen: recovery rescans and finds nothing to cut.
    (tmp_path / "t-0" / "00000000000000000000.index").unlink()
    again = PartitionLog(tmp_path / "t-0", LogConfig(), recovery_point=0, clock=lambda: 1e6)
    assert [r.value for r in all_records(again)] == values
    again.close()


def test_enospc_writing_the_index_at_a_roll_refuses_the_append(tmp_path, monkeypatch):
    log = open_log(tmp_path, index_interval_bytes=1, segment_bytes=1000)
    log.append(make_batch(1, tag=b"a", size=400))
    log.append(make_batch(1, tag=b"b", size=400))  # the index gets its first entry
    before = (log.log_end_offset, len(log.segments), log.active.index.entries)
    # The next append rolls: writing the finished segment's index fails.
    monkeypatch.setattr("broker.log.index.os.pwrite", lambda *a: (_ for _ in ()).throw(ENOSPC))
    with pytest.raises(OSError):
        log.append(make_batch(1, tag=b"c", size=400))
    monkeypatch.undo()
    assert (log.log_end_offset, len(log.segments), log.active.index.entries) == before
    check_consistent(log)
    log.append(make_batch(1, tag=b"d", size=400))  # the roll, finished this time
    assert len(log.segments) == 2
    assert [r.value[:1] for r in all_records(log)] == [b"a", b"b", b"d"]
    first = log.segments[0].index
    assert first.path.stat().st_size == first.entries * 8 == 8
    end = log.log_end_offset
    log.close()
    again = PartitionLog(
        tmp_path / "t-0", LogConfig(), recovery_point=end, clock=lambda: 1e6, clean_shutdown=True
    )
    assert [r.value[:1] for r in all_records(again)] == [b"a", b"b", b"d"]
    assert again.segments[0].index.lookup(1) == (1, again.segments[0].index.last_entry()[1])
    again.close()


def test_epoch_cache_keeps_memory_equal_to_file_when_the_save_fails(tmp_path, monkeypatch):
    cache = LeaderEpochCache(tmp_path, lambda: 10)
    cache.assign(1, 0)
    monkeypatch.setattr("broker.log.epoch.write_lines", lambda *a: (_ for _ in ()).throw(ENOSPC))
    with pytest.raises(OSError):
        cache.assign(2, 5)
    assert cache.entries == [(1, 0)]


def test_atomic_write_leaves_no_temp_file_when_the_disk_is_full(tmp_path, monkeypatch):
    monkeypatch.setattr("common.fsutil.os.write", lambda fd, b: (_ for _ in ()).throw(ENOSPC))
    with pytest.raises(OSError):
        atomic_write(tmp_path / "f", b"data")
    assert list(tmp_path.iterdir()) == []


def test_fill_a_real_tmpfs_then_make_room(tmp_path):
    require_mount(tmp_path)
    with SmallFs(tmp_path / "mnt", size_kb=512) as fs:
        # A batch per index entry and per time-index entry: index blocks open often.
        cfg = dict(index_interval_bytes=1, segment_bytes=10 << 20, segment_index_bytes=1 << 20)
        log = open_log(fs.path, **cfg)
        acked = []
        failures = 0
        ts = 1000
        while failures < 20:
            ts += 1
            value = b"r%06d-" % len(acked) + b"v" * 300
            try:
                info = log.append(make_batch(1, ts=ts, values=[value]))
            except OSError as e:
                assert e.errno == errno.ENOSPC
                failures += 1
                check_consistent(log)
                continue
            acked.append((info.first_offset, value))
        assert len(acked) > 100
        fs.grow(2048)
        info = log.append(make_batch(1, ts=ts + 1, values=[b"after"]))
        assert info.first_offset == len(acked)
        acked.append((info.first_offset, b"after"))
        check_consistent(log)
        log.close()
        reopened = PartitionLog(fs.path / "t-0", LogConfig(**cfg), clock=lambda: 1e6)
        got = [(r.offset, r.value) for r in all_records(reopened)]
        assert got == acked
        for seg in reopened.segments:  # every batch's CRC, straight from the file
            with open(seg.log_path, "rb") as f:
                data = f.read()
            assert sum(b.size for b in iter_batches(data, validate=True)) == len(data)
        reopened.close()


def test_new_index_block_on_a_full_tmpfs_is_an_error_not_sigbus(tmp_path):
    """The log's last page still has room, the index needs a new block, the file
    system has none: the append succeeds (its index entry is in memory), a flush too
    (it syncs the log; the active index is not needed on disk until the segment
    closes), and the close fails with ENOSPC writing the index. Storing the entry
    through a mapping would be a SIGBUS, so the full-disk part runs in a forked child
    whose death by signal fails the test instead of killing pytest. With room again,
    the close writes every entry."""
    require_mount(tmp_path, "tmpfs")
    with SmallFs(tmp_path / "mnt", size_kb=1024) as fs:
        log = open_log(fs.path, index_interval_bytes=1)
        page = os.statvfs(fs.path).f_frsize
        entries_per_block = page // 8
        # Fill the offset index's first block exactly; the log's last page must keep
        # room for one more small batch.
        while not (
            log.active.index.entries == entries_per_block and page - log.active.size % page > 200
        ):
            log.append(make_batch(1, values=[b"x" * 20]))
            assert log.active.index.entries <= 4 * entries_per_block, "never lined up"
        log.active.index.write_pending()  # the first block is on disk
        filler = fill(fs.path / "filler")
        assert fs.free_bytes() == 0
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit code
            code = 3
            try:
                log.append(make_batch(1, values=[b"y" * 20]))
                check_consistent(log)
                log.flush()
                code = 5
                log.close()
                code = 2  # no error at all: the test did not reproduce a full disk
            except OSError as e:
                code = 0 if e.errno == errno.ENOSPC and code == 5 else 4
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert not os.WIFSIGNALED(status), f"killed by signal {os.WTERMSIG(status)}"
        assert os.WEXITSTATUS(status) == 0
        filler.unlink()
        log.append(make_batch(1, values=[b"z" * 20]))
        check_consistent(log)
        entries = log.active.index.entries
        assert entries > entries_per_block
        end = log.log_end_offset
        log.close()
        reopened = PartitionLog(
            fs.path / "t-0",
            LogConfig(index_interval_bytes=1),
            recovery_point=end,
            clock=lambda: 1e6,
            clean_shutdown=True,  # the index file written at close is trusted
        )
        assert reopened.active.index.entries == entries
        assert len(read_all(reopened)) == end
        reopened.close()


def test_deleting_a_log_on_a_full_disk_writes_nothing_and_removes_it(tmp_path):
    """A log being deleted (a topic deleted, or a create undone because the disk is
    full) is released without writing its indexes or a producer snapshot, so the
    delete cannot fail with ENOSPC half way and leave an orphan directory."""
    require_mount(tmp_path)
    with SmallFs(tmp_path / "mnt", size_kb=512) as fs:
        logs = LogManager(fs.path / "data", LogConfig(index_interval_bytes=1))
        log = logs.create("t", 0)
        for i in range(20):
            log.append(make_batch(1, values=[b"v%d" % i]))
        assert log.active.index.entries  # in memory, not on disk yet
        filler = fill(fs.path / "filler")
        logs.delete("t", 0)
        assert logs.get("t", 0) is None
        assert not list((fs.path / "data").glob("t-0*"))
        filler.unlink()
        logs.close()
