"""Agent CPU per line when the log is written line by line, as nginx writes it.

    .venv/bin/python -m bench.bench_tail_writes [--rate 600] [--seconds 20]

nginx writes every access-log line with a write(2) of its own. One agent (`python
-m logflume agent run`) tails such a file (nginx interceptor, `add_host`) into a
broker subprocess on loopback; a writer appends generated access-log lines at
`--rate` lines/s, one os.write per line (or, `--chunked`, the lines due every 100 ms
in one write). The figure is the agent process's user + system CPU over the run
divided by the lines written, for two pipelines: memory channel with at-least-once
delivery, and the production template's file channel with exactly-once delivery.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from spark_etl import loggen
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess

PIPELINE = """
agents:
  web:
    sources:
      a: {{type: tail, paths: ["{log}"], start_at: beginning, add_host: true,
          channels: [c], interceptors: [{{type: nginx}}]}}
    channels:
      c: {channel}
    sinks:
      k: {{type: kafka, channel: c, topic: nginx-access, delivery: {delivery},
          bootstrap_servers: "{bootstrap}"}}
"""
VARIANTS = {
    "memory channel, at_least_once": ("{type: memory}", "at_least_once"),
    "file channel, exactly_once": ("{type: file}", "exactly_once"),
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(root: Path, variant: str, rate: float, seconds: float, chunked: bool) -> float:
    """Microseconds of agent CPU per line."""
    channel, delivery = VARIANTS[variant]
    broker = BrokerProcess(root / "broker").start()
    agent = None
    try:
        for topic in ("nginx-access", "logflume-positions"):
            create_topic(broker.bootstrap, topic, 1)
        log = root / "access.log"
        log.write_text("")
        config = root / "pipelines.yaml"
        config.write_text(
            PIPELINE.format(log=log, channel=channel, delivery=delivery, bootstrap=broker.bootstrap)
        )
        cmd = [sys.executable, "-m", "logflume", "agent", "run", "--config", str(config)]
        cmd += ["--name", "web", "--state-dir", str(root / "state")]
        with open(root / "agent.log", "wb") as out:
            agent = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        time.sleep(4)  # started, connected
        start = datetime(2024, 5, 1, tzinfo=UTC)
        items = loggen.generate(start, start.replace(hour=1), 20_000, seed=1, bad_ratio=0)
        lines = [(a.line() + "\n").encode() for a in items]
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        cpu0, t0, n = cpu_seconds(agent.pid), time.time(), 0
        while time.time() < t0 + seconds:
            due = int((time.time() - t0) * rate) - n
            if chunked:
                os.write(fd, b"".join(lines[(n + i) % len(lines)] for i in range(due)))
                n += due
            else:
                for _ in range(due):
                    os.write(fd, lines[n % len(lines)])
                    n += 1
            time.sleep(0.1 if chunked else 0.002)
        os.close(fd)
        return (cpu_seconds(agent.pid) - cpu0) / n * 1e6
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(30)
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=600.0, help="lines per second")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--chunked", action="store_true", help="one write per 100 ms instead")
    args = ap.parse_args(argv)
    how = "chunks every 100 ms" if args.chunked else "one write per line"
    for variant in VARIANTS:
        with tempfile.TemporaryDirectory(prefix="bench-tail-writes-") as tmp:
            us = measure(Path(tmp), variant, args.rate, args.seconds, args.chunked)
        print(f"{variant}, {args.rate:g} lines/s, {how}: agent CPU {us:.0f} us/line", flush=True)
    print(f"load (1 min) {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
