"""`logflume agent top` and `logflume agent tap` against a running agent process
(UDP source -> memory channel -> kafka sink to a real broker), as an operator runs
them; and a metrics listener that is not on loopback refusing the tap."""

import socket
import subprocess
import sys
import threading
import time
import urllib.request

import orjson
import pytest

from common.ports import free_port
from testkit.agent import AgentProcess
from testkit.procs import wait_until

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      udp: {{type: udp, listen: "127.0.0.1:{udp}", channels: [c]}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: top-tap, bootstrap_servers: "{bootstrap}",
          format: raw, audit: false}}
"""


@pytest.fixture(scope="module")
def agent(module_broker, tmp_path_factory):
    udp = free_port()
    text = PIPELINE.format(udp=udp, bootstrap=module_broker.bootstrap)
    process = AgentProcess(tmp_path_factory.mktemp("agent"), text)
    process.udp = udp  # type: ignore[attr-defined]
    process.start()
    yield process
    process.stop()


def logflume(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", *args], capture_output=True, text=True, timeout=timeout
    )


class Traffic:
    """Sends numbered lines over UDP every 20 ms until stopped."""

    def __init__(self, port: int, prefix: str):
        self.port, self.prefix, self.sent = port, prefix, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            while not self._stop.is_set():
                s.sendto(f"{self.prefix} {self.sent}\n".encode(), ("127.0.0.1", self.port))
                self.sent += 1
                time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def test_top_once_shows_rates_of_the_source_and_the_sink(agent):
    url = f"http://127.0.0.1:{agent.metrics_port}"
    with Traffic(agent.udp, "top"):
        result = logflume("agent", "top", "--url", url, "--once", "--output", "json")
    assert result.returncode == 0, result.stderr
    rows = {row["component"]: row for row in orjson.loads(result.stdout)}
    assert set(rows) == {"udp", "c", "k"}
    assert (rows["udp"]["kind"], rows["udp"]["type"]) == ("source", "udp")
    assert (rows["c"]["kind"], rows["c"]["type"]) == ("channel", "memory")
    assert (rows["k"]["kind"], rows["k"]["type"]) == ("sink", "kafka")
    assert float(rows["udp"]["in_s"]) > 0 and float(rows["udp"]["out_s"]) > 0
    assert float(rows["k"]["out_s"]) > 0
    assert rows["c"]["fill"].endswith("%") and rows["udp"]["errors"] == "0"

    # the page's own URL, as a Prometheus scrape config names it, serves as well
    text = logflume("agent", "top", "--url", f"{url}/metrics", "--once", "--interval", "0.2")
    assert text.returncode == 0, text.stderr
    header, columns, *lines = text.stdout.splitlines()
    assert header.startswith(f"agent at {url}/metrics")
    assert columns.split() == ["KIND", "COMPONENT", "TYPE", "IN/S", "OUT/S", "ERRORS", "FILL"]
    assert [line.split()[:3] for line in lines] == [
        ["source", "udp", "udp"],
        ["channel", "c", "memory"],
        ["sink", "k", "kafka"],
    ]


def test_top_says_when_the_agent_is_not_reachable():
    url = f"http://127.0.0.1:{free_port()}"
    result = logflume("agent", "top", "--url", url, "--once")
    assert result.returncode == 1
    assert result.stderr.startswith(f"cannot reach the agent at {url}/metrics: ")
    assert len(result.stderr.splitlines()) == 1 and not result.stdout


def tap(agent, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "logflume", "agent", "tap"]
    cmd += ["--url", f"http://127.0.0.1:{agent.metrics_port}", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_tap_prints_the_lines_sent_over_udp(agent):
    source = tap(agent, "--component", "udp", "--limit", "5", "--format", "json")
    sink = tap(agent, "--component", "k", "--limit", "3")
    with Traffic(agent.udp, "tapped"):
        out, err = source.communicate(timeout=60)
        text, text_err = sink.communicate(timeout=60)
    assert source.returncode == 0, err
    docs = [orjson.loads(line) for line in out.splitlines()]
    assert len(docs) == 5
    for doc in docs:
        assert doc["component"] == "udp" and doc["kind"] == "source"
        assert doc["line"].startswith("tapped ") and doc["record"] is None
        assert doc["headers"] == {"source": "udp"} and doc["time"] > 0
    numbers = [int(d["line"].split()[1]) for d in docs]
    assert numbers == sorted(numbers)
    assert sink.returncode == 0, text_err
    lines = text.splitlines()
    assert len(lines) == 3
    assert all(" k [" in line and line.split("] ", 1)[1].startswith("tapped ") for line in lines)


def test_tap_of_an_unknown_component_names_the_known_ones(agent):
    result = logflume(
        "agent", "tap", "--url", f"http://127.0.0.1:{agent.metrics_port}", "--component", "x"
    )
    assert result.returncode == 1
    assert (
        result.stderr
        == "tap refused (404): no component 'x' in this agent (components: c, k, udp)\n"
    )


def test_a_listener_not_on_loopback_refuses_the_tap(module_broker, tmp_path):
    text = PIPELINE.format(udp=free_port(), bootstrap=module_broker.bootstrap)
    process = AgentProcess(tmp_path, text)
    process.config.write_text(text.replace("{metrics}", f"0.0.0.0:{process.metrics_port}"))
    process.start()
    try:
        result = logflume(
            "agent", "tap", "--url", f"http://127.0.0.1:{process.metrics_port}",
            "--component", "udp",
        )  # fmt: skip
    finally:
        process.stop()
    assert result.returncode == 1
    assert result.stderr.startswith("tap refused (403): tap refused: the metrics listener is ")
    assert "0.0.0.0, not a loopback address" in result.stderr and not result.stdout


def test_a_tap_never_read_loses_samples_and_holds_nothing_up(agent):
    """A client that asks for a tap and reads nothing: its samples are dropped and
    counted once its queue and the socket are full, and the pipeline delivers every
    line it takes meanwhile."""
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.connect(("127.0.0.1", agent.metrics_port))
    reader.sendall(b"GET /tap?component=udp&limit=1000000 HTTP/1.1\r\nHost: agent\r\n\r\n")
    try:
        wait_until(lambda: unlabelled(agent, "logflume_agent_tap_clients") == 1, 30, "the tap")
        line = b"x" * 2000
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            deadline = time.monotonic() + 120
            while unlabelled(agent, "logflume_agent_tap_dropped_total") == 0:
                assert time.monotonic() < deadline, "no sample dropped"
                for _ in range(200):
                    s.sendto(line + b"\n", ("127.0.0.1", agent.udp))
                time.sleep(0.05)

        def delivered_all() -> bool:
            read = agent.metric("logflume_agent_source_events_in_total", component="udp")
            return read == agent.metric("logflume_agent_sink_events_out_total", component="k")

        wait_until(delivered_all, 120, "the sink to deliver every line read")
    finally:
        reader.close()
    wait_until(lambda: unlabelled(agent, "logflume_agent_tap_clients") == 0, 30, "no tap left")


def unlabelled(agent, name: str) -> float:
    """A series without labels from the agent's /metrics."""
    url = f"http://127.0.0.1:{agent.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in {url}")


def test_top_finds_the_agent_from_its_pipelines_file(agent):
    result = logflume("agent", "top", "--config", str(agent.config), "--once", "--interval", "0.1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"agent at http://127.0.0.1:{agent.metrics_port}/metrics")
