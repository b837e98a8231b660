"""The agent's file channel on a full disk: backpressure, no loss, recovery.

A real agent (tail -> file channel -> broker sink) with the channel's directory on a
small tmpfs (or loop ext4). While the disk is full the channel's puts wait: the tail
source stops advancing, the agent stays up and says so (a log line and the gauge
logflume_agent_channel_disk_full = 1). Once space returns every line written to the
tailed file, before, during and after the fault, reaches the broker (at-least-once:
duplicates are counted, not forbidden).

Two ways the disk fills: something else takes the space (a filler file, deleted to
give it back), or the channel itself fills it while the broker is down; then the
space must come back on its own once the broker is back and the sink commits.
"""

import errno
import hashlib
import os
import time

import pytest

from agent.api import Duration
from agent.channels import wal
from agent.channels.file import FileChannel
from common.aio import within
from testkit.agent import AgentProcess, read_topic
from testkit.procs import wait_until
from tests.agent.helpers import context, events, metric
from tests.smallfs import SmallFs, fill, require_mount

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c],
              batch_size: 200, persist_interval: 0.05s}}
    channels:
      c: {{type: file, directory: "{wal}", segment_bytes: 64KiB, checkpoint_interval: 0.05s,
          byte_capacity: 64MiB}}
    sinks:
      k: {{type: broker, channel: c, topic: lines, bootstrap_servers: "{bootstrap}",
          linger_ms: 2, batch_events: 500, max_inflight_batches: 4, delivery_timeout: 5s,
          retry_backoff: 0.2s, max_retry_backoff: 1s}}
"""


def line(i: int) -> bytes:
    """~200 bytes that lz4 cannot shrink much, so the WAL really takes space."""
    return b"line %07d %s" % (i, hashlib.sha256(b"%d" % i).hexdigest().encode() * 3)


def write_lines(path, start: int, stop: int) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(line(i) + b"\n" for i in range(start, stop)))


def wait_alive(agent, check, timeout: float, what: str) -> None:
    """wait_until, failing at once if the agent process exits meanwhile."""

    def alive_and():
        code = agent.proc.poll()
        assert code is None, f"agent exited with {code} while waiting for {what}"
        return check()

    wait_until(alive_and, timeout, what)


def delivered(bootstrap: str, n: int, timeout: float = 90) -> tuple[int, int]:
    """(lines lost, duplicates) of lines 0..n-1 in the topic."""
    want = {line(i) for i in range(n)}
    got = read_topic(bootstrap, "lines", lambda m: want <= {x.value() for x in m}, timeout)
    values = [m.value() for m in got]
    return len(want - set(values)), len(values) - len(set(values))


@pytest.fixture
def small_fs(tmp_path):
    require_mount(tmp_path)
    with SmallFs(tmp_path / "mnt", size_kb=1024) as fs:
        yield fs


def start_agent(tmp_path, small_fs, bootstrap: str) -> tuple[AgentProcess, object]:
    logs = tmp_path / "logs"
    logs.mkdir()
    text = PIPELINE.format(logs=logs, wal=small_fs.path / "wal", bootstrap=bootstrap)
    return AgentProcess(tmp_path, text).start(), logs / "app.log"


def disk_full(agent: AgentProcess) -> float | None:
    return agent.metric("logflume_agent_channel_disk_full", component="c")


def resumes_losing_nothing(agent, broker, log, written: int, timeout: float, when: str):
    """Once the cause is gone: puts resume (the disk-full gauge drops), 1000 more lines
    go in, and every line written so far reaches the topic."""
    since = time.monotonic()
    wait_alive(agent, lambda: disk_full(agent) == 0, timeout, "puts to resume")
    resumed_s = time.monotonic() - since
    write_lines(log, written, written + 1000)
    lost, dups = delivered(broker.bootstrap, written + 1000)
    assert lost == 0
    print(
        f"{when}: puts resumed in {resumed_s:.2f}s; {written + 1000} lines, 0 lost,"
        f" {dups} duplicates"
    )


def test_filler_takes_the_space_then_gives_it_back(tmp_path, small_fs, broker):
    agent, log = start_agent(tmp_path, small_fs, broker.bootstrap)
    try:
        write_lines(log, 0, 1000)
        assert delivered(broker.bootstrap, 1000)[0] == 0
        filler = fill(small_fs.path / "filler")
        write_lines(log, 1000, 6000)  # ~1 MB: cannot fit anywhere now
        wait_alive(agent, lambda: disk_full(agent) == 1, 30, "the channel to report a full disk")
        assert "puts wait until there is space" in agent.log_text()
        assert agent.health() == 200 and agent.proc.poll() is None
        filler.unlink()
        resumes_losing_nothing(agent, broker, log, 6000, 60, "filler: after space returned")
    finally:
        assert agent.stop() == 0


def test_channel_fills_its_own_disk_while_the_broker_is_down(tmp_path, small_fs, broker):
    agent, log = start_agent(tmp_path, small_fs, broker.bootstrap)
    try:
        write_lines(log, 0, 500)
        assert delivered(broker.bootstrap, 500)[0] == 0
        broker.stop()
        write_lines(log, 500, 20000)  # ~4 MB (~2 MB in lz4) into a 1 MB file system
        wait_alive(agent, lambda: disk_full(agent) == 1, 60, "the channel to report a full disk")
        assert agent.proc.poll() is None
        broker.start()
        resumes_losing_nothing(
            agent, broker, log, 20000, 90, "self-filled: after the broker came back"
        )
    finally:
        assert agent.stop() == 0


async def test_put_waits_through_a_torn_write_and_loses_nothing(tmp_path, monkeypatch):
    """Unit: the first write stops half way with ENOSPC, the next two fail outright.
    The put waits and retries; the WAL never keeps the torn half, so after a restart
    every event is there exactly once and the scan finds no damage."""
    ch = FileChannel(
        FileChannel.Config(checkpoint_interval=Duration(3600)), context(tmp_path, "fc")
    )
    await ch.open()
    await ch.put(events(3))
    real = os.pwrite
    calls = []

    def pwrite(fd, data, pos):
        calls.append(pos)
        if len(calls) == 1:
            return real(fd, bytes(data)[: len(data) // 2], pos)
        if len(calls) <= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)
    await within(ch.put(events(4, prefix="late")), 10)
    monkeypatch.undo()
    assert len(calls) >= 4 and metric(ch, "logflume_agent_channel_disk_full") == 0
    await ch.close()
    for name in os.listdir(tmp_path):
        if name.startswith("wal-"):
            path = str(tmp_path / name)
            assert wal.scan(path, int(name[4:-4]), None).problem is None
    again = FileChannel(FileChannel.Config(), context(tmp_path, "fc"))
    await again.open()
    batch = await again.take(100, 0.1)
    assert len(batch.events) == 7
    assert [e.body[:4] for e in batch.events][3:] == [b"late"] * 4
    await again.close()
