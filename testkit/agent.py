"""A `logflume agent run` subprocess and a topic reader, for tests and benchmarks."""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from common.ports import free_port, wait_for_port
from testkit.procs import ManagedProcess


class AgentProcess(ManagedProcess):
    """Runs agent `name` of a pipelines text; `{metrics}` in the text is replaced by
    a free loopback port serving /metrics."""

    stop_timeout = 30.0

    def __init__(self, tmp_path: Path, text: str, name: str = "a"):
        self.metrics_port = free_port()
        self.config = tmp_path / "pipelines.yaml"
        self.config.write_text(text.replace("{metrics}", f"127.0.0.1:{self.metrics_port}"))
        self.name = name
        self.state_dir = tmp_path / "agent-state"
        self.log_path = tmp_path / "agent.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "AgentProcess":
        cmd = [sys.executable, "-m", "logflume", "agent", "run", "--config", str(self.config)]
        cmd += ["--name", self.name, "--state-dir", str(self.state_dir)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
            )
        wait_for_port(self.metrics_port, proc=self.proc)
        self.wait_healthy()
        return self

    def health(self) -> int:
        """The status code of GET /health."""
        url = f"http://127.0.0.1:{self.metrics_port}/health"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until /health answers 200: every source is running, sockets bound."""
        deadline = time.monotonic() + timeout
        proc = self.proc
        assert proc is not None, "the agent was not started"
        while self.health() != 200:
            if proc.poll() is not None:
                raise RuntimeError(f"agent exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"agent not healthy after {timeout}s:\n{self.log_text()}")
            time.sleep(0.05)

    def metric(self, name: str, **labels: str) -> float | None:
        want = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith(want + " "):
                    return float(line.rsplit(" ", 1)[1])
        return None


def read_topic(bootstrap: str, topic: str, until, deadline_s: float = 60.0) -> list:
    """Messages of partition 0 from the beginning, read until `until(messages)` is
    true (or the deadline passes)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "logflume-tests",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list = []
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline and not until(out):
            for msg in consumer.consume(10000, 0.5):
                if msg.error() is None:
                    out.append(msg)
    finally:
        consumer.close()
    return out
