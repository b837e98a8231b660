"""Broker at scale: 1,000 partitions holding 10 GiB, restarts, 1,000 connections, 100 groups,
1,000 groups committing every second.

    .venv/bin/python -m bench.bench_scale                 # the targets' sizes (~10-15 min)
    .venv/bin/python -m bench.bench_scale --quick         # 100 partitions, 0.5 GiB, 200 conns, 20 groups
    .venv/bin/python -m bench.bench_scale --partitions 1000 --gb 10 --connections 1000 --groups 100
    .venv/bin/python -m bench.bench_scale --partitions 10000 --gb 0.5 --connections 100 --groups 10

One `logflume broker` subprocess (default settings) on loopback, measured in this order:

1. load: `--topics` topics of `--partitions`/`--topics` partitions are created
   (CreateTopics), then `--loaders` processes (bench/scale_clients.py) produce `--gb`
   GiB over the wire with the broker's own codec: Produce v8, acks=1, one uncompressed
   `--batch-kib` batch of `--record-bytes` records (log lines) per partition per
   request. 1000-byte records: the broker walks every record of a produced batch
   (Kafka's LogValidator checks), ~2-5 us each, so 100-byte records would make the
   load itself take ~10x longer without changing what is measured here. Broker RSS
   (VmRSS, RssAnon, RssFile from /proc/<pid>/status) is sampled every 0.25 s, per phase.
2. serving: every partition is read once from offset 0 (Fetch v11, 1 MiB per
   partition, 16 partitions a request): the broker answers with sendfile from the
   page cache; RSS after the load and during this is figure 1.
3. connections: one asyncio process opens `--connections` connections, each doing
   ApiVersions v2 + Metadata v8 (one topic), `--producing` of them producing a small
   batch every second; held `--hold` s, then every connection sends ApiVersions
   again and must be answered: RSS growth per connection, and how many were served.
4. groups: `--members` processes, each with one confluent-kafka consumer of each of
   `--groups` groups (a thread each; session 10 s, heartbeat 1 s, eager range
   assignor), all subscribe at once to a 6-partition topic; time until every group's
   members own all 6 partitions (checked with DescribeGroups: Stable, full size);
   then one member of every group close()s (LeaveGroup) at once: time until the
   others own everything again. Broker RSS throughout.
5. commits: `--committers` groups each commit the 6 partitions' offsets once a
   second (one process, raw OffsetCommit: bench/scale_clients.py, role commit);
   the broker's CPU time (utime + stime, /proc/<pid>/stat) over `--commit-hold` s
   of it, against the same span idle just before: the CPU the commits cost.
6. restart after SIGKILL: time from starting the new process to a successful
   Metadata + Fetch (from the middle of the first partition). Nothing rolled or was
   flushed since the load (segment.bytes 1 GiB > one partition's data), so recovery
   rescans every partition's active segment: all the data, from the page cache.
7. clean restart: SIGTERM (shutdown time noted), start, same measure.

Per partition, for the cost curve from 1,000 to 10,000 partitions: open files, RSS
growth from the empty broker to the topics created (before data), restart times.
A broker's open files are limited (20,000 here): 10,000 idle connections and
10,000 partitions do not fit in one process together, so measure them in two runs.

The data directory (`--data-dir`, default a temp dir under /tmp) is deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.report import print_figures
from bench.scale_clients import (
    FETCH_V,
    GIB,
    GROUP_PARTITIONS,
    GROUP_SETTINGS,
    GROUP_TOPIC,
    METADATA_V,
    MIB,
    PER_REQUEST,
    Wire,
    _build_batch,
    _fetch_body,
    _metadata_body,
    _raise_nofile,
    partition_layout,
)
from broker.cluster.launcher import broker_command
from common.ports import free_port


@dataclass(frozen=True)
class Sizes:
    partitions: int = 1000
    topics: int = 10
    gb: float = 10.0
    batch_kib: int = 64
    record_bytes: int = 1000
    connections: int = 1000
    producing: int = 20
    hold: float = 10.0
    groups: int = 100
    members: int = 3
    loaders: int = 2
    committers: int = 1000
    commit_hold: float = 10.0


MODES = {
    "quick": Sizes(
        partitions=100,
        gb=0.5,
        connections=200,
        groups=20,
        hold=5.0,
        committers=100,
        commit_hold=5.0,
    ),
    "default": Sizes(),
    "full": Sizes(),
}
TARGET_RSS_MIB = 300
TARGET_CLEAN_S = 10
TARGET_CRASH_S = 60
TARGET_CONN_KIB = 50
TARGET_FILES_PER_PARTITION = 1.5


# -- pure helpers (tests/bench/test_scale.py) ---------------------------------------------


def parse_status(text: str) -> dict[str, int]:
    """/proc/<pid>/status -> {"VmRSS": KiB, "RssAnon": KiB, "RssFile": KiB, ...}: the
    fields measured in kB."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key] = int(parts[0])
    return out


def batches_per_partition(total_bytes: int, partitions: int, batch_bytes: int) -> int:
    """Whole batches each partition gets so that the total reaches `total_bytes`."""
    if partitions <= 0 or batch_bytes <= 0:
        raise ValueError("partitions and batch size must be positive")
    return max(1, -(-total_bytes // (partitions * batch_bytes)))


def group_settled(owned: dict[str, frozenset[int]], members: set[str], partitions: int) -> bool:
    """A group is settled when each of `members` owns a non-empty set and together,
    without overlap, they own exactly partitions 0..partitions-1."""
    sets = [owned.get(m, frozenset()) for m in members]
    if not members or not all(sets):
        return False
    return sum(map(len, sets)) == partitions and frozenset().union(*sets) == frozenset(
        range(partitions)
    )


def per_connection_kib(rss_before_kib: int, rss_after_kib: int, connections: int) -> float:
    return (rss_after_kib - rss_before_kib) / max(1, connections)


def _spawn(role: str, **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "bench.scale_clients", "--role", role]
    for key, value in kw.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )


# -- the broker and its memory ----------------------------------------------------------------


class Broker:
    """The broker subprocess (restartable) with its log in the data dir's parent."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = open(root / "broker.log", "ab")

    def start(self) -> float:
        """Start the process; returns time.monotonic() just before the fork."""
        cmd = broker_command(
            self.data, f"127.0.0.1:{self.port}", log_flags=["--log-level", "WARNING"]
        )
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        return t0

    def open_files(self) -> int:
        """Descriptors the broker process holds (files, sockets, pipes)."""
        try:
            return len(list(Path(f"/proc/{self.proc.pid}/fd").iterdir()))
        except (OSError, AttributeError):
            return 0

    def cpu_s(self) -> float:
        """CPU seconds the broker process used so far (user + system)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        except (OSError, AttributeError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status(self) -> dict[str, int]:
        try:
            return parse_status(Path(f"/proc/{self.proc.pid}/status").read_text())
        except (OSError, AttributeError):
            return {}

    def wait_serving(self, t0: float, probe: tuple[str, int, int] | None, timeout: float) -> float:
        """Seconds from `t0` until Metadata, and a Fetch of `probe` (topic, partition,
        offset) returning records, both succeed."""
        from broker.protocol import ApiKey

        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}")
            try:
                w = Wire(self.port, timeout=10)
            except OSError:
                time.sleep(0.02)
                continue
            try:
                md = w.request(ApiKey.METADATA, METADATA_V, _metadata_body(None))
                if probe is None:
                    return time.monotonic() - t0
                topics = {t["name"]: t for t in md["topics"]}
                if probe[0] in topics and not topics[probe[0]]["error_code"]:
                    body = w.request(ApiKey.FETCH, FETCH_V, _fetch_body([probe], MIB))
                    part = body["responses"][0]["partitions"][0]
                    if part["error_code"] == 0 and len(part["records"]) > 0:
                        return time.monotonic() - t0
            except (OSError, ConnectionError):
                pass
            finally:
                w.close()
            time.sleep(0.02)
        raise TimeoutError(f"broker not serving after {timeout:.0f}s")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self) -> float:
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(300)
        return time.monotonic() - t0


class RssSampler(threading.Thread):
    """Samples the broker's /proc status every `period` s, keeping per phase the
    sample with the largest VmRSS and the last one. Set `phase` from the main thread."""

    def __init__(self, broker: Broker, period: float = 0.25):
        super().__init__(daemon=True)
        self.broker = broker
        self.period = period
        self.phase = "start"
        self.peak: dict[str, dict[str, int]] = {}
        self.last: dict[str, dict[str, int]] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.period)

    def sample(self) -> dict[str, int]:
        s = self.broker.status()
        if s.get("VmRSS"):
            phase = self.phase
            if s["VmRSS"] > self.peak.get(phase, {}).get("VmRSS", 0):
                self.peak[phase] = s
            self.last[phase] = s
        return s

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def _mib(kib: int) -> float:
    return kib / 1024


def _split(s: dict[str, int]) -> str:
    return (
        f"VmRSS {_mib(s.get('VmRSS', 0)):.0f} MiB = anon {_mib(s.get('RssAnon', 0)):.0f}"
        f" + file {_mib(s.get('RssFile', 0)):.0f} + shmem {_mib(s.get('RssShmem', 0)):.0f}"
    )


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- phases -------------------------------------------------------------------------------------


def create_topics(broker: Broker, sizes: Sizes) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    layout = partition_layout(sizes.partitions, sizes.topics)
    counts = collections.Counter(t for t, _ in layout)
    # 10,000 partitions take more than librdkafka's default 60 s request timeout on a
    # busy disk (a directory and three files each)
    admin = AdminClient(
        {"bootstrap.servers": f"127.0.0.1:{broker.port}", "socket.timeout.ms": 300_000}
    )
    t0 = time.monotonic()
    new = [NewTopic(t, n, 1) for t, n in counts.items()]
    new.append(NewTopic(GROUP_TOPIC, GROUP_PARTITIONS, 1))
    for f in admin.create_topics(new, request_timeout=300).values():
        f.result(300)
    return time.monotonic() - t0


def load(broker: Broker, sizes: Sizes) -> dict:
    from broker.protocol.records import RecordBatch

    batch = _build_batch(sizes.batch_kib * 1024, sizes.record_bytes)
    batch_len = len(batch)
    rounds = batches_per_partition(int(sizes.gb * GIB), sizes.partitions, batch_len)
    t0 = time.monotonic()
    procs = [
        _spawn(
            "load",
            port=broker.port,
            partitions=sizes.partitions,
            topics=sizes.topics,
            batch_kib=sizes.batch_kib,
            record_bytes=sizes.record_bytes,
            batches=rounds,
            shard=i,
            shards=sizes.loaders,
        )
        for i in range(sizes.loaders)
    ]
    parts = [_finish(p, 3600) for p in procs]
    elapsed = time.monotonic() - t0
    errors = collections.Counter()
    for p in parts:
        errors.update(p["errors"])
    total = sum(p["bytes"] for p in parts)
    return {
        "bytes": total,
        "seconds": elapsed,
        "rate": total / elapsed,
        "batch_bytes": batch_len,
        "batch_records": RecordBatch(batch).records_count,
        "rounds": rounds,
        "errors": dict(errors),
    }


def _finish(proc: subprocess.Popen, timeout: float) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"bench role failed with exit code {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def read_all(broker: Broker, sizes: Sizes) -> dict:
    """Fetch 1 MiB from offset 0 of every partition (16 partitions a request)."""
    from broker.protocol import ApiKey

    layout = partition_layout(sizes.partitions, sizes.topics)
    w = Wire(broker.port)
    got, errors = 0, 0
    t0 = time.monotonic()
    for i in range(0, len(layout), PER_REQUEST):
        chunk = [(t, p, 0) for t, p in layout[i : i + PER_REQUEST]]
        body = w.request(ApiKey.FETCH, FETCH_V, _fetch_body(chunk, MIB))
        for t in body["responses"]:
            for p in t["partitions"]:
                errors += p["error_code"] != 0
                got += len(p["records"])
    elapsed = time.monotonic() - t0
    w.close()
    return {"bytes": got, "seconds": elapsed, "errors": errors}


def hold_connections(broker: Broker, sizes: Sizes, sampler: RssSampler) -> dict:
    time.sleep(1.0)
    before = sampler.sample()
    proc = _spawn(
        "hold",
        port=broker.port,
        partitions=sizes.partitions,
        topics=sizes.topics,
        connections=sizes.connections,
        producing=sizes.producing,
    )
    opened = json.loads(proc.stdout.readline())
    print(
        f"  {opened['opened']:,} connections open (ApiVersions + Metadata each) in"
        f" {opened['seconds']:.1f} s; holding {sizes.hold:.0f} s",
        flush=True,
    )
    time.sleep(1.0)
    after_open = sampler.sample()
    time.sleep(sizes.hold)
    held = sampler.sample()
    proc.stdin.write("check\n")
    proc.stdin.flush()
    check = json.loads(proc.stdout.readline())
    after_check = sampler.sample()
    proc.stdin.write("quit\n")
    proc.stdin.flush()
    _finish(proc, 60)
    time.sleep(1.0)
    closed = sampler.sample()
    return {
        "before": before,
        "open": after_open,
        "held": held,
        "checked": after_check,
        "closed": closed,
        "opened": opened,
        "check": check,
    }


class _Events:
    """Reads the JSON event lines of the member processes (a thread per process)."""

    def __init__(self, procs: list[subprocess.Popen]):
        self.lock = threading.Lock()
        self.owned: dict[int, dict[str, frozenset[int]]] = collections.defaultdict(dict)
        self.last_change: dict[int, float] = {}
        self.left: dict[int, dict] = {}
        self.ready = 0
        self.threads = [threading.Thread(target=self._read, args=(p,), daemon=True) for p in procs]
        for t in self.threads:
            t.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                kind = ev.get("event")
                if kind == "ready":
                    self.ready += 1
                elif kind == "assign":
                    self.owned[ev["g"]][str(ev["m"])] = frozenset(ev["parts"])
                    self.last_change[ev["g"]] = ev["t"]
                elif kind == "revoke":
                    self.owned[ev["g"]][str(ev["m"])] = frozenset()
                    self.last_change[ev["g"]] = ev["t"]
                elif kind == "left":
                    self.left[ev["m"]] = ev

    def settled(self, groups: int, members: set[str]) -> float | None:
        """Wall time of the last change if every group is settled, else None."""
        with self.lock:
            if all(group_settled(self.owned[g], members, GROUP_PARTITIONS) for g in range(groups)):
                return max(self.last_change.get(g, 0.0) for g in range(groups))
        return None


def _wait_settled(events: _Events, groups: int, members: set[str], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = events.settled(groups, members)
        if t is not None:
            time.sleep(1.5)  # settled and still so (no rebalance in flight)?
            again = events.settled(groups, members)
            if again == t:
                return t
            continue
        time.sleep(0.05)
    raise TimeoutError(f"groups not settled after {timeout:.0f}s")


def _describe_stable(port: int, groups: int, members: int) -> int:
    """How many groups DescribeGroups reports Stable with `members` members."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    names = [f"scale-g{g}" for g in range(groups)]
    futures = admin.describe_consumer_groups(names, request_timeout=60)
    stable = 0
    for f in futures.values():
        d = f.result(60)
        stable += d.state == ConsumerGroupState.STABLE and len(d.members) == members
    return stable


def rebalance(broker: Broker, sizes: Sizes) -> dict:
    procs = [
        _spawn("members", port=broker.port, groups=sizes.groups, member=m)
        for m in range(sizes.members)
    ]
    events = _Events(procs)
    try:
        deadline = time.monotonic() + 300
        while events.ready < len(procs):
            if time.monotonic() > deadline:
                raise TimeoutError("member processes did not start")
            time.sleep(0.05)
        everyone = {str(m) for m in range(sizes.members)}
        t_go = time.time()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        joined = _wait_settled(events, sizes.groups, everyone, 300) - t_go
        stable_joined = _describe_stable(broker.port, sizes.groups, sizes.members)
        print(
            f"  {sizes.groups} groups x {sizes.members} joined: settled after {joined:.2f} s;"
            f" DescribeGroups: {stable_joined} Stable",
            flush=True,
        )
        t_leave = time.time()
        procs[0].stdin.write("leave\n")
        procs[0].stdin.flush()
        rest = everyone - {"0"}
        left = _wait_settled(events, sizes.groups, rest, 300) - t_leave
        stable_left = _describe_stable(broker.port, sizes.groups, sizes.members - 1)
        print(
            f"  one member of each left: settled after {left:.2f} s;"
            f" DescribeGroups: {stable_left} Stable",
            flush=True,
        )
        closed_s = events.left.get(0, {}).get("closed_s", float("nan"))
        return {
            "joined_s": joined,
            "left_s": left,
            "stable_joined": stable_joined,
            "stable_left": stable_left,
            "close_s": closed_s,
        }
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    p.stdin.write("quit\n")
                    p.stdin.flush()
                except OSError:
                    pass
        for p in procs:
            try:
                p.wait(90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def commits(broker: Broker, sizes: Sizes) -> dict:
    """Broker CPU over `commit_hold` s idle, then over as long with `committers`
    groups committing every second."""
    idle0 = broker.cpu_s()
    time.sleep(sizes.commit_hold)
    idle = broker.cpu_s() - idle0
    proc = _spawn("commit", port=broker.port, groups=sizes.committers)
    try:
        ready = json.loads(proc.stdout.readline())
        busy0, t0 = broker.cpu_s(), time.monotonic()
        time.sleep(sizes.commit_hold)
        busy, span = broker.cpu_s() - busy0, time.monotonic() - t0
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        done = _finish(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    made = done["commits"].get("ok", 0)
    return {
        "idle_cpu_s": idle,
        "busy_cpu_s": busy,
        "span_s": span,
        "first": ready["commits"],
        "commits": made,
        "errors": done["commits"].get("error", 0),
        "rate": made / done["seconds"],
        "late_max_s": done["late_max_s"],
    }


# -- the run ----------------------------------------------------------------------------------


def run(sizes: Sizes, data_dir: Path | None = None, keep: bool = False) -> dict:
    _raise_nofile()
    root = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=data_dir))
    broker = Broker(root)
    sampler = RssSampler(broker)
    res: dict = {"sizes": sizes.__dict__, "load_avg": {"start": _loadavg()}}
    layout = partition_layout(sizes.partitions, sizes.topics)
    probe_topic, probe_part = layout[0]
    try:
        t0 = broker.start()
        broker.wait_serving(t0, None, 60)
        sampler.start()
        sampler.phase = "empty"
        time.sleep(1.0)
        res["rss_empty"] = sampler.sample()
        res["create_s"] = create_topics(broker, sizes)
        print(f"created {sizes.partitions} partitions in {res['create_s']:.1f} s", flush=True)
        time.sleep(1.0)
        res["rss_topics"] = sampler.sample()

        sampler.phase = "load"
        print(
            f"load {sizes.gb:g} GiB into {sizes.partitions} partitions (load {_loadavg()})",
            flush=True,
        )
        res["load"] = ld = load(broker, sizes)
        res["load_avg"]["load"] = _loadavg()
        print(
            f"  {ld['bytes'] / GIB:.2f} GiB in {ld['seconds']:.1f} s = {ld['rate'] / MIB:,.0f} MiB/s"
            f" ({ld['batch_bytes']:,}-byte batches, errors {ld['errors'] or 'none'})",
            flush=True,
        )
        sampler.phase = "after load"
        time.sleep(2.0)
        res["rss_after_load"] = sampler.sample()
        res["open_files"] = broker.open_files()
        sampler.phase = "serving: read every partition"
        res["read"] = read_all(broker, sizes)
        print(
            f"  read {res['read']['bytes'] / MIB:,.0f} MiB from {sizes.partitions} partitions in"
            f" {res['read']['seconds']:.1f} s; RSS {_split(sampler.sample())}",
            flush=True,
        )
        probe_offset = ld["rounds"] // 2 * ld["batch_records"]  # mid-partition

        sampler.phase = "connections"
        print(f"{sizes.connections} connections (load {_loadavg()})", flush=True)
        res["conns"] = c = hold_connections(broker, sizes, sampler)
        res["load_avg"]["connections"] = _loadavg()
        print(
            f"  before {_split(c['before'])}; open {_split(c['open'])}; after hold"
            f" {_split(c['held'])}; served {c['check']['served']}/{c['check']['opened']}"
            f" in {c['check']['seconds']:.2f} s; produced {c['check']['produced']}",
            flush=True,
        )

        sampler.phase = "groups"
        print(f"{sizes.groups} groups x {sizes.members} members (load {_loadavg()})", flush=True)
        res["groups"] = rebalance(broker, sizes)
        res["load_avg"]["groups"] = _loadavg()

        sampler.phase = "commits"
        print(f"{sizes.committers} groups committing every second (load {_loadavg()})", flush=True)
        res["commits"] = cm = commits(broker, sizes)
        res["load_avg"]["commits"] = _loadavg()
        print(
            f"  {cm['rate']:,.0f} commits/s, errors {cm['errors']}; broker CPU"
            f" {cm['busy_cpu_s'] / cm['span_s']:.1%} (idle {cm['idle_cpu_s'] / cm['span_s']:.1%})",
            flush=True,
        )

        def restart(key: str, phase: str) -> None:
            """Start the stopped broker; time until it serves the probe, then RSS."""
            sampler.phase = phase
            t0 = broker.start()
            res[f"{key}_s"] = broker.wait_serving(t0, (probe_topic, probe_part, probe_offset), 600)
            res["load_avg"][key] = _loadavg()
            time.sleep(1.0)
            res[f"rss_after_{key}"] = rss = sampler.sample()
            print(f"  serving after {res[f'{key}_s']:.2f} s; {_split(rss)}", flush=True)

        sampler.phase = "crash"
        broker.kill()
        print(f"SIGKILL, restart (load {_loadavg()})", flush=True)
        restart("crash", "recovery after SIGKILL")

        sampler.phase = "clean stop"
        res["shutdown_s"] = broker.terminate()
        print(f"SIGTERM (stopped in {res['shutdown_s']:.2f} s), restart", flush=True)
        restart("clean", "clean restart")
        res["peaks"] = dict(sampler.peak)
        res["disk_bytes"] = sum(f.stat().st_size for f in broker.data.rglob("*.log") if f.is_file())
        return res
    finally:
        try:
            if broker.proc is not None and broker.proc.poll() is None:
                broker.terminate()
        finally:
            sampler.stop()
            broker.log.close()
        if keep:
            print(f"kept {root}", flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)


def to_figures(res: dict, sizes: Sizes) -> list[dict]:
    peaks = res["peaks"]
    ld = res["load"]
    gib = ld["bytes"] / GIB
    size_txt = f"{sizes.partitions:,} partitions, {gib:.1f} GiB"
    serving = [
        s
        for s in (
            res["rss_after_load"],
            peaks.get("after load"),
            peaks.get("serving: read every partition"),
        )
        if s
    ]
    worst = max(serving, key=lambda s: s["VmRSS"])
    c = res["conns"]
    n_open = c["opened"]["opened"]
    per_conn = per_connection_kib(c["before"]["VmRSS"], c["held"]["VmRSS"], n_open)
    per_conn_anon = per_connection_kib(c["before"]["RssAnon"], c["held"]["RssAnon"], n_open)
    g = res["groups"]
    cm = res["commits"]
    la = res["load_avg"]
    return [
        {
            "area": "scale",
            "metric": f"load {size_txt} over the wire ({ld['batch_bytes'] // 1024} KiB batches,"
            f" {sizes.loaders} loader connections, acks=1)",
            "value": ld["rate"] / MIB,
            "unit": "MiB/s",
            "detail": f"{ld['bytes']:,} bytes in {ld['seconds']:.1f} s, produce errors"
            f" {ld['errors'] or 'none'}; CreateTopics of {sizes.partitions:,} partitions"
            f" {res['create_s']:.1f} s; peak RSS during the load {_split(peaks.get('load', {}))};"
            f" load average after {la.get('load', '?')}",
        },
        {
            "area": "scale",
            "metric": f"broker RSS after the load and while serving reads, {size_txt} (max)",
            "value": _mib(worst["VmRSS"]),
            "unit": "MiB",
            "target": f"< {TARGET_RSS_MIB}",
            "reference": "issue: the data lives in the page cache, not the heap",
            "detail": f"{_split(worst)}; with the topics created, before data:"
            f" {_split(res['rss_topics'])}; reading 1 MiB of each partition"
            f" ({res['read']['bytes'] / MIB:,.0f} MiB in {res['read']['seconds']:.1f} s)",
        },
        {
            "area": "scale",
            "metric": f"open files of the broker per partition after the load, {size_txt}",
            "value": res["open_files"] / sizes.partitions,
            "unit": "files",
            "target": f"<= {TARGET_FILES_PER_PARTITION}",
            "reference": "issue: 10,000 partitions within 20,000 open files",
            "detail": f"{res['open_files']:,} descriptors (listeners and pipes included): one"
            " per segment (its .log); the active segment's indexes are in memory, a closed"
            " segment's mapped on first lookup (one descriptor each on CPython < 3.13)",
        },
        {
            "area": "scale",
            "metric": f"broker RSS per partition, {sizes.partitions:,} partitions created"
            " (before data)",
            "value": per_connection_kib(
                res["rss_empty"]["VmRSS"], res["rss_topics"]["VmRSS"], sizes.partitions
            ),
            "unit": "KiB",
            "detail": f"empty broker {_split(res['rss_empty'])}; with the topics"
            f" {_split(res['rss_topics'])}",
        },
        {
            "area": "scale",
            "metric": f"clean shutdown (SIGTERM to exit), {size_txt}",
            "value": res["shutdown_s"],
            "unit": "s",
            "detail": "every partition written since the last flush fsyncs its .log, its"
            " producer snapshot and its new index entries; the logs close on 8 threads;"
            f" load average {la.get('crash', '?')} before",
        },
        {
            "area": "scale",
            "metric": f"clean restart (SIGTERM, start): process start to Metadata + Fetch, {size_txt}",
            "value": res["clean_s"],
            "unit": "s",
            "target": f"<= {TARGET_CLEAN_S}",
            "reference": "issue",
            "detail": f"SIGTERM to exit {res['shutdown_s']:.2f} s; RSS after"
            f" {_split(res['rss_after_clean'])}; load average {la.get('clean', '?')}",
        },
        {
            "area": "scale",
            "metric": f"restart after SIGKILL: process start to Metadata + Fetch, {size_txt}",
            "value": res["crash_s"],
            "unit": "s",
            "target": f"<= {TARGET_CRASH_S}",
            "reference": "issue",
            "detail": f"recovery rescans every partition's active segment ({gib:.1f} GiB, page"
            f" cache warm); RSS after {_split(res['rss_after_crash'])}, peak during"
            f" {_split(peaks.get('recovery after SIGKILL', {}))}; load average"
            f" {la.get('crash', '?')}",
        },
        {
            "area": "scale",
            "metric": f"broker RSS growth per connection, {n_open:,} connections held"
            f" (ApiVersions + Metadata each, {sizes.producing} producing every 1 s)",
            "value": per_conn,
            "unit": "KiB",
            "target": f"< {TARGET_CONN_KIB}",
            "reference": "issue: bounded per-connection memory",
            "detail": f"before {_split(c['before'])}; all open {_split(c['open'])}; after"
            f" {sizes.hold:.0f} s held {_split(c['held'])} (anon {per_conn_anon:.1f} KiB per"
            f" connection); after closing them {_split(c['closed'])}; opened in"
            f" {c['opened']['seconds']:.1f} s; load average {la.get('connections', '?')}",
        },
        {
            "area": "scale",
            "metric": f"connections answered after the hold (ApiVersions on each of {n_open:,})",
            "value": f"{c['check']['served']:,} of {sizes.connections:,}",
            "unit": "",
            "ok": c["check"]["served"] == sizes.connections,
            "detail": f"all answered in {c['check']['seconds']:.2f} s; small produces during the"
            f" hold: {c['check']['produced']}",
        },
        {
            "area": "scale",
            "metric": f"{sizes.groups} groups x {sizes.members} confluent-kafka consumers join at"
            " once: until every group owns all its partitions",
            "value": g["joined_s"],
            "unit": "s",
            "detail": f"DescribeGroups then: {g['stable_joined']} of {sizes.groups} Stable with"
            f" {sizes.members} members; broker default group.initial.rebalance.delay.ms (3 s)"
            f" is part of it; session {GROUP_SETTINGS['session.timeout.ms']} ms, heartbeat"
            f" {GROUP_SETTINGS['heartbeat.interval.ms']} ms; {sizes.members} processes",
        },
        {
            "area": "scale",
            "metric": f"one member of each of the {sizes.groups} groups leaves at once: until"
            " every group is Stable again",
            "value": g["left_s"],
            "unit": "s",
            "detail": f"DescribeGroups then: {g['stable_left']} of {sizes.groups} Stable with"
            f" {sizes.members - 1} members; the {sizes.groups} close() calls took"
            f" {g['close_s']:.2f} s; timed from the leave command to the last on_assign;"
            f" load average {la.get('groups', '?')}",
        },
        {
            "area": "scale",
            "metric": f"all {sizes.groups} groups Stable (DescribeGroups) after join and after leave",
            "value": f"{g['stable_joined']} / {g['stable_left']}",
            "unit": "",
            "ok": g["stable_joined"] == g["stable_left"] == sizes.groups,
        },
        {
            "area": "scale",
            "metric": f"broker RSS during the {sizes.groups}-group rebalances (max)",
            "value": _mib(peaks.get("groups", {}).get("VmRSS", 0)),
            "unit": "MiB",
            "detail": _split(peaks.get("groups", {})),
        },
        {
            "area": "scale",
            "metric": f"broker CPU while {sizes.committers:,} groups commit every second"
            f" ({GROUP_PARTITIONS} partitions each), {size_txt}",
            "value": 100 * (cm["busy_cpu_s"] - cm["idle_cpu_s"]) / cm["span_s"],
            "unit": "% of a core",
            "detail": f"{cm['rate']:,.0f} OffsetCommit/s ({cm['errors']} errors), broker CPU"
            f" {cm['busy_cpu_s']:.2f} s over {cm['span_s']:.1f} s committing against"
            f" {cm['idle_cpu_s']:.2f} s idle just before:"
            f" {1e6 * (cm['busy_cpu_s'] - cm['idle_cpu_s']) / max(1, cm['rate'] * cm['span_s']):.0f}"
            f" us per commit; the committer's ticks at most {cm['late_max_s'] * 1000:.0f} ms"
            f" late; RSS {_split(peaks.get('commits', {}))}; load average"
            f" {la.get('commits', '?')}",
        },
    ]


def figures(mode: str) -> list[dict]:
    sizes = MODES[mode]
    print(f"scale benchmark, {mode}: {sizes}", flush=True)
    return to_figures(run(sizes), sizes)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Sizes()
    ap.add_argument(
        "--quick", action="store_true", help="100 partitions, 0.5 GiB, 200 conns, 20 groups"
    )
    ap.add_argument("--partitions", type=int, default=None, help=f"default {d.partitions}")
    ap.add_argument("--topics", type=int, default=None, help=f"default {d.topics}")
    ap.add_argument("--gb", type=float, default=None, help=f"GiB to load (default {d.gb:g})")
    ap.add_argument("--batch-kib", type=int, default=None, help=f"default {d.batch_kib}")
    ap.add_argument("--record-bytes", type=int, default=None, help=f"default {d.record_bytes}")
    ap.add_argument("--connections", type=int, default=None, help=f"default {d.connections}")
    ap.add_argument("--producing", type=int, default=None, help=f"default {d.producing}")
    ap.add_argument("--hold", type=float, default=None, help=f"seconds (default {d.hold:g})")
    ap.add_argument("--groups", type=int, default=None, help=f"default {d.groups}")
    ap.add_argument("--members", type=int, default=None, help=f"per group (default {d.members})")
    ap.add_argument("--loaders", type=int, default=None, help=f"default {d.loaders}")
    ap.add_argument(
        "--committers",
        type=int,
        default=None,
        help=f"groups committing every second (default {d.committers})",
    )
    ap.add_argument(
        "--commit-hold", type=float, default=None, help=f"seconds (default {d.commit_hold:g})"
    )
    ap.add_argument("--data-dir", type=Path, default=None, help="parent of the temp data dir")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args(argv)
    sizes = MODES["quick"] if args.quick else MODES["default"]
    changes = {
        k: getattr(args, k)
        for k in Sizes.__dataclass_fields__
        if getattr(args, k, None) is not None
    }
    sizes = replace(sizes, **changes)
    res = run(sizes, args.data_dir, args.keep)
    print_figures(to_figures(res, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
