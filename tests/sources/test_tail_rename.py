"""Tail source at a rename rotation (logrotate's default `create` mode: access.log ->
access.log.1, a new access.log) while it is behind, with only the live path configured
(`paths: [.../access.log]`): running, the renamed file is read on by its descriptor;
across a restart, it is found again by its identity in its directory
(`FileTable.recover_renamed`), or counted and logged as abandoned when it cannot be."""

import asyncio
import gzip
import logging
import os

import pytest

from tests.sources.harness import FakeMetrics, Harness, run_logrotate
from tests.sources.test_tail import append, lines, tail
from tests.sources.test_tail_copytruncate import LINE, WIDTH, N, numbers_by_path, start_behind

ABANDONED = "logflume_agent_tail_abandoned_bytes_total"


def rename_rotate(log) -> None:
    """What logrotate's `create` does: rename the live file, create a new one."""
    os.rename(log, f"{log}.1")
    log.touch()


def source_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.src" and r.levelno >= 30]


async def restart(tmp_path, log, expected: int) -> tuple[Harness, FakeMetrics]:
    """A new agent with only the live path; returns once `expected` lines came and
    every file but the live one was read to its end and closed."""
    metrics = FakeMetrics()
    h = Harness(tail(tmp_path, metrics, paths=[str(log)])).start()
    await h.wait_lines(expected, limit=5)
    await h.wait_for(
        lambda: metrics.value("logflume_agent_tail_files_open") == 1, 5, "renamed file closed"
    )
    await h.stop()
    return h, metrics


async def test_rename_while_the_agent_is_down(tmp_path, caplog):
    """Stopped behind, renamed while down: after the restart the saved file reads on
    from its position under its new name, the new live file from 0."""
    log, h = start_behind(tmp_path, FakeMetrics())
    await h.wait_lines(300)
    await h.stop()
    delivered = len(h.events)
    rename_rotate(log)
    append(log, lines("a", 500, start=N, width=WIDTH))
    with caplog.at_level(logging.INFO):
        h2, m2 = await restart(tmp_path, log, N + 500 - delivered)
        await asyncio.sleep(0.2)  # anything extra (duplicates) would show up here
    second = numbers_by_path(h2)
    assert numbers_by_path(h)[str(log)] == list(range(delivered))
    assert second[f"{log}.1"] == list(range(delivered, N))
    assert second[str(log)] == list(range(N, N + 500))
    assert len(h2.events) == N + 500 - delivered
    assert m2.value(ABANDONED) == 0 and not source_warnings(caplog)
    assert any("was renamed to" in r.getMessage() for r in caplog.records)
    # And once more: the renamed file, read to its end, is not read again.
    append(log, b"marker\n")
    h3 = Harness(tail(tmp_path, paths=[str(log)])).start()
    await h3.wait_lines(1, limit=5)
    await asyncio.sleep(0.2)
    await h3.stop()
    assert h3.bodies() == [b"marker"]


async def test_restart_while_reading_the_renamed_file(tmp_path):
    """Renamed while running and behind, the agent stops with the renamed file half
    read: the restart reads it on from its saved position."""
    log, h = start_behind(tmp_path, FakeMetrics())
    await h.wait_lines(300)
    rename_rotate(log)
    append(log, lines("a", 500, start=N, width=WIDTH))
    h.allow(1000)  # stops again before the renamed file is read to its end
    await h.wait_lines(1000)
    await h.wait_for(lambda: h.more.is_set() is False, what="emit blocked")
    await h.stop()
    first = numbers_by_path(h)
    h2, _ = await restart(tmp_path, log, N + 500 - len(h.events))
    got = [n for seq in first.values() for n in seq]
    got += [n for seq in numbers_by_path(h2).values() for n in seq]
    assert sorted(got) == list(range(N + 500)), "lost or duplicated lines"
    assert all(seq == sorted(seq) for seq in numbers_by_path(h2).values())


@pytest.mark.parametrize("case", ["compressed", "deleted"])
async def test_renamed_file_compressed_or_deleted_while_down(tmp_path, caplog, case):
    metrics = FakeMetrics()
    log, h = start_behind(tmp_path, metrics)
    await h.wait_lines(300)
    await h.stop()
    delivered = len(h.events)
    rename_rotate(log)
    renamed = log.with_name("access.log.1")
    if case == "compressed":  # `compress` without `delaycompress`
        renamed.with_name("access.log.1.gz").write_bytes(gzip.compress(renamed.read_bytes()))
    os.unlink(renamed)
    append(log, lines("a", 10, start=N, width=WIDTH))
    m2 = FakeMetrics()
    with caplog.at_level(logging.WARNING):
        h2 = Harness(tail(tmp_path, m2, paths=[str(log)])).start()
        await h2.wait_lines(10, limit=5)
        await asyncio.sleep(0.2)
        await h2.stop()
    abandoned = (N - delivered) * LINE
    assert m2.value(ABANDONED) == abandoned
    (warning,) = source_warnings(caplog)
    assert str(log) in warning and f"{abandoned} bytes" in warning
    assert ("access.log.1.gz is compressed" in warning) == (case == "compressed")
    assert numbers_by_path(h2) == {str(log): list(range(N, N + 10))}
    # Counted once: the lost file is forgotten, a later restart says nothing more.
    caplog.clear()
    m3 = FakeMetrics()
    with caplog.at_level(logging.WARNING):
        h3 = Harness(tail(tmp_path, m3, paths=[str(log)])).start()
        append(log, b"marker\n")
        await h3.wait_lines(1, limit=5)
        await h3.stop()
    assert h3.bodies() == [b"marker"]
    assert m3.value(ABANDONED) == 0 and not source_warnings(caplog)


async def test_rename_while_running_and_behind(tmp_path):
    """No restart: the renamed file is read on to its end by its descriptor, then
    closed; the new live file is read from 0."""
    metrics = FakeMetrics()
    log, h = start_behind(tmp_path, metrics)
    await h.wait_lines(300)
    assert metrics.value("logflume_agent_tail_lines_total") < N / 2  # behind
    rename_rotate(log)
    append(log, lines("a", 500, start=N, width=WIDTH))
    h.allow(10**9)
    await h.wait_lines(N + 500, limit=5)
    await h.wait_for(
        lambda: metrics.value("logflume_agent_tail_files_open") == 1, 5, "renamed file closed"
    )
    await asyncio.sleep(0.2)  # anything extra (duplicates) would show up here
    await h.stop()
    # Both files' events have the path the file was opened at: told apart by number.
    numbers = numbers_by_path(h)[str(log)]
    assert sorted(numbers) == list(range(N + 500)), "lost or duplicated lines"
    assert [n for n in numbers if n < N] == list(range(N)), "out of order"
    assert [n for n in numbers if n >= N] == list(range(N, N + 500)), "out of order"
    assert metrics.value(ABANDONED) == 0


async def test_real_logrotate_create_with_a_restart(tmp_path):
    """logrotate in `create` mode while the agent is down and behind, the writer
    (like nginx before its reopen signal) still appending to the renamed file."""
    log, h = start_behind(tmp_path, FakeMetrics())
    await h.wait_lines(300)
    await h.stop()
    delivered = len(h.events)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)  # the writer's descriptor
    await run_logrotate(tmp_path, log, "create")
    assert log.stat().st_size == 0 and log.with_name("access.log.1").exists()
    os.write(fd, lines("a", 100, start=N, width=WIDTH))  # before the reopen: old file
    os.close(fd)
    append(log, lines("a", 400, start=N + 100, width=WIDTH))  # after it: the new one
    h2, m2 = await restart(tmp_path, log, N + 500 - delivered)
    await asyncio.sleep(0.2)  # anything extra (duplicates) would show up here
    got = [n for seq in numbers_by_path(h).values() for n in seq]
    got += [n for seq in numbers_by_path(h2).values() for n in seq]
    assert sorted(got) == list(range(N + 500)), "lost or duplicated lines"
    assert numbers_by_path(h2)[f"{log}.1"] == list(range(delivered, N + 100))
    assert m2.value(ABANDONED) == 0
