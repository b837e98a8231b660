"""The `file` and `console` sinks at run time: events from a memory channel in,
bytes out, take transactions committed (or rolled back when the write fails)."""

import asyncio
import io
import os
import re
import sys

import orjson
import pytest

from agent.channels.memory import MemoryChannel
from common.aio import within
from sinks.console import ConsoleSink
from sinks.file import FileSink
from tests.agent.helpers import context, events, metric

NAME = re.compile(r"^ev-\d{8}-\d{6}-\d+\.log$")


async def until(condition, what: str) -> None:
    """Wait (at most 10 s, a deadline rather than a speed check) for `condition()`."""
    deadline = asyncio.get_running_loop().time() + 10.0
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def stop(task: asyncio.Task) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def channel_of(tmp_path) -> MemoryChannel:
    return MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))


def committed(ch: MemoryChannel) -> float:
    return metric(ch, "logflume_agent_channel_take_committed_total")


def rolled_files(directory) -> list:
    """The sink's files in the order it wrote them (by the sequence number)."""
    names = sorted(os.listdir(directory), key=lambda n: int(n.rsplit("-", 1)[1][:-4]))
    assert all(NAME.match(n) for n in names), names
    return [directory / n for n in names]


async def test_file_sink_writes_every_event_and_rolls_by_size(tmp_path):
    out = tmp_path / "out"  # created by the sink
    ch, settled = channel_of(tmp_path), []
    batch = events(100, settled=settled, size=49)  # 50 bytes per line with its newline
    for i in range(0, 100, 10):
        await ch.put(batch[i : i + 10])
    config = FileSink.Config(directory=str(out), prefix="ev", roll_size=1000, batch_events=10)
    assert FileSink.validate(config) == []
    sink = FileSink(config, context(tmp_path, "files"))
    task = asyncio.create_task(sink.run(ch))
    await until(lambda: len(settled) == 100, "every take committed")
    await stop(task)
    assert ch.pending() == 0 and committed(ch) == 100
    out_total = sink.context.metrics.value(
        "logflume_agent_sink_events_out_total", component="files"
    )
    assert out_total == 100
    files = rolled_files(out)
    assert b"".join(f.read_bytes() for f in files) == b"".join(e.body + b"\n" for e in batch)
    # a file rolls once it reached roll_size; a take batch (500 bytes) is never split
    sizes = [f.stat().st_size for f in files]
    assert len(files) == 5 and all(1000 <= s < 1500 for s in sizes[:-1]), sizes


async def test_file_sink_rolls_by_time_and_writes_json(tmp_path):
    out = tmp_path / "out"
    ch, settled = channel_of(tmp_path), []
    config = FileSink.Config(
        directory=str(out), prefix="ev", format="json", roll_interval=0.2, fsync=True
    )
    task = asyncio.create_task(FileSink(config, context(tmp_path, "files")).run(ch))
    first, second = events(3, "a", settled), events(2, "b", settled)
    first[0].record = {"status": 200}
    await ch.put(first)
    await until(lambda: len(settled) == 3, "the first batch committed")
    await asyncio.sleep(0.3)  # older than roll_interval: the next write opens a new file
    await ch.put(second)
    await until(lambda: len(settled) == 5, "the second batch committed")
    await stop(task)
    old, new = (f.read_bytes().splitlines() for f in rolled_files(out))
    assert [orjson.loads(x) for x in old] == [
        {"status": 200},
        {"message": "a1........"},
        {"message": "a2........"},
    ]
    assert [orjson.loads(x)["message"] for x in new] == ["b0........", "b1........"]
    assert committed(ch) == 5


async def test_file_sink_rolls_the_take_back_when_it_cannot_write(tmp_path):
    out = tmp_path / "out"
    config = FileSink.Config(directory=str(out), prefix="ev")
    assert FileSink.validate(config) == []
    out.write_bytes(b"")  # a file where the directory should be: makedirs fails
    ch, settled = channel_of(tmp_path), []
    await ch.put(events(4, settled=settled))
    sink = FileSink(config, context(tmp_path, "files"))
    with pytest.raises(OSError):
        await within(sink.run(ch), 10)
    assert settled == [] and ch.pending() == 4 and committed(ch) == 0
    assert metric(ch, "logflume_agent_channel_take_rollback_total") == 4
    assert sink.context.metrics.value("logflume_agent_sink_rollbacks_total", component="files") == 1


async def test_console_sink_prints_one_line_per_event(tmp_path, monkeypatch):
    stdout = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(sys, "stdout", stdout)
    ch, settled = channel_of(tmp_path), []
    batch = events(3, settled=settled)
    batch[1].record = {"path": "/", "status": 404}
    await ch.put(batch)
    task = asyncio.create_task(ConsoleSink(ConsoleSink.Config(), context(tmp_path, "out")).run(ch))
    await until(lambda: len(settled) == 3, "the take committed")
    await stop(task)
    assert stdout.buffer.getvalue() == b'e0........\n{"path":"/","status":404}\ne2........\n'
    assert ch.pending() == 0 and committed(ch) == 3
