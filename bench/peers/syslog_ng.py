"""A private syslog-ng instance shipping one log file to a Kafka topic: the agent's peer.

Debian's `syslog-ng-core` plus `syslog-ng-mod-rdkafka` (its `kafka-c()` destination,
librdkafka like our broker sink). `SyslogNg` writes a config with

- a `file()` source with `flags(no-parse)` (each line is the message, as our raw
  tail), read from the beginning (no persist file yet), with a large fetch limit
  and input window so the reader is not the bottleneck;
- a `kafka-c()` destination to `bootstrap-servers`, `message("$MSG")`, and the
  same producer settings as the agent's broker sink in the benchmark (acks=all,
  lz4, linger, batch size, idempotence), passed through `config()`;
- `flags(flow-control)` on the log path, so a full destination queue pauses the
  file reader instead of dropping lines (what a file-to-Kafka setup needs).

It runs in the foreground (`-F`) with its own persist file, pid file and control
socket in a temporary directory, so it never touches a system syslog-ng. syslog-ng
counts a message done when librdkafka queued it, so `delivered()` reads the topic's
high watermark: the clock stops when the broker has every line, as for our agent.

    .venv/bin/python -m bench.peers.syslog_ng --lines 1000000   # standalone run
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

SYSLOG_NG = "/usr/sbin/syslog-ng"
KAFKA_MODULE = "/usr/lib/syslog-ng/3.38/libkafka.so"

CONFIG = """@version: 3.38
options {{
  stats-freq(0);
  time-reopen(1);
  log-fifo-size({fifo});
}};

source s_file {{
  file("{path}" flags(no-parse) follow-freq(0.1) log-fetch-limit({fetch})
       log-iw-size({window}) log-msg-size(1048576));
}};

destination d_kafka {{
  kafka-c(
    bootstrap-servers("{bootstrap}")
    topic("{topic}")
    message("$MSG")
    workers({workers})
    config(
{producer}
    )
  );
}};

log {{ source(s_file); destination(d_kafka); flags(flow-control); }};
"""


def producer_settings(linger_ms: int, idempotence: bool) -> dict[str, str]:
    """librdkafka settings matching the agent's broker sink in bench_agent."""
    return {
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": str(linger_ms),
        "batch.size": "1000000",
        "enable.idempotence": "true" if idempotence else "false",
        "queue.buffering.max.messages": "200000",
    }


class SyslogNg:
    """One syslog-ng child process reading `path` into `topic`; a context manager.
    Owned by the benchmark's main thread."""

    def __init__(
        self,
        path: Path,
        bootstrap: str,
        topic: str,
        linger_ms: int = 20,
        idempotence: bool = True,
        window: int = 100_000,
        workers: int = 1,
    ):
        for needed, package in (
            (SYSLOG_NG, "syslog-ng-core"),
            (KAFKA_MODULE, "syslog-ng-mod-rdkafka"),
        ):
            if not os.path.exists(needed):
                raise RuntimeError(
                    f"{needed} missing: apt-get install {package} (deploy/system-deps.sh)"
                )
        self.dir = Path(tempfile.mkdtemp(prefix="bench-syslog-ng-"))
        self.config = self.dir / "syslog-ng.conf"
        producer = "\n".join(
            f'      "{k}" => "{v}"' for k, v in producer_settings(linger_ms, idempotence).items()
        )
        self.config.write_text(
            CONFIG.format(
                path=path,
                bootstrap=bootstrap,
                topic=topic,
                producer=producer,
                fetch=min(window, 10_000),
                window=window,
                fifo=window,
                workers=workers,
            )
        )
        self.log_path = self.dir / "syslog-ng.out"
        self.proc: subprocess.Popen | None = None
        self.started = 0.0  # monotonic time of the spawn

    def command(self) -> list[str]:
        d = self.dir
        return [
            SYSLOG_NG,
            "-F",
            "-f",
            str(self.config),
            "--persist-file",
            str(d / "syslog-ng.persist"),
            "--pidfile",
            str(d / "syslog-ng.pid"),
            "--control",
            str(d / "syslog-ng.ctl"),
            "--no-caps",
        ]

    def check_syntax(self) -> None:
        out = subprocess.run(
            [*self.command(), "--syntax-only"], capture_output=True, text=True, timeout=30
        )
        if out.returncode != 0:
            raise RuntimeError(f"syslog-ng rejected its config:\n{out.stderr}{out.stdout}")

    def __enter__(self) -> SyslogNg:
        self.check_syntax()
        with open(self.log_path, "ab") as log:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def high_watermark(bootstrap: str, topic: str):
    """A function returning the number of records in partition 0 of `topic` (0 until
    the topic exists), through one reused consumer; `.ready()` tells whether the
    partition answers yet, `.close()` when done."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermark"})

    def offsets() -> tuple[int, int]:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)

    def count() -> int:
        try:
            return offsets()[1]
        except KafkaException:
            return 0

    def ready() -> bool:
        try:
            offsets()
        except KafkaException:
            return False
        return True

    count.ready = ready
    count.close = consumer.close
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1, help="kafka-c worker threads")
    args = parser.parse_args()
    from bench.bench_agent import peer_case, write_log  # bench_agent imports this module
    from testkit.procs import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="bench-syslog-ng-") as tmp_s:
        tmp = Path(tmp_s)
        broker = BrokerProcess(tmp / "broker").start()
        try:
            write_log(tmp / "access.log", args.lines)
            log, n = tmp / "access.log", args.lines
            print(peer_case(tmp, log, n, broker, "syslog-ng-solo", True, args.workers))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
