"""Tail source under rotation, truncation, deletion, long lines and backpressure
(the failure modes in agent-lessons.md)."""

import asyncio
import gzip
import os
import shutil
import threading
import time

from tests.sources.harness import FakeMetrics, Harness
from tests.sources.test_tail import append, lines, logdir, tail


class Writer(threading.Thread):
    """Appends numbered lines at `rate` lines/s for `seconds`; `rotate(path)` runs
    every `every` seconds under the same lock, between two whole writes."""

    def __init__(self, path, rate=5000, seconds=2.5, every=0.5, rotate=None):
        super().__init__(daemon=True)
        self.path, self.rate, self.seconds, self.every, self.rotate = (
            path,
            rate,
            seconds,
            every,
            rotate,
        )
        self.written = 0
        self.rotations = 0

    def run(self):
        step = 0.01
        per_step = int(self.rate * step)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        start = time.monotonic()
        next_rotation = start + self.every
        while time.monotonic() - start < self.seconds:
            os.write(fd, lines("w", per_step, start=self.written, width=40))
            self.written += per_step
            now = time.monotonic()
            if self.rotate is not None and now >= next_rotation:
                self.rotations += 1
                fd = self.rotate(fd, self.rotations)
                next_rotation = now + self.every
            time.sleep(max(0.0, start + self.written / self.rate - time.monotonic()))
        os.close(fd)


def assert_exactly_once_in_order(h, written):
    bodies = h.bodies()
    numbers = [int(b.split()[1][:6]) for b in bodies]
    assert len(numbers) == written, f"{len(numbers)} events for {written} lines"
    assert sorted(numbers) == list(range(written)), "lost or duplicated lines"
    by_path: dict[str, list[int]] = {}
    for e, n in zip(h.events, numbers, strict=True):
        by_path.setdefault(e.headers["path"], []).append(n)
    for seq in by_path.values():
        assert seq == sorted(seq), "out of order within a file"


async def run_writer(h, writer):
    writer.start()
    await asyncio.to_thread(writer.join)
    await h.wait_lines(writer.written, limit=30)
    await asyncio.sleep(0.3)  # anything extra (duplicates) would show up here


async def test_rotation_by_rename_under_load(tmp_path):
    d = logdir(tmp_path)
    log = d / "app.log"

    def rotate(fd, n):
        os.rename(log, d / f"app.log.{n}")
        # like nginx before its reopen signal: a few more lines into the old file
        os.write(fd, b"")
        new = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.close(fd)
        return new

    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics, paths=[str(log)])).start()
    await asyncio.sleep(0.1)
    writer = Writer(log, rotate=rotate, seconds=3.0)
    await run_writer(h, writer)
    await h.stop()
    assert writer.rotations >= 4
    assert_exactly_once_in_order(h, writer.written)
    assert metrics.value("logflume_agent_tail_rotations_total") >= writer.rotations
    # Every rotated file was read to EOF and then closed.
    assert metrics.value("logflume_agent_tail_files_open") <= 1


async def test_renamed_file_inside_glob_is_not_read_again(tmp_path):
    d = logdir(tmp_path)
    log = d / "app.log"
    log.write_bytes(lines("w", 50))
    h = Harness(tail(tmp_path, paths=[str(d / "app.log*")])).start()
    await h.wait_lines(50)
    os.rename(log, d / "app.log.1")
    append(d / "app.log.1", lines("w", 5, start=50))  # the writer still holds the old file
    log.write_bytes(lines("w", 20, start=55))
    await h.wait_lines(75)
    await asyncio.sleep(0.3)
    await h.stop()
    assert sorted(h.bodies()) == [b"w %06d" % i for i in range(75)]
    # Nor after a restart: only a new line arrives.
    h2 = Harness(tail(tmp_path, paths=[str(d / "app.log*")])).start()
    append(log, b"marker\n")
    await h2.wait_lines(1)
    await asyncio.sleep(0.3)
    await h2.stop()
    assert h2.bodies() == [b"marker"]


async def test_copytruncate_while_writing(tmp_path):
    d = logdir(tmp_path)
    log = d / "app.log"

    def rotate(fd, n):
        shutil.copyfile(log, d / f"app.log.{n}")
        os.truncate(log, 0)
        return fd

    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics, paths=[str(d / "app.log*")])).start()
    await asyncio.sleep(0.1)
    writer = Writer(log, rotate=rotate, seconds=3.0)
    await run_writer(h, writer)
    await h.stop()
    assert writer.rotations >= 4
    assert_exactly_once_in_order(h, writer.written)
    assert metrics.value("logflume_agent_tail_truncations_total") >= writer.rotations


async def test_truncation_restarts_at_zero_without_resending(tmp_path):
    log = logdir(tmp_path) / "app.log"
    log.write_bytes(lines("before", 30))
    h = Harness(tail(tmp_path)).start()
    await h.wait_lines(30)
    os.truncate(log, 0)
    await asyncio.sleep(0.2)
    append(log, lines("after", 10))
    await h.wait_lines(40)
    await asyncio.sleep(0.3)
    await h.stop()
    assert h.bodies() == [b"before %06d" % i for i in range(30)] + [
        b"after %06d" % i for i in range(10)
    ]


def open_fds_to(path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            count += 1
    return count


async def test_deleted_file_is_closed_after_eof(tmp_path):
    d = logdir(tmp_path)
    log = d / "gone.log"
    log.write_bytes(lines("d", 100))
    h = Harness(tail(tmp_path)).start()
    await h.wait_lines(100)
    assert open_fds_to(log) == 1
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.unlink(log)
    os.write(fd, lines("d", 10, start=100) + b"unterminated")  # written after deletion
    os.close(fd)
    await h.wait_lines(111)
    await h.wait_for(lambda: open_fds_to(log) == 0, what="the deleted file closed")
    await h.stop()
    assert h.bodies()[-1] == b"unterminated" and len(h.bodies()) == 111


async def test_long_lines_do_not_stall_the_file(tmp_path):
    log = logdir(tmp_path) / "app.log"
    mib = 1024 * 1024
    log.write_bytes(
        b"first\n"
        + b"a" * mib  # exactly the cap: kept whole
        + b"\n"
        + b"b" * (3 * mib + 17)  # over the cap: cut
        + b"\nafter\n"
    )
    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics)).start()
    await h.wait_lines(4)
    await h.stop()
    bodies = h.bodies()
    assert bodies[0] == b"first" and bodies[1] == b"a" * mib
    assert bodies[2] == b"b" * mib and bodies[3] == b"after"
    assert metrics.value("logflume_agent_tail_truncated_lines_total") == 1
    # A restart after all was delivered re-reads nothing of the long line.
    append(log, b"next\n")
    h2 = Harness(tail(tmp_path, max_line_bytes=1000)).start()
    await h2.wait_lines(1)
    await h2.stop()
    assert h2.bodies() == [b"next"]


async def test_long_line_cut_with_small_cap_and_chunks(tmp_path):
    log = logdir(tmp_path) / "app.log"
    log.write_bytes(b"x" * 5000 + b"\nshort\n" + b"y" * 2500 + b"\nend\n")
    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics, max_line_bytes=1000, read_chunk_bytes=700)).start()
    await h.wait_lines(4)
    await h.stop()
    assert h.bodies() == [b"x" * 1000, b"short", b"y" * 1000, b"end"]
    assert metrics.value("logflume_agent_tail_truncated_lines_total") == 2


async def test_backpressure_stops_reading(tmp_path):
    log = logdir(tmp_path) / "big.log"
    log.write_bytes(b"".join(lines(f"b{i:03d}", 1000, width=60) for i in range(200)))  # 14 MiB
    total = 200 * 1000
    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics, batch_size=500))
    h.gate = asyncio.Event()
    h.start()
    await h.wait_for(
        lambda: metrics.value("logflume_agent_tail_lines_total") > 0, what="first chunk read"
    )
    await asyncio.sleep(0.5)
    # Blocked in emit: one chunk read (256 KiB of 72-byte lines), nothing more.
    read = metrics.value("logflume_agent_tail_lines_total")
    assert read <= 256 * 1024 // 72 + 1
    assert h.events == []
    h.gate.set()
    await h.wait_lines(total, limit=40)
    await h.stop()
    assert len(h.events) == total


async def test_gzip_rotated_file_is_not_read_twice(tmp_path):
    d = logdir(tmp_path)
    log = d / "app.log"
    log.write_bytes(lines("z", 300, width=20))
    h = Harness(tail(tmp_path, paths=[str(d / "app.log*")], close_grace=0.1)).start()
    await h.wait_lines(300)
    # logrotate with compress: app.log -> app.log.1 -> app.log.1.gz, then deleted
    os.rename(log, d / "app.log.1")
    append(d / "app.log.1", lines("z", 10, start=300, width=20))
    await h.wait_lines(310)
    (d / "app.log.1.gz.tmp").write_bytes(gzip.compress((d / "app.log.1").read_bytes()))
    os.rename(d / "app.log.1.gz.tmp", d / "app.log.1.gz")
    os.unlink(d / "app.log.1")
    # a gzip file never seen before is read whole
    (d / "app.log.old.gz").write_bytes(gzip.compress(lines("old", 5)))
    await h.wait_lines(315)
    await asyncio.sleep(0.5)
    await h.stop()
    assert len(h.bodies()) == 315
    assert sorted(h.bodies())[:5] == [b"old %06d" % i for i in range(5)]


async def test_copy_seen_while_being_written_is_not_read_from_zero(tmp_path):
    """copytruncate's copy found when it holds only part of the original's first KiB."""
    d = logdir(tmp_path)
    log = d / "app.log"
    content = lines("w", 100, width=40)  # ~5 KiB
    log.write_bytes(content)
    h = Harness(tail(tmp_path, paths=[str(d / "app.log*")])).start()
    await h.wait_lines(100)
    (d / "app.log.1").write_bytes(content[:300])  # the copy, still being written
    await asyncio.sleep(0.3)  # a few scans see it in that state
    append(d / "app.log.1", content[300:])
    os.truncate(log, 0)
    append(log, lines("w", 10, start=100, width=40))
    await h.wait_lines(110)
    await asyncio.sleep(0.3)
    await h.stop()
    assert sorted(h.bodies()) == sorted(content.splitlines() + lines("w", 10, 100, 40).splitlines())
