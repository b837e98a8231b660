"""Rotation under load through the whole agent: a `logflume agent run` subprocess
tails a file that a writer fills at 5,000 lines/s and rotates every 0.5 s, by
rename or by copytruncate, into a real broker (idempotent producer, the sink's
default). Every line must reach the topic exactly once."""

import os
import shutil
import time

import pytest

from testkit.agent import AgentProcess, read_topic
from tests.sources.test_tail_rotation import Writer

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/app.log*"], start_at: beginning, channels: [c],
             persist_interval: 0.2s}}
    channels:
      c: {{type: memory, capacity: 5000}}
    sinks:
      k: {{type: broker, channel: c, topic: rotated, format: raw, bootstrap_servers: "{bootstrap}",
          linger_ms: 5, batch_events: 1000}}
"""


def rename(log):
    def rotate(fd, n):
        os.rename(log, log.with_name(f"app.log.{n}"))
        os.write(fd, b"")  # the writer still holds the old file until it reopens
        new = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.close(fd)
        return new

    return rotate


def copytruncate(log):
    def rotate(fd, n):
        # under the writer's lock, so no line falls between copy and truncate
        # (logrotate itself cannot promise that)
        shutil.copyfile(log, log.with_name(f"app.log.{n}"))
        os.truncate(log, 0)
        return fd

    return rotate


def settled_after(n: int, extra: float = 1.0):
    """A read_topic predicate: true once `n` messages were read and `extra` seconds
    more passed (duplicates, if any, would be read by then)."""
    reached: list[float] = []

    def until(messages) -> bool:
        if len(messages) < n:
            return False
        if not reached:
            reached.append(time.monotonic())
        return time.monotonic() - reached[0] >= extra

    return until


@pytest.mark.parametrize("rotation", [rename, copytruncate], ids=["rename", "copytruncate"])
def test_rotation_under_load_loses_and_duplicates_nothing(tmp_path, broker, rotation):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "app.log"
    agent = AgentProcess(tmp_path, PIPELINE.format(logs=logs, bootstrap=broker.bootstrap))
    agent.start()
    try:
        writer = Writer(log, rate=5000, seconds=3.0, every=0.5, rotate=rotation(log))
        writer.run()  # in this thread: the agent is another process
        assert writer.rotations >= 4
        n = writer.written
        want = [b"w %06d%s" % (i, b"x" * 40) for i in range(n)]
        got = read_topic(broker.bootstrap, "rotated", settled_after(n), 60)
        bodies = sorted(m.value() for m in got)
        missing = set(want) - set(bodies)
        assert not missing, f"{len(missing)} lines lost, e.g. {sorted(missing)[:3]}"
        assert len(bodies) == n, f"{len(bodies) - n} duplicates"
        assert bodies == want
        if rotation is copytruncate:
            truncations = agent.metric("logflume_agent_tail_truncations_total", component="logs")
            assert truncations >= writer.rotations
    finally:
        agent.stop()
