"""Fleet figures (issue 33): the pipeline as deployed, measured from outside.

    .venv/bin/python -m bench.bench_fleet [--seconds 60] [--warmup 40] [--rate 625]

Each run is the fleet lab of the tests (testkit/fleet.py) without faults: web hosts
with a real nginx and the agent installed from the wheel with the production
template (exactly-once, file channels, SASL_SSL), three brokers with ZooKeeper and
ACLs, a Spark standalone cluster (a master, two workers) running `logflume etl
realtime` with provisional rows on `nginx-stats`. Every host's load generator
(testkit/loadgen.py) asks its nginx for `--rate` requests/s and records when each
response came back. Two runs, side by side: 1 host, then 8 hosts, at the same rate
per host (8 x 625 = 5,000 lines/s in all).

What is measured, over `--seconds` after `--warmup`:
- freshness: a response is a probe (host, minute, how many responses of that
  host and minute so far). A consumer of `nginx-stats` stamps each row on arrival;
  a probe's freshness is the arrival of the first row of its host and minute whose
  `requests` reaches its count, minus the probe's time. The topic has three
  partitions read independently, so a row counting k lines holds k lines of that
  host and minute, not necessarily the first k: freshness by count, as Kafka's lag.
- end-to-end throughput: lines of the measured window that reached a row, per
  second of the window (it equals the offered rate when the pipeline keeps up).
- the agents' CPU per line: user + system CPU of each agent process over the window
  (/proc/<pid>/stat) over the access-log lines its host wrote then (the error-log
  lines of the 4xx responses, one in ten, ride along); the median over the hosts.
  Cost per host must not grow with the number of hosts.
- where the cores go: CPU of every process of the lab over the window, summed by
  role (load generators, nginx, agents, brokers, ZooKeeper, Spark's JVMs and Python
  workers), in cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import orjson

from testkit.fleet import Fleet, build_wheel

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MODES = {"quick": (20.0, 40.0), "default": (60.0, 40.0), "full": (180.0, 60.0)}


ROLES = (  # (role, what its command line holds), first match wins
    ("loadgen", "testkit.loadgen"),
    ("nginx", "nginx"),
    ("agent", "agent run"),
    ("broker", "logflume broker"),
    ("zookeeper", "QuorumPeerMain"),
    ("spark", "spark"),
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_by_role() -> dict[tuple[str, int], float]:
    """CPU seconds so far of every process of the lab, keyed by (role, pid); Spark's
    roles are its JVMs and their Python workers (pyspark in the command line)."""
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            role = next((r for r, mark in ROLES if mark.lower() in args.lower()), None)
            if role is not None:
                out[(role, int(proc.name))] = cpu_seconds(int(proc.name))
        except (OSError, ValueError):
            continue  # gone meanwhile
    return out


def cores_by_role(before: dict, after: dict, seconds: float) -> dict[str, float]:
    """Cores each role used between two `cpu_by_role` snapshots."""
    cores: dict[str, float] = {}
    for (role, pid), cpu in after.items():
        cores[role] = cores.get(role, 0.0) + (cpu - before.get((role, pid), 0.0)) / seconds
    return dict(sorted(cores.items(), key=lambda kv: -kv[1]))


class StatsWatcher(threading.Thread):
    """Consumes nginx-stats from the start as the lab's super user, stamping rows."""

    def __init__(self, fleet: Fleet):
        super().__init__(daemon=True)
        self.fleet = fleet
        self.stop = threading.Event()
        self.rows: list[tuple[float, int, str, int]] = []  # (arrival, minute, host, requests)

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        with self.fleet.lab.inside("client"):
            c = Consumer(
                {"bootstrap.servers": self.fleet.plain, "group.id": "bench-fleet",
                 "fetch.wait.max.ms": 10, "enable.auto.commit": False}
            )  # fmt: skip
            c.assign([TopicPartition("nginx-stats", 0, 0)])
            try:
                while not self.stop.is_set():
                    for m in c.consume(500, timeout=0.05):
                        if m.error() is not None:
                            continue
                        at = time.time()
                        d = orjson.loads(m.value())
                        start = datetime.fromisoformat(d["window_start"].replace("Z", "+00:00"))
                        minute = int(start.timestamp())
                        self.rows.append((at, minute, d.get("host"), d["requests"]))
            finally:
                c.close()


def freshness(probes: dict[str, list[float]], rows, since: float, until: float):
    """Per probe answered in [since, until): seconds to the first covering row;
    and the number of such probes no row covered."""
    seen: dict[tuple[int, str], list[tuple[float, int]]] = {}
    for at, minute, host, requests in rows:
        seen.setdefault((minute, host), []).append((at, requests))
    out, missing = [], 0
    for host, times in probes.items():
        counts: dict[int, int] = {}
        for t in times:
            minute = int(t) // 60 * 60
            counts[minute] = counts.get(minute, 0) + 1
            if not since <= t < until:
                continue
            covering = [a for a, r in seen.get((minute, host), []) if r >= counts[minute]]
            if covering:
                out.append(max(0.0, min(covering) - t))
            else:
                missing += 1
    return out, missing


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(hosts: int, rate: float, seconds: float, warmup: float, root: Path, wheel: Path):
    fleet = Fleet(root, hosts, wheel, Path(sys.prefix) / "wheelhouse")
    loads = []
    try:
        fleet.start()
        realtime = fleet.etl("realtime", root / "rt", "--starting-offsets", "latest")
        watcher = StatsWatcher(fleet)
        watcher.start()
        time.sleep(15)  # the job's first batches (JVMs, executors) before traffic
        began = time.time()
        records = {h.name: root / f"{h.name}.times" for h in fleet.hosts}
        for host in fleet.hosts:
            fleet.start_traffic(host, rate, warmup + seconds, 0, record=records[host.name])
        time.sleep(warmup)
        since = time.time()
        cpu0 = {h.name: cpu_seconds(h.procs["agent"].pid) for h in fleet.hosts}
        roles0 = cpu_by_role()
        while time.time() < since + seconds:
            loads.append(os.getloadavg()[0])
            time.sleep(min(5.0, max(0.0, since + seconds - time.time())))
        until = time.time()
        cpu1 = {h.name: cpu_seconds(h.procs["agent"].pid) for h in fleet.hosts}
        roles = cores_by_role(roles0, cpu_by_role(), until - since)
        for host in fleet.hosts:
            host.procs["loadgen"].wait(60)
        time.sleep(15)  # rows of the window's last lines
        watcher.stop.set()
        watcher.join(10)
        assert realtime.poll() is None, (root / "realtime.log").read_text()[-3000:]
        probes = {
            name: [float(x) for x in path.read_text().split()] for name, path in records.items()
        }
        lat, missing = freshness(probes, watcher.rows, since, until)
        in_window = {n: sum(since <= t < until for t in ts) for n, ts in probes.items()}
        cost = [(cpu1[n] - cpu0[n]) / max(1, in_window[n]) * 1e6 for n in cpu0]
        return {
            "hosts": hosts,
            "offered": sum(in_window.values()) / (until - since),
            "delivered": len(lat) / (until - since),
            "latencies": lat,
            "missing": missing,
            "cpu_us_per_line": statistics.median(cost),
            "cpu_range": (min(cost), max(cost)),
            "loads": loads,
            "cores": roles,
            "started": began,
        }
    finally:
        fleet.close()


def describe(r: dict) -> str:
    lat = r["latencies"]
    fresh = (
        f"p50 {pct(lat, 0.5):.2f} s, p99 {pct(lat, 0.99):.2f} s, max {max(lat):.2f} s"
        if lat
        else "no probe covered"
    )
    loads = r["loads"] or [0.0]
    return (
        f"{r['hosts']} host(s): offered {r['offered']:,.0f} lines/s, reached a row"
        f" {r['delivered']:,.0f} lines/s ({r['missing']} probes never covered);"
        f" freshness {fresh}; agent CPU per line median {r['cpu_us_per_line']:.1f} us"
        f" (hosts {r['cpu_range'][0]:.1f}-{r['cpu_range'][1]:.1f}); load (1 min) median"
        f" {statistics.median(loads):.1f} (max {max(loads):.1f}); cores used: "
        + ", ".join(f"{role} {c:.2f}" for role, c in r["cores"].items())
    )


def run_both(seconds: float, warmup: float, rate: float, hosts: int) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        wheel = build_wheel(Path(tmp) / "wheel")
        for n in (1, hosts):
            print(f"fleet of {n} host(s) at {rate:g} lines/s each ...", flush=True)
            r = measure(n, rate, seconds, warmup, Path(tmp) / f"fleet-{n}", wheel)
            print(describe(r), flush=True)
            results.append(r)
    return results


def figures(mode: str) -> list[dict]:
    seconds, warmup = MODES[mode]
    one, many = run_both(seconds, warmup, 625.0, 8)
    detail = f"{describe(one)}; {describe(many)}"
    common = {"area": "fleet", "reference": "issue 33", "detail": detail}
    lat = many["latencies"]
    return [
        {**common, "metric": "fleet of 8 hosts, 5,000 lines/s: freshness nginx -> realtime row, p99",
         "value": pct(lat, 0.99) if lat else "no probe covered", "unit": "s", "target": "<= 1.5"},
        {**common, "metric": "fleet of 8 hosts: lines/s end to end (nginx -> realtime row)",
         "value": round(many["delivered"]), "unit": "lines/s", "target": "", "detail": ""},
        {**common, "metric": "agent CPU per line, 8 hosts / 1 host (same rate per host)",
         "value": round(many["cpu_us_per_line"] / one["cpu_us_per_line"], 2), "unit": "ratio",
         "target": "<= 1.1", "detail": ""},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="measured window")
    ap.add_argument("--warmup", type=float, default=40.0, help="traffic before measuring")
    ap.add_argument("--rate", type=float, default=625.0, help="requests/s per host")
    ap.add_argument("--hosts", type=int, default=8, help="hosts of the second run")
    args = ap.parse_args(argv)
    one, many = run_both(args.seconds, args.warmup, args.rate, args.hosts)
    ratio = many["cpu_us_per_line"] / one["cpu_us_per_line"]
    print(f"agent CPU per line, {args.hosts} hosts / 1 host: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
