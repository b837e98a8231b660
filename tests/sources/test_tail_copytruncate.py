"""Tail source at a copytruncate rotation while it is behind, with only the live path
configured (`paths: [.../access.log]`): the unread tail is finished from the copy
(`sources/_tail_copy.py`), or counted and logged as abandoned when it cannot be."""

import asyncio
import gzip
import logging
import os
import shutil

import pytest

from tests.sources.harness import FakeMetrics, Harness, run_logrotate
from tests.sources.test_tail import append, lines, logdir, tail
from tests.sources.test_tail_rotation import Writer

N, WIDTH = 2000, 40
LINE = len(lines("a", 1, width=WIDTH))  # every line has this many bytes


class Paced(Harness):
    """`emit` blocks once `allowed` events went through, until `allow` raises it:
    the tail stops reading there (backpressure), so it is behind by a known amount."""

    def __init__(self, source, allowed: int):
        super().__init__(source)
        self.allowed = allowed
        self.more = asyncio.Event()

    async def emit(self, batch) -> None:
        while len(self.events) >= self.allowed:
            self.more.clear()
            await self.more.wait()
        await super().emit(batch)

    def allow(self, n: int) -> None:
        self.allowed = n
        self.more.set()


def copytruncate(log) -> None:
    """What logrotate's copytruncate does: copy first, then truncate the live file."""
    shutil.copyfile(log, f"{log}.1")
    os.truncate(log, 0)


def numbers_by_path(h) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for e in h.events:
        out.setdefault(e.headers["path"], []).append(int(e.body.split()[1][:6]))
    return out


def start_behind(tmp_path, metrics, allowed=300):
    log = logdir(tmp_path) / "access.log"
    log.write_bytes(lines("a", N, width=WIDTH))
    src = tail(tmp_path, metrics, paths=[str(log)], read_chunk_bytes=4096, batch_size=50)
    return log, Paced(src, allowed).start()


def read_lines(metrics) -> float:
    return metrics.value("logflume_agent_tail_lines_total")


async def test_copytruncate_behind_with_only_the_live_path_loses_nothing(tmp_path, caplog):
    metrics = FakeMetrics()
    log, h = start_behind(tmp_path, metrics)
    await h.wait_lines(300)
    assert read_lines(metrics) < N / 2  # behind: most of the file is unread
    copytruncate(log)
    append(log, lines("a", 500, start=N, width=WIDTH))
    with caplog.at_level(logging.INFO):
        h.allow(10**9)
        await h.wait_lines(N + 500)
        # the copy, read to its end, is closed (close_grace): nothing more comes
        await h.wait_for(
            lambda: metrics.value("logflume_agent_tail_files_open") == 1, what="copy closed"
        )
    await h.stop()
    by_path = numbers_by_path(h)
    assert sorted(n for seq in by_path.values() for n in seq) == list(range(N + 500))
    assert all(seq == sorted(seq) for seq in by_path.values()), "out of order within a file"
    assert by_path[f"{log}.1"][-1] == N - 1  # the unread tail came from the copy
    assert read_lines(metrics) == N + 500
    assert metrics.value("logflume_agent_tail_abandoned_bytes_total") == 0
    assert not [r for r in caplog.records if r.name == "test.src" and r.levelno >= logging.WARNING]
    assert any("reading the rest from its copy" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("case", ["compressed", "missing"])
async def test_compressed_or_missing_copy_is_counted_and_warned(tmp_path, caplog, case):
    metrics = FakeMetrics()
    log, h = start_behind(tmp_path, metrics)
    await h.wait_lines(300)
    read = int(read_lines(metrics))
    if case == "compressed":  # `compress` without `delaycompress`, done before we look
        copytruncate(log)
        copy = log.with_name("access.log.1")
        copy.with_name("access.log.1.gz").write_bytes(gzip.compress(copy.read_bytes()))
        os.unlink(copy)
    else:
        os.truncate(log, 0)
    append(log, lines("a", 10, start=N, width=WIDTH))
    with caplog.at_level(logging.WARNING):
        h.allow(10**9)
        await h.wait_for(lambda: any("abandoned" in r.getMessage() for r in caplog.records))
        await h.wait_lines(read + 10)
    await h.stop()
    abandoned = (N - read) * LINE
    assert metrics.value("logflume_agent_tail_abandoned_bytes_total") == abandoned
    warnings = [r for r in caplog.records if r.name == "test.src" and r.levelno >= logging.WARNING]
    (warning,) = [r.getMessage() for r in warnings]
    assert str(log) in warning and f"{abandoned} bytes" in warning
    assert ("access.log.1.gz is compressed" in warning) == (case == "compressed")
    assert sorted(numbers_by_path(h)[str(log)]) == list(range(read)) + list(range(N, N + 10))


async def test_restart_while_finishing_the_copy(tmp_path):
    metrics = FakeMetrics()
    log, h = start_behind(tmp_path, metrics)
    await h.wait_lines(300)
    copytruncate(log)
    append(log, lines("a", 500, start=N, width=WIDTH))
    h.allow(1000)  # stops again with the copy half read
    await h.wait_lines(1000)
    await h.wait_for(lambda: h.more.is_set() is False, what="emit blocked")
    await h.stop()
    first = numbers_by_path(h)
    assert 0 < len(first[f"{log}.1"]) and first[f"{log}.1"][-1] < N - 1  # copy unfinished
    m2 = FakeMetrics()
    h2 = Harness(tail(tmp_path, m2, paths=[str(log)])).start()
    await h2.wait_lines(N + 500 - len(h.events))
    await h2.wait_for(lambda: m2.value("logflume_agent_tail_files_open") == 1, what="copy closed")
    await h2.stop()
    got = [n for seq in first.values() for n in seq]
    got += [n for seq in numbers_by_path(h2).values() for n in seq]
    assert sorted(got) == list(range(N + 500)), "lost or duplicated lines"


async def test_real_logrotate_copytruncate_while_writing(tmp_path):
    d = logdir(tmp_path)
    log = d / "access.log"
    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics, paths=[str(log)], read_chunk_bytes=16384))
    h.gate = asyncio.Event()
    h.gate.set()
    writer = Writer(log, rate=4000, seconds=2.0)
    writer.start()
    h.start()
    await h.wait_lines(500)
    h.gate.clear()  # the output stalls: the tail falls behind the writer
    behind_from = writer.written
    await h.wait_for(
        lambda: writer.written > behind_from + 2000 or not writer.is_alive(), what="writer ahead"
    )
    await run_logrotate(tmp_path, log, "copytruncate")
    on_copy = (d / "access.log.1").read_bytes().splitlines()
    assert read_lines(metrics) < len(on_copy)  # the tail was behind at the rotation
    h.gate.set()
    await asyncio.to_thread(writer.join)
    on_disk = on_copy + log.read_bytes().splitlines()  # what logrotate kept
    await h.wait_lines(len(on_disk))
    await h.wait_for(
        lambda: metrics.value("logflume_agent_tail_files_open") == 1, what="copy closed"
    )
    await h.stop()
    assert sorted(h.bodies()) == sorted(on_disk)  # 0 lost, 0 duplicated
    assert len(set(on_disk)) == len(on_disk)
    # Lines written between logrotate's copy and its truncation are in neither file.
    assert 0 <= writer.written - len(on_disk) < 1000
    assert metrics.value("logflume_agent_tail_abandoned_bytes_total") == 0


async def test_copytruncate_while_the_agent_is_down(tmp_path):
    """Stopped behind, rotated while down: after the restart the saved generation
    reads on in the copy, the live file is read from 0."""
    log, h = start_behind(tmp_path, FakeMetrics())
    await h.wait_lines(300)
    await h.stop()
    delivered = len(h.events)
    copytruncate(log)
    append(log, lines("a", 500, start=N, width=WIDTH))
    m2 = FakeMetrics()
    h2 = Harness(tail(tmp_path, m2, paths=[str(log)])).start()
    await h2.wait_lines(N + 500 - delivered)
    await h2.wait_for(lambda: m2.value("logflume_agent_tail_files_open") == 1, what="copy closed")
    await h2.stop()
    second = numbers_by_path(h2)
    assert second[f"{log}.1"] == list(range(delivered, N))
    assert second[str(log)] == list(range(N, N + 500))
