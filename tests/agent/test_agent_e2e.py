"""The whole agent as a subprocess: tail -> channel -> broker, killed and restarted.

The broker sink runs with its defaults (idempotent producer, acks=all)."""

import socket
import subprocess
import threading
import time

import pytest

from tests.agent.agentproc import AgentProcess, read_topic
from tests.procs import free_port

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c], persist_interval: 0.2s}}
    channels:
      c: {channel}
    sinks:
      k: {{type: broker, channel: c, topic: lines, bootstrap_servers: "{bootstrap}",
          linger_ms: 2, batch_events: 500, delivery_timeout: 5s,
          retry_backoff: 0.2s, max_retry_backoff: 1s}}
"""


def write_lines(path, start, stop, pause_every=0, pause=0.0):
    with open(path, "ab", buffering=0) as f:
        for i in range(start, stop):
            f.write(b"line %07d %s\n" % (i, b"x" * 100))
            if pause_every and i % pause_every == 0:
                time.sleep(pause)


def bodies(messages):
    return [m.value() for m in messages]


def assert_all_delivered(bootstrap, n):
    want = {b"line %07d %s" % (i, b"x" * 100) for i in range(n)}
    got = read_topic(bootstrap, "lines", lambda msgs: want <= set(bodies(msgs)), 90)
    missing = want - set(bodies(got))
    assert not missing, f"{len(missing)} lines lost, e.g. {sorted(missing)[:3]}"
    return len(got) - n  # duplicates


@pytest.mark.parametrize(
    "channel",
    ["{type: memory, capacity: 5000}", "{type: file, capacity: 5000, checkpoint_interval: 0.2s}"],
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
    try:
        for _ in range(3):  # kill it at three different moments
            time.sleep(0.6)
            agent.kill()
            agent.start()
        writer.join()
        duplicates = assert_all_delivered(broker.bootstrap, n)
        assert duplicates < n
    finally:
        writer.join()
        agent.stop()


def test_broker_outage_keeps_memory_bounded_then_delivers_everything(tmp_path, broker):
    logs = tmp_path / "logs"
    logs.mkdir()
    channel = "{type: memory, capacity: 2000}"
    text = PIPELINE.format(logs=logs, channel=channel, bootstrap=broker.bootstrap)
    agent = AgentProcess(tmp_path, text).start()
    try:
        write_lines(logs / "app.log", 0, 1000)
        assert_all_delivered(broker.bootstrap, 1000)
        broker.stop()
        write_lines(logs / "app.log", 1000, 20_000)
        peak = 0.0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            fill = agent.metric("logflume_agent_channel_events", component="c")
            peak = max(peak, fill or 0)
            time.sleep(0.2)
        assert 0 < peak <= 2000  # bounded: the tail stopped reading
        broker.start()
        assert_all_delivered(broker.bootstrap, 20_000)
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
