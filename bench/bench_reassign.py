"""A throttled partition reassignment under load: how long the move takes against its
throttle's bound, and what it does to produce latency.

    .venv/bin/python -m bench.bench_reassign [--gib 10] [--throttle-mb 100]
        [--partitions 4] [--load-rate 500] [--baseline 15]

One ZooKeeper and three `logflume broker` processes (`testkit.procs.BrokerCluster`).
A topic of `--partitions` partitions, each replicated on brokers 0 and 1 (leaders
alternating), is filled with `--gib` GiB of incompressible 64 KiB records (so each of
the two brokers holds that much). A steady idempotent acks=all producer then writes
1 KiB records at `--load-rate` records/s to a 3-partition topic replicated on all
three brokers, and its produce latency (produce() to the delivery callback) is taken
for `--baseline` seconds after a 3 s warm-up. Then `logflume reassign --execute --throttle` adds broker 2
as a third replica of every partition of the big topic, and `--verify` is run every
2 s until every move is done (it then removes the throttle).

Reported: the bytes copied to broker 2 (the topic's size on broker 0 and 1), the
throttle, its bound (bytes / rate: every byte goes through broker 2's follower
throttle), the move's time from --execute to the --verify that found it complete and
the ratio time/bound (at least 1 less one window when the throttle holds; above it by
the copy's own speed limits and the 2 s polling), the bytes the brokers counted as
throttled, and produce latency p50/p99/max before vs during the move, with delivery
errors (none expected).

Disk: three copies of the topic, so 3 x `--gib` GiB in the system temp directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common.ports import free_port
from testkit.procs import BrokerCluster, wait_until, zookeeper_process
from testkit.scrape import scrape

DATA = "bench-reassign-data"
LOAD = "bench-reassign-load"
RECORD = 64 * 1024
GIB = 1024**3
MB = 1_000_000
WARMUP_S = 3.0
SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "auto.leader.rebalance.enable": "false",
    "log.cleaner.enable": "false",
}


def _create(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, len(assignment), replica_assignment=assignment)
    admin.create_topics([new], operation_timeout=30)[topic].result(60)


def _fill(bootstrap: str, partitions: int, nbytes: int) -> None:
    """`nbytes` of 64 KiB records, spread over the partitions, acks=all."""
    blobs = [os.urandom(RECORD) for _ in range(16)]
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 262144,
        }
    )
    for i in range(nbytes // RECORD):
        while True:
            try:
                p.produce(DATA, blobs[i % len(blobs)], partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(600):
        raise SystemExit("filling the topic did not finish")


class Load:
    """The steady acks=all producer: latency per record, by phase."""

    def __init__(self, bootstrap: str, rate: float):
        self.bootstrap = bootstrap
        self.rate = rate
        self.phase = "warm-up"  # not measured: connecting, metadata, the first batches
        self.latencies: dict[str, list[float]] = {"before": [], "during": []}
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 1,
            }
        )
        value = os.urandom(1024)

        def delivered(err, _msg, sent: float, phase: str) -> None:
            if err is not None:
                self.errors += 1
            elif phase in self.latencies:
                self.latencies[phase].append(time.monotonic() - sent)

        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_at:
                p.poll(min(next_at - now, 0.01))
                continue
            phase = self.phase
            p.produce(LOAD, value, on_delivery=lambda e, m, s=now, ph=phase: delivered(e, m, s, ph))
            next_at += interval
            p.poll(0)
        p.flush(60)


def _percentiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"records": len(values)}
    q = statistics.quantiles(values, n=100)
    return {
        "records": len(values),
        "p50 ms": round(q[49] * 1000, 2),
        "p99 ms": round(q[98] * 1000, 2),
        "max ms": round(max(values) * 1000, 2),
    }


def _reassign(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", "reassign", "--bootstrap-server", bootstrap]
        + ["--command-config", "", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _size(port: int, partitions: int) -> int:
    """The topic's bytes on the broker of metrics port `port`."""
    samples = scrape(port)
    return int(
        sum(samples.get("logflume_broker_log_size_bytes", topic=DATA, partition=str(p)) or 0
            for p in range(partitions))
    )  # fmt: skip


def run(gib: float, throttle_mb: float, partitions: int, load_rate: float, baseline: float) -> dict:
    rate = int(throttle_mb * MB)
    with tempfile.TemporaryDirectory(prefix="bench-reassign-") as tmp:
        root = Path(tmp)
        zk = zookeeper_process(root / "zookeeper")
        ports = {i: free_port() for i in range(3)}
        cluster = BrokerCluster(
            root / "cluster",
            f"{zk.connect}/bench",
            3,
            SETTINGS,
            lambda i: {"metrics.listen": f"127.0.0.1:{ports[i]}"},
        )
        load: Load | None = None
        try:
            cluster.start()
            cluster.wait_joined()
            bootstrap = cluster.bootstrap
            _create(bootstrap, DATA, [[p % 2, 1 - p % 2] for p in range(partitions)])
            _create(bootstrap, LOAD, [[0, 1, 2], [1, 2, 0], [2, 0, 1]])
            filled_at = time.monotonic()
            _fill(bootstrap, partitions, int(gib * GIB))
            fill_s = time.monotonic() - filled_at
            moved = _size(ports[0], partitions)

            load = Load(bootstrap, load_rate)
            load.start()
            time.sleep(WARMUP_S)
            load.phase = "before"
            time.sleep(baseline)
            plan = root / "plan.json"
            plan.write_text(
                json.dumps(
                    {
                        "version": 1,
                        "partitions": [
                            {"topic": DATA, "partition": p, "replicas": [p % 2, 1 - p % 2, 2]}
                            for p in range(partitions)
                        ],
                    }
                )
            )
            load.phase = "during"
            started = time.monotonic()
            done = _reassign(
                bootstrap,
                "--execute",
                "--reassignment-json-file",
                str(plan),
                "--throttle",
                str(rate),
            )
            if done.returncode:
                raise SystemExit(f"reassign --execute failed: {done.stderr}")

            def completed() -> bool:
                out = _reassign(bootstrap, "--verify", "--reassignment-json-file", str(plan))
                return "still in progress" not in out.stdout and out.returncode == 0

            wait_until(completed, timeout=24 * 3600, what="the move", every=2.0)
            took = time.monotonic() - started
            load.phase = "after"
            load.stop()
            leader_bytes = sum(
                scrape(ports[b]).get(
                    "logflume_broker_replication_throttled_bytes_total", side="leader"
                )
                or 0
                for b in (0, 1)
            )
            follower_bytes = scrape(ports[2]).get(
                "logflume_broker_replication_throttled_bytes_total", side="follower"
            )
            bound = moved / rate
            return {
                "bytes moved to broker 2 (GiB)": round(moved / GIB, 3),
                "filling took, s": round(fill_s, 1),
                "throttle, MB/s": throttle_mb,
                "bound (bytes / rate), s": round(bound, 1),
                "move took (--execute to --verify completed), s": round(took, 1),
                "move time / bound": round(took / bound, 3) if bound else None,
                "throttled bytes counted by the leaders (GiB)": round(leader_bytes / GIB, 3),
                "throttled bytes counted by broker 2 (GiB)": round((follower_bytes or 0) / GIB, 3),
                "produce latency before": _percentiles(load.latencies["before"]),
                "produce latency during the move": _percentiles(load.latencies["during"]),
                "delivery errors": load.errors,
            }
        finally:
            if load is not None:
                load.stop()
            cluster.stop()
            zk.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="GiB in the moved topic")
    ap.add_argument("--throttle-mb", type=float, default=20.0, help="throttle, MB/s")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--load-rate", type=float, default=500.0, help="steady records/s")
    ap.add_argument("--baseline", type=float, default=15.0, help="seconds before the move")
    args = ap.parse_args()
    figures = run(args.gib, args.throttle_mb, args.partitions, args.load_rate, args.baseline)
    for name, value in figures.items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
