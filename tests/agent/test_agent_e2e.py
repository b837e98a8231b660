"""The whole agent as a subprocess: tail -> channel -> broker, killed and restarted.

The broker sink runs with its defaults (idempotent producer, acks=all)."""

import socket
import subprocess
import threading
import time

import pytest

from common.ports import free_port
from testkit.agent import AgentProcess, read_topic

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c],
              batch_size: 1000, persist_interval: 0.05s}}
    channels:
      c: {channel}
    sinks:
      k: {{type: broker, channel: c, topic: lines, bootstrap_servers: "{bootstrap}",
          linger_ms: 2, batch_events: 500, max_inflight_batches: 4, delivery_timeout: 5s,
          retry_backoff: 0.2s, max_retry_backoff: 1s}}
"""
TAIL_BATCH, SINK_BATCH, SINK_INFLIGHT = 1000, 500, 4  # as in PIPELINE


def line(i: int, pad: int = 100) -> bytes:
    return b"line %07d %s" % (i, b"x" * pad)


def write_lines(path, start, stop, pause_every=0, pause=0.0, pad=100):
    with open(path, "ab", buffering=0) as f:
        for i in range(start, stop):
            f.write(line(i, pad) + b"\n")
            if pause_every and i % pause_every == 0:
                time.sleep(pause)


def bodies(messages):
    return [m.value() for m in messages]


def assert_all_delivered(bootstrap, n, pad=100):
    want = {line(i, pad) for i in range(n)}
    got = read_topic(bootstrap, "lines", lambda msgs: want <= set(bodies(msgs)), 90)
    missing = want - set(bodies(got))
    assert not missing, f"{len(missing)} lines lost, e.g. {sorted(missing)[:3]}"
    return len(got) - n  # duplicates


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for row in f:
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


CAPACITY = 5000


@pytest.mark.parametrize(
    "channel",
    [
        f"{{type: memory, capacity: {CAPACITY}}}",
        f"{{type: file, capacity: {CAPACITY}, checkpoint_interval: 0.05s}}",
    ],
    ids=["memory", "file"],
)
def test_sigkill_and_restart_loses_no_line(tmp_path, broker, channel):
    logs = tmp_path / "logs"
    logs.mkdir()
    text = PIPELINE.format(logs=logs, channel=channel, bootstrap=broker.bootstrap)
    agent = AgentProcess(tmp_path, text).start()
    n = 30_000
    writer = threading.Thread(target=write_lines, args=(logs / "app.log", 0, n, 1000, 0.02))
    writer.start()
    kills = 3
    try:
        for _ in range(kills):  # kill it at three different moments
            time.sleep(0.6)
            agent.kill()
            agent.start()
        writer.join()
        duplicates = assert_all_delivered(broker.bootstrap, n)
        # A restart resumes at the last saved position and re-sends what the broker
        # had got beyond it. Per kill that is at most the lines between the tail and
        # the broker's ack: the channel's events (the memory channel counts what
        # sinks took and have not committed; the file channel replays what was
        # committed after its last checkpoint, at most what it held), the tail's
        # batch blocked in put, and the sink's batches in librdkafka's queue. Add
        # what is acknowledged within one persist_interval / checkpoint_interval
        # (0.05 s): far below these terms at this pipeline's rate (~10-20k lines/s).
        window = CAPACITY + TAIL_BATCH + SINK_INFLIGHT * SINK_BATCH
        assert duplicates <= kills * window, (duplicates, kills * window)
    finally:
        writer.join()
        agent.stop()


def test_broker_outage_keeps_memory_bounded_then_delivers_everything(tmp_path, broker):
    """30 s without a broker while ~1 KiB lines keep coming (~30 MiB): the channel
    stays within its capacity, the tail leaves the rest on disk (the agent's RSS
    grows by far less than what was written), and everything arrives afterwards."""
    logs = tmp_path / "logs"
    logs.mkdir()
    capacity, pad, outage = 2000, 1000, 30.0
    channel = f"{{type: memory, capacity: {capacity}}}"
    text = PIPELINE.format(logs=logs, channel=channel, bootstrap=broker.bootstrap)
    agent = AgentProcess(tmp_path, text).start()
    n_before, n = 1000, 31_000
    try:
        write_lines(logs / "app.log", 0, n_before, pad=pad)
        assert_all_delivered(broker.bootstrap, n_before, pad)
        broker.stop()
        rss_at_start = rss_bytes(agent.proc.pid)
        # ~1000 lines/s for ~28 s, so that lines keep coming during the whole outage
        args = (logs / "app.log", n_before, n, 100, 0.09, pad)
        writer = threading.Thread(target=write_lines, args=args)
        writer.start()
        peak_fill, peak_rss = 0.0, rss_at_start
        deadline = time.monotonic() + outage
        while time.monotonic() < deadline:
            fill = agent.metric("logflume_agent_channel_events", component="c")
            peak_fill = max(peak_fill, fill or 0)
            peak_rss = max(peak_rss, rss_bytes(agent.proc.pid))
            time.sleep(0.5)
        writer.join()
        written = (n - n_before) * (pad + 14)
        assert 0 < peak_fill <= capacity  # bounded: the tail stopped reading
        # the channel holds <= 2000 lines (~2 MiB of bodies), librdkafka as many
        # again: an agent that buffered the ~30 MiB written would grow by more
        assert peak_rss - rss_at_start < 16 << 20 < written, (peak_rss - rss_at_start, written)
        broker.start()
        assert_all_delivered(broker.bootstrap, n, pad)
        assert agent.proc.poll() is None
    finally:
        agent.stop()


def test_udp_lines_from_netcat_arrive(tmp_path, broker):
    port = free_port()
    text = f"""
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      netcat: {{type: udp, listen: "127.0.0.1:{port}", channels: [c]}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: broker, channel: c, topic: netcat, format: raw, bootstrap_servers: "{broker.bootstrap}"}}
"""
    agent = AgentProcess(tmp_path, text).start()  # returns once /health says 200
    try:
        # healthy means bound: a datagram sent right away is not lost
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"first\n", ("127.0.0.1", port))
        for word in ("hello", "world"):
            subprocess.run(f"echo {word} | nc -u -q0 127.0.0.1 {port}", shell=True, check=True)
        want = {b"first", b"hello", b"world"}
        got = read_topic(broker.bootstrap, "netcat", lambda m: want <= {x.value() for x in m}, 30)
        assert sorted(m.value() for m in got) == sorted(want)
    finally:
        agent.stop()
