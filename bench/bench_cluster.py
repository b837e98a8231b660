"""Replicated cluster benchmark (issue 7): throughput with RF 3, failover time, soak.

    .venv/bin/python -m bench.bench_cluster [--seconds 20] [--kills 20] [--session-ms 2000]
    .venv/bin/python -m bench.bench_cluster --soak            # 100 leader kills under load

One ZooKeeper and three `logflume broker` processes on this machine
(`testkit.procs.BrokerCluster`), every topic with replication factor 3 and
`min.insync.replicas=2`; records are 100-byte log lines, lz4-compressed by
confluent-kafka producers (the producer role of `bench.bench_broker`, in their own
processes).

1. throughput: a 6-partition topic (two leaders per broker), `--producers` processes
   for `--seconds` with acks=all, then a fresh topic with acks=1; records/s over the
   whole run including the final flush, and the brokers' CPU.
2. failover: a 1-partition topic, an idempotent acks=all producer writing numbered
   records at `--load-rate` records/s. `--kills` times: SIGKILL the partition's leader
   and time from the kill to the first acknowledged record that was produced after the
   kill; then restart the killed broker and wait for the ISR to be full again. A
   SIGKILLed broker is noticed only when its ZooKeeper session expires, so the figure
   is bounded below by `zookeeper.session.timeout.ms` (`--session-ms`, default 2000;
   ZooKeeper here runs with tickTime 200 ms, so sessions of 0.4-60 s are allowed and
   expire within 200 ms of their timeout).
   Afterwards every record is read back: every acknowledged one must be there, once,
   in order (zero acknowledged records lost).
3. `--soak`: the failover run with 100 kills (`--soak-kills`).
4. `--partition-cuts N` (root: network namespaces): a fresh cluster in namespaces
   (`testkit.netns`) with `logflume cluster up`'s defaults; N times the partition's
   leader is cut off from ZooKeeper and both followers while clients still reach it,
   and each client's stall is timed: from the cut to its first acknowledgement from
   the new leader (librdkafka, kafka-python, kafkajs producers, `testkit.producers`).
5. `--zookeeper-kills N`: a fresh cluster on a 3-member ZooKeeper ensemble; N times
   the ensemble's leader is SIGKILLed under the idempotent acks=all load and the longest
   gap between acknowledgements over two session timeouts is compared with as long a
   window of steady state just before (goal: no gap above 1 s).

    sudo .venv/bin/python -m bench.bench_cluster --skip-throughput --kills 10 --session-ms 3000 --partition-cuts 10
6. `--rolling-restarts N`: a fresh `logflume cluster up` cluster and `--producers`
   load processes (multiprocessing), each an idempotent acks=all confluent-kafka
   producer with the agent's settings (lz4, linger.ms 5) that tracks every record it
   writes to a 3-partition topic (a leader on every broker). First they write as fast
   as the cluster acknowledges for `--seconds`: its acks=all capacity for this
   workload (far below 1's, whose producers send 100,000-record batches and track
   nothing); then they offer half of it (LOAD_SHARE), and `logflume cluster restart
   --rolling` runs N times. Produce latency (produce() to the delivery callback) at p50/p99 during each
   roll against as long a window of steady state just before it (with the rate
   acknowledged then, which shows whether the load was offered in full); delivery
   errors (goal 0); every record read back: acknowledged ones lost and duplicates
   (goal 0 each). `--load-rate` does not apply.

    .venv/bin/python -m bench.bench_cluster --skip-throughput --skip-failover --zookeeper-kills 10 --session-ms 3000
    .venv/bin/python -m bench.bench_cluster --skip-throughput --skip-failover --rolling-restarts 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.bench_broker import CLK_TCK, finish, spawn_role
from testkit.procs import wait_until

RF = 3
ZK_TICK_MS = 200  # sessions expire on tick boundaries: 200 ms granularity, minimum 400 ms
PARTITIONS = 6  # bench_broker's producer role writes partitions 0-5


def settings(session_ms: int) -> dict:
    return {
        "zookeeper.session.timeout.ms": session_ms,
        "default.replication.factor": RF,
        "min.insync.replicas": 2,
        "offsets.topic.replication.factor": RF,
        "offsets.topic.num.partitions": 3,
        "replica.lag.time.max.ms": 10000,
        "auto.leader.rebalance.enable": "false",
        "log.cleaner.enable": "false",
    }


class Cluster:
    """ZooKeeper (one server, or an ensemble of `zookeepers`), a BrokerCluster on it and
    a ZooKeeper reader for partition states."""

    def __init__(self, session_ms: int, zookeepers: int = 1):
        from kazoo.client import KazooClient

        from broker.cluster.launcher import ensemble_connect
        from testkit.procs import BrokerCluster, zookeeper_ensemble_processes, zookeeper_process

        self.dir = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
        if zookeepers == 1:
            self.zookeepers = [zookeeper_process(self.dir / "zookeeper", tick_ms=ZK_TICK_MS)]
        else:
            self.zookeepers = zookeeper_ensemble_processes(self.dir, zookeepers, ZK_TICK_MS)
        connect = ensemble_connect(self.zookeepers)
        self.local = BrokerCluster(self.dir, connect, RF, settings(session_ms))
        self.local.start().wait_joined()
        self.zk = KazooClient(hosts=connect)
        self.zk.start(timeout=30)
        wait_until(lambda: self._live() == RF, 60, "every broker to register")

    @property
    def bootstrap(self) -> str:
        return self.local.bootstrap

    def _live(self) -> int:
        return len(self.zk.get_children("/brokers/ids")) if self.zk.exists("/brokers/ids") else 0

    def state(self, topic: str, p: int = 0) -> dict | None:
        import orjson

        path = f"/brokers/topics/{topic}/partitions/{p}/state"
        return orjson.loads(self.zk.get(path)[0]) if self.zk.exists(path) else None

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, RF)])[name].result(20)
        for p in range(partitions):
            wait_until(
                lambda p=p: (s := self.state(name, p)) and s["leader"] >= 0 and len(s["isr"]) == RF,
                60,
                f"{name}-{p} to have a leader and a full ISR",
            )

    def cpu_seconds(self) -> float:
        total = 0.0
        for proc in (b.proc for b in self.local.brokers.values()):
            try:
                stat = Path(f"/proc/{proc.pid}/stat").read_text()
            except FileNotFoundError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        return total

    def stop(self, keep: bool = False) -> None:
        self.zk.stop()
        self.zk.close()
        self.local.stop()
        for zookeeper in self.zookeepers:
            zookeeper.stop()
        if keep:
            print(f"cluster data and logs kept in {self.dir}", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


# -- throughput ---------------------------------------------------------------------------


def throughput(cluster: Cluster, acks: str, seconds: float, producers: int) -> dict:
    topic = f"tput-acks{acks.replace('-', 'm')}"
    cluster.create_topic(topic, PARTITIONS)
    cpu0 = cluster.cpu_seconds()
    procs = [
        spawn_role(
            "producer",
            bootstrap=cluster.bootstrap,
            topic=topic,
            seconds=seconds,
            acks=acks,
            linger_ms=50,
            chunk=10_000,
            batch_messages=100_000,
            idempotence="false",
            max_in_flight=5,
        )
        for _ in range(producers)
    ]
    parts = [finish(p) for p in procs]
    records = sum(p["records"] for p in parts)
    elapsed = max(p["seconds"] for p in parts)
    cpu = cluster.cpu_seconds() - cpu0
    return {
        "rate": records / elapsed,
        "records": records,
        "seconds": elapsed,
        "brokers_cpu_util": cpu / elapsed,
        "producers_cpu_util": sum(p["client_cpu_util"] for p in parts),
    }


# -- failover and soak --------------------------------------------------------------------


class LoadProducer:
    """An idempotent acks=all producer thread writing 0, 1, 2, ... at `rate`/s; notes
    which records were acknowledged and when the first one produced after a mark was."""

    def __init__(self, bootstrap: str, topic: str, rate: int):
        from confluent_kafka import Producer

        self.topic = topic
        self.rate = rate
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "compression.type": "lz4",
                "message.timeout.ms": 300000,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 100,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.next_seq = 0
        self.acked = 0
        self.acked_seqs: list[int] = []
        self.ack_times: list[float] = []  # time.monotonic() of each acknowledgement
        self.latencies: list[float] = []  # produce() to acknowledgement, s, in ack order
        self.errors: list[str] = []
        self._mark_seq: int | None = None
        self._mark_time = 0.0
        self.first_ack_after_mark: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LoadProducer:
        self._thread.start()
        return self

    def mark(self) -> None:
        """From now: time to the first ack of a record produced after this call."""
        self.first_ack_after_mark = None
        self._mark_time = time.monotonic()
        self._mark_seq = self.next_seq

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        seq = int(msg.value())
        self.acked_seqs.append(seq)
        self.ack_times.append(time.monotonic())
        self.latencies.append(msg.latency())
        self.acked += 1
        if (
            self._mark_seq is not None
            and seq >= self._mark_seq
            and self.first_ack_after_mark is None
        ):
            self.first_ack_after_mark = time.monotonic() - self._mark_time

    def _run(self) -> None:
        per_tick = max(1, self.rate // 1000)
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.next_seq < due:
                for _ in range(per_tick):
                    self.producer.produce(
                        self.topic, str(self.next_seq).encode(), callback=self._on_delivery
                    )
                    self.next_seq += 1
            self.producer.poll(0.001)
        self.producer.flush(300)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(400)


def read_back(
    bootstrap: str, topic: str, expected: int, timeout_s: float = 300, partitions: int = 1
) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partitions 0..`partitions`-1, once `expected`
    were read and nothing more came for 5 s."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-read-back",
            "enable.auto.commit": False,
            "queued.min.messages": 200000,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    idle = 0
    while time.monotonic() < deadline and idle < 10:
        msgs = c.consume(10000, 0.5)
        if not msgs:
            idle += 1 if len(out) >= expected else 0
            continue
        idle = 0
        out.extend((m.offset(), m.value()) for m in msgs if m.error() is None)
    c.close()
    return out


def failover(cluster: Cluster, kills: int, load_rate: int, label: str) -> dict:
    topic = f"failover-{label}"
    cluster.create_topic(topic, 1)
    load = LoadProducer(cluster.bootstrap, topic, load_rate).start()
    times: list[float] = []
    try:
        wait_until(lambda: load.acked > load_rate // 2, 60, "first acks")
        for k in range(kills):
            leader = cluster.state(topic)["leader"]
            print(f"  kill {k + 1}: broker {leader} at {time.time():.3f}", flush=True)
            cluster.local.brokers[leader].kill()
            load.mark()
            wait_until(lambda: load.first_ack_after_mark is not None, 120, "an ack after the kill")
            times.append(load.first_ack_after_mark)
            cluster.local.brokers[leader].start()
            wait_until(
                lambda: len(cluster.state(topic)["isr"]) == RF, 120, "the ISR to be full again"
            )
            print(
                f"  kill {k + 1}/{kills}: broker {leader}, first ack after "
                f"{times[-1]:.2f} s, {load.acked:,} acked",
                flush=True,
            )
    finally:
        load.stop()
    acked = set(load.acked_seqs)
    values = [int(v) for _, v in read_back(cluster.bootstrap, topic, len(acked))]
    return {
        "kills": kills,
        "median_s": statistics.median(times),
        "max_s": max(times),
        "min_s": min(times),
        "times": [round(t, 3) for t in times],
        "acked": len(acked),
        "produced": load.next_seq,
        "delivery_errors": len(load.errors),
        "read": len(values),
        "lost_acked": len(acked - set(values)),
        "duplicates": len(values) - len(set(values)),
        "in_order": values == sorted(values),
    }


# -- losing a member of the ZooKeeper ensemble -------------------------------------------


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time within [start, end] without an acknowledgement."""
    inside = [t for t in times if start <= t <= end]
    edges = [start, *inside, end]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False))


def zookeeper_loss(kills: int, load_rate: int, session_ms: int) -> dict:
    """Three brokers on a 3-member ZooKeeper ensemble under idempotent acks=all load.
    `kills` times: SIGKILL the ensemble's leader, keep the load on for two session
    timeouts (a broker that could not move its session would have fenced by then),
    restart the member. Per kill, the longest gap between acknowledgements in that
    window and in as long a window of steady state just before; every acknowledged
    record is read back."""
    cluster = Cluster(session_ms, zookeepers=3)
    topic = "zookeeper-loss"
    window = 2 * session_ms / 1000
    steady: list[float] = []
    during: list[float] = []
    try:
        cluster.create_topic(topic, 1)
        epoch = cluster.state(topic)["leader_epoch"]
        load = LoadProducer(cluster.bootstrap, topic, load_rate).start()
        try:
            wait_until(lambda: load.acked > load_rate // 2, 60, "first acks")
            for k in range(kills):
                time.sleep(window)
                leader = next(zk for zk in cluster.zookeepers if zk.mode() == "leader")
                killed_at = time.monotonic()
                assert leader.proc is not None
                leader.proc.kill()
                leader.proc.wait()
                time.sleep(window)
                steady.append(longest_gap(load.ack_times, killed_at - window, killed_at))
                during.append(longest_gap(load.ack_times, killed_at, killed_at + window))
                print(
                    f"  kill {k + 1}/{kills}: ZooKeeper {leader.server_id} (the leader); longest"
                    f" gap between acks {during[-1] * 1000:.0f} ms, steady state before"
                    f" {steady[-1] * 1000:.0f} ms; load {load_average()}",
                    flush=True,
                )
                leader.start()
        finally:
            load.stop()
        epoch_after = cluster.state(topic)["leader_epoch"]
        acked = set(load.acked_seqs)
        values = [int(v) for _, v in read_back(cluster.bootstrap, topic, len(acked))]
    finally:
        cluster.stop(False)
    return {
        "kills": kills,
        "gap_during_median_s": statistics.median(during),
        "gap_during_max_s": max(during),
        "gap_steady_median_s": statistics.median(steady),
        "gap_steady_max_s": max(steady),
        "leader_elections": epoch_after - epoch,
        "delivery_errors": len(load.errors),
        "acked": len(acked),
        "lost_acked": len(acked - set(values)),
        "duplicates": len(values) - len(set(values)),
    }


# -- rolling restart ----------------------------------------------------------------------


class UpCluster:
    """`logflume cluster up` (3 brokers, `settings`) in a subprocess, for the rolling
    restarts: what `throughput()` needs of a cluster, and the restart command."""

    def __init__(self, session_ms: int):
        from broker.cluster.launcher import bootstrap_file

        self.dir = Path(tempfile.mkdtemp(prefix="bench-rolling-"))
        cmd = [sys.executable, "-m", "logflume", "--log-level", "WARNING", "cluster", "up"]
        cmd += ["--brokers", str(RF), "--data-dir", str(self.dir / "cluster"), "--base-port", "0"]
        for key, value in settings(session_ms).items():
            cmd += ["--set", f"{key}={value}"]
        self.out = open(self.dir / "up.out", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        boot = bootstrap_file(self.dir / "cluster")
        wait_until(lambda: boot.exists() or self.proc.poll() is not None, 120, "cluster up")
        if self.proc.poll() is not None:
            raise RuntimeError(f"cluster up exited: {(self.dir / 'up.out').read_text()}")
        self.bootstrap = boot.read_text().strip()

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, RF)])[name].result(20)

        def ready() -> bool:
            parts = admin.list_topics(name, timeout=10).topics[name].partitions
            return len(parts) == partitions and all(
                p.leader >= 0 and len(p.isrs) == RF for p in parts.values()
            )

        wait_until(ready, 60, f"{name} to have leaders and full ISRs")

    def cpu_seconds(self) -> float:
        from broker.cluster.launcher import pid_file, read_pid

        total = 0.0
        for b in range(RF):
            pid = read_pid(pid_file(self.dir / "cluster", f"broker-{b}"))
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except (FileNotFoundError, TypeError):
                continue
            fields = stat.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        return total

    def roll(self) -> None:
        cmd = [sys.executable, "-m", "logflume", "cluster", "restart", "--rolling"]
        cmd += ["--data-dir", str(self.dir / "cluster"), "--timeout", "120"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            if "restarted (" in line or "done" in line:
                print("   " + line, flush=True)
        if done.returncode != 0:
            raise RuntimeError(f"rolling restart failed: {done.stdout}{done.stderr}")

    def stop(self, keep: bool = False) -> None:
        self.proc.terminate()
        self.proc.wait(120)
        self.out.close()
        if keep:
            print(f"cluster data and logs kept in {self.dir}", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


STEADY_S = 5.0  # the shortest window of steady state before a roll
LOAD_SHARE = 0.5  # of the measured acks=all capacity, offered during the rolls
LOAD_QUEUE = 100_000  # records a load process lets wait in its producer at most


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def paced_producer(
    bootstrap: str, topic: str, rate: float | None, worker: int, out: str, stop, acked
) -> None:
    """One load process (multiprocessing target): an idempotent acks=all producer with
    the agent's kafka sink settings (lz4, `linger.ms` 5) writing 100-byte log lines
    at `rate`/s (None: as fast as the cluster acknowledges them, with at most
    LOAD_QUEUE records waiting), each starting with "<worker>-<seq> ", until `stop`
    is set; `acked` (a shared counter) follows its acknowledgements. Then it
    writes to `out`.json the records produced and the delivery errors, and beside it
    the acknowledged sequence numbers (`.seq`, int64), the time.monotonic() of each
    acknowledgement (`.t`) and its produce latency in seconds (`.lat`, doubles):
    CLOCK_MONOTONIC is one clock for every process of the machine."""
    from array import array

    from confluent_kafka import Producer

    from bench.bench_broker import record_pool

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "lz4",
            "message.timeout.ms": 300000,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 100,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "queue.buffering.max.messages": LOAD_QUEUE,
        }
    )
    pool = record_pool()
    seqs, times, latencies = array("q"), array("d"), array("d")
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
            return
        seqs.append(int(msg.value().split(b" ", 1)[0].split(b"-")[1]))
        times.append(time.monotonic())
        latencies.append(msg.latency())
        acked.value += 1

    produced = 0
    begin = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - begin) * rate) if rate else produced + LOAD_QUEUE
        while produced < due:
            head = b"%d-%d " % (worker, produced)
            line = head + pool[produced % len(pool)][len(head) :]
            try:
                producer.produce(topic, line, on_delivery=on_delivery)
            except BufferError:  # the local queue is full: the cluster is behind
                break
            produced += 1
        producer.poll(0.001)
    left = producer.flush(300)
    for suffix, values in ((".seq", seqs), (".t", times), (".lat", latencies)):
        with open(out + suffix, "wb") as f:
            values.tofile(f)
    with open(out + ".json", "w") as f:
        json.dump({"produced": produced, "unflushed": left, "errors": errors[:20],
                   "error_count": len(errors)}, f)  # fmt: skip


class PacedLoad:
    """`processes` paced_producer processes sharing `rate` records/s between them (None:
    each as fast as it can); their files are `out_dir`/`name`-<i>.*."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        rate: float | None,
        processes: int,
        out_dir: Path,
        name: str,
    ):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self.out = [str(out_dir / f"{name}-{i}") for i in range(processes)]
        self.stop_event = ctx.Event()
        self.acked_counters = [ctx.RawValue("q", 0) for _ in range(processes)]
        self.procs = [
            ctx.Process(
                target=paced_producer,
                args=(
                    bootstrap,
                    topic,
                    rate / processes if rate else None,
                    i,
                    self.out[i],
                    self.stop_event,
                    acked,
                ),
                daemon=True,
            )
            for i, acked in enumerate(self.acked_counters)
        ]
        for proc in self.procs:
            proc.start()

    @property
    def acked(self) -> int:
        return sum(c.value for c in self.acked_counters)

    def finish(self) -> dict:
        """Stop the producers; what they wrote: `acked` ((worker, seq) pairs), `times`
        and `latencies` (ordered by acknowledgement time), `produced`, `errors`."""
        from array import array

        self.stop_event.set()
        for proc in self.procs:
            proc.join(400)
            if proc.exitcode != 0:
                raise RuntimeError(f"a load process exited with {proc.exitcode}")
        acked: list[tuple[int, int]] = []
        pairs: list[tuple[float, float]] = []
        produced = errors = unflushed = 0
        samples: list[str] = []
        for worker, out in enumerate(self.out):
            arrays = []
            for suffix, code in ((".seq", "q"), (".t", "d"), (".lat", "d")):
                values = array(code)
                values.frombytes(Path(out + suffix).read_bytes())
                arrays.append(values)
            seqs, times, latencies = arrays
            acked.extend((worker, seq) for seq in seqs)
            pairs.extend(zip(times, latencies, strict=True))
            summary = json.loads(Path(out + ".json").read_text())
            produced += summary["produced"]
            unflushed += summary["unflushed"]
            errors += summary["error_count"]
            samples += summary["errors"]
        pairs.sort()
        return {
            "acked": acked,
            "times": [t for t, _ in pairs],
            "latencies": [lat for _, lat in pairs],
            "produced": produced,
            "unflushed": unflushed,
            "errors": errors,
            "error_samples": samples[:5],
        }


def window(times: list[float], latencies: list[float], begin: float, end: float) -> list[float]:
    """The latencies of the acknowledgements in [begin, end) (`times` sorted)."""
    import bisect

    return latencies[bisect.bisect_left(times, begin) : bisect.bisect_left(times, end)]


def capacity(cluster: UpCluster, seconds: float, producers: int) -> float:
    """The acks=all records/s the cluster acknowledges to `producers` load processes
    writing as fast as they can for `seconds` to a topic like the rolls' (3 partitions,
    RF 3), over the last three quarters of the run (the first fills the pipelines)."""
    topic = "rolling-capacity"
    cluster.create_topic(topic, RF)
    probe = PacedLoad(cluster.bootstrap, topic, None, producers, cluster.dir, "capacity")
    try:
        wait_until(lambda: probe.acked > 0, 120, "first acks")
        began = time.monotonic()
        time.sleep(seconds)
        ended = time.monotonic()
    finally:
        run = probe.finish()
    counted_from = began + (ended - began) / 4
    acks = window(run["times"], run["times"], counted_from, ended)  # their times: a count
    return len(acks) / (ended - counted_from)


def rolling_restarts(
    restarts: int, session_ms: int, seconds: float, producers: int, keep: bool
) -> dict:
    """`restarts` rolling restarts of a `cluster up` cluster under acks=all load at
    LOAD_SHARE of its acks=all capacity (`capacity()`), offered by `producers` paced
    processes; produce latency during each roll against the steady state just before."""
    cluster = UpCluster(session_ms)
    topic = "rolling"
    windows: list[tuple[float, float, float]] = []  # (steady from, roll began, roll ended)
    try:
        full = capacity(cluster, seconds, producers)
        rate = int(full * LOAD_SHARE)
        print(
            f"  acks=all capacity {full:,.0f} records/s ({producers} idempotent producer"
            f" processes, {seconds:g} s); load {rate:,} records/s",
            flush=True,
        )
        cluster.create_topic(topic, RF)
        load = PacedLoad(cluster.bootstrap, topic, rate, producers, cluster.dir, "load")
        try:
            wait_until(lambda: load.acked > rate // 2, 120, "first acks")
            quiet_s = STEADY_S
            for k in range(restarts):
                time.sleep(quiet_s)  # steady state, as long as the last roll took
                began = time.monotonic()
                cluster.roll()
                ended = time.monotonic()
                windows.append((began - quiet_s, began, ended))
                quiet_s = max(STEADY_S, ended - began)
                print(f"  roll {k + 1}/{restarts}: {ended - began:.1f} s", flush=True)
        finally:
            run = load.finish()
        steady: list[float] = []
        during: list[float] = []
        steady_rate: list[float] = []
        for k, (calm, began, ended) in enumerate(windows):
            before = window(run["times"], run["latencies"], calm, began)
            inside = window(run["times"], run["latencies"], began, ended)
            steady.append(percentile(before, 0.99))
            during.append(percentile(inside, 0.99))
            steady_rate.append(len(before) / (began - calm))
            print(
                f"  roll {k + 1}: produce p99 {during[-1] * 1000:.0f} ms during (p50"
                f" {percentile(inside, 0.5) * 1000:.0f} ms), {steady[-1] * 1000:.0f} ms steady"
                f" before (p50 {percentile(before, 0.5) * 1000:.0f} ms, {steady_rate[-1]:,.0f}"
                " records/s acknowledged)"
                + (" NOT THE LOAD OFFERED" if steady_rate[-1] < 0.9 * rate else ""),
                flush=True,
            )
        acked = set(run["acked"])
        read = [
            (int(w), int(s))
            for _, v in read_back(cluster.bootstrap, topic, len(acked), partitions=RF)
            for w, s in [v.split(b" ", 1)[0].split(b"-")]
        ]
    finally:
        cluster.stop(keep)
    return {
        "restarts": restarts,
        "acks_all_capacity": round(full),
        "load_rate": rate,
        "load_processes": producers,
        "steady_acked_rate": [round(r) for r in steady_rate],
        "roll_s": [round(ended - began, 1) for _, began, ended in windows],
        "p99_during_s": [round(x, 4) for x in during],
        "p99_steady_s": [round(x, 4) for x in steady],
        "delivery_errors": run["errors"],
        "delivery_error_samples": run["error_samples"],
        "unflushed": run["unflushed"],
        "acked": len(acked),
        "produced": run["produced"],
        "lost_acked": len(acked - set(read)),
        "duplicates": len(read) - len(set(read)),
    }


# -- failover under a network partition ---------------------------------------------------

PARTITION_TOPIC = "netsplit"


def partition_failover(cuts: int, max_cut_s: float = 30.0) -> dict:
    """`cuts` times: cut the partition's leader off from ZooKeeper and both followers
    (clients still reach it), time from the cut to each client's first acknowledgement
    from the new leader, heal, wait for a full ISR. The cluster runs in network
    namespaces (testkit.netns, needs root) with `logflume cluster up`'s defaults; the
    producers are testkit.producers' three clients (librdkafka, kafka-python, kafkajs).
    A client that did not resume within `max_cut_s` counts as `max_cut_s`."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.client import KazooClient

    from broker.cluster.launcher import LOCAL_CLUSTER_DEFAULTS
    from testkit.netns import NetLab, NetnsCluster
    from testkit.producers import CLIENTS, Producers

    lab = NetLab()
    root = Path(tempfile.mkdtemp(prefix="bench-netsplit-"))
    times: dict[str, list[float]] = {name: [] for name in CLIENTS}
    elect: list[float] = []
    try:
        defaults = {
            **LOCAL_CLUSTER_DEFAULTS,
            "default.replication.factor": RF,
            "offsets.topic.replication.factor": RF,
            "min.insync.replicas": 2,
        }
        cluster = NetnsCluster(lab, root, settings=defaults)
        with lab.inside("client"):
            cluster.start()
            zk = KazooClient(hosts=cluster.zk_connect)
            zk.start(timeout=30)
            path = f"/brokers/topics/{PARTITION_TOPIC}/partitions/0/state"

            def state() -> dict:
                import orjson

                return orjson.loads(zk.get(path)[0]) if zk.exists(path) else {}

            def healthy() -> bool:
                s = state()
                return len(zk.get_children("/brokers/ids")) == RF and len(s.get("isr", [])) == RF

            wait_until(lambda: len(zk.get_children("/brokers/ids")) == RF, 60, "every broker")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            fut = admin.create_topics([NewTopic(PARTITION_TOPIC, 1, RF)])
            fut[PARTITION_TOPIC].result(20)
            wait_until(healthy, 60, "a leader and a full ISR")
            producers = Producers(cluster.bootstrap, PARTITION_TOPIC, lab, root).start()
            try:
                for k in range(cuts):
                    wait_until(healthy, 120, "a full ISR")
                    n = producers.acked()
                    wait_until(lambda n=n: producers.acked() > n + 300, 60, "acks before the cut")
                    s = state()
                    old, epoch = s["leader"], s["leader_epoch"]
                    others = [f"b{b}" for b in range(RF) if b != old]
                    t_cut = time.time()
                    lab.isolate(f"b{old}", ["zk", *others])
                    wait_until(
                        lambda old=old, epoch=epoch: (
                            (x := state())["leader"] not in (-1, old) and x["leader_epoch"] > epoch
                        ),
                        max_cut_s,
                        "a new leader",
                    )
                    t_elect = time.time()
                    elect.append(t_elect - t_cut)
                    deadline = t_cut + max_cut_s
                    while time.time() < deadline and any(
                        producers.first_ack(c, after=t_elect) is None for c in CLIENTS
                    ):
                        time.sleep(0.05)
                    for c in CLIENTS:
                        first = producers.first_ack(c, after=t_elect)
                        times[c].append(max_cut_s if first is None else first - t_cut)
                    lab.heal_all()
                    print(
                        f"  cut {k + 1}/{cuts}: leader {old}, new leader after "
                        f"{elect[-1]:.2f} s, clients resumed after "
                        + ", ".join(f"{c} {times[c][-1]:.2f} s" for c in CLIENTS),
                        flush=True,
                    )
            finally:
                lab.heal_all()
                producers.stop(flush_s=120)
            acked = {(a.producer, a.seq): a.offset for a in producers.acks}
            values = read_back(cluster.bootstrap, PARTITION_TOPIC, len(acked))
            zk.stop()
            zk.close()
            cluster.stop(timeout=20)
    finally:
        lab.close()
        shutil.rmtree(root, ignore_errors=True)
    stored = {v: o for o, v in values}
    return {
        "cuts": cuts,
        "session_ms": LOCAL_CLUSTER_DEFAULTS["zookeeper.session.timeout.ms"],
        "elect_median_s": statistics.median(elect),
        "median_s": {c: statistics.median(t) for c, t in times.items()},
        "max_s": {c: max(t) for c, t in times.items()},
        "times": {c: [round(x, 2) for x in t] for c, t in times.items()},
        "acked": len(acked),
        "lost_acked": sum(
            1 for (c, seq), off in acked.items() if stored.get(f"{c}-{seq}".encode()) != off
        ),
        "duplicates": len(values) - len(stored),
    }


# -- main ---------------------------------------------------------------------------------


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def figures(mode: str) -> list[dict]:
    seconds, kills, session_ms, producers = {
        "quick": (5, 3, 2000, 2),
        "default": (20, 20, 2000, 2),
        "full": (30, 20, 2000, 2),
    }[mode]
    out = []
    cluster = Cluster(session_ms)
    try:
        for acks, target, reference in (
            (
                "all",
                ">= 400000",
                "Kafka 2014 reference run: 421,823 records/s on three 6-core machines",
            ),
            ("1", ">= 700000", "issue 7"),
        ):
            print(f"produce acks={acks}, {seconds} s", flush=True)
            r = throughput(cluster, acks, seconds, producers)
            out.append(
                {
                    "area": "cluster",
                    "metric": f"produce acks={acks}, 3 brokers, RF 3, min.insync.replicas 2,"
                    f" {producers} producer processes, {seconds} s",
                    "value": r["rate"],
                    "unit": "records/s",
                    "target": target,
                    "reference": reference,
                    "detail": f"brokers {r['brokers_cpu_util']:.0%} of a core, producers"
                    f" {r['producers_cpu_util']:.0%}",
                }
            )
        print(f"failover: {kills} leader kills", flush=True)
        r = failover(cluster, kills, 10_000, "failover")
    finally:
        cluster.stop(False)
    out += [
        {
            "area": "cluster",
            "metric": f"failover: SIGKILL of the leader to the first acks=all produce, median of {kills}",
            "value": r["median_s"],
            "unit": "s",
            "target": "<= 3",
            "reference": "issue 7" + ("" if kills >= 20 else " (20 kills; this run fewer)"),
            "detail": f"zookeeper.session.timeout.ms {session_ms} (tickTime 200 ms); min"
            f" {r['min_s']:.2f} s, max {r['max_s']:.2f} s; 10,000 records/s idempotent load",
        },
        {
            "area": "cluster",
            "metric": f"acknowledged records lost over the {kills} kills",
            "value": r["lost_acked"],
            "unit": "records",
            "target": "== 0",
            "reference": "issue 7 (the 100-kill soak: `python -m bench.bench_cluster --soak`)",
            "detail": f"{r['acked']:,} acked of {r['produced']:,} produced,"
            f" {r['duplicates']} duplicates, in order: {r['in_order']}",
        },
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20, help="per throughput run")
    ap.add_argument("--producers", type=int, default=2, help="producer processes")
    ap.add_argument("--kills", type=int, default=20, help="leader kills for the failover run")
    ap.add_argument("--session-ms", type=int, default=2000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--load-rate", type=int, default=10000, help="records/s during failovers")
    ap.add_argument("--soak", action="store_true", help="also run the soak (--soak-kills)")
    ap.add_argument("--soak-kills", type=int, default=100)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the cluster's data and logs")
    ap.add_argument(
        "--zookeeper-kills",
        type=int,
        default=0,
        help="also run a cluster on a 3-member ZooKeeper ensemble and kill its leader this"
        " many times under load",
    )
    ap.add_argument(
        "--partition-cuts",
        type=int,
        default=0,
        help="also cut the leader off by the network this many times (needs root)",
    )
    ap.add_argument(
        "--rolling-restarts",
        type=int,
        default=0,
        metavar="N",
        help="also roll a `logflume cluster up` cluster N times under acks=all load",
    )
    args = ap.parse_args()

    print(f"load average at start: {load_average()}", flush=True)
    results: dict = {"session_ms": args.session_ms, "load_start": load_average()}
    if not (args.skip_throughput and args.skip_failover and not args.soak):
        cluster = Cluster(args.session_ms)
        try:
            if not args.skip_throughput:
                for acks, name in (("all", "acks=all"), ("1", "acks=1")):
                    r = throughput(cluster, acks, args.seconds, args.producers)
                    results[name] = r
                    print(
                        f"produce {name}, RF 3, min.insync.replicas 2, {args.producers} producers, "
                        f"{args.seconds:g} s: {r['rate']:,.0f} records/s "
                        f"(brokers {r['brokers_cpu_util']:.0%} of a core, producers "
                        f"{r['producers_cpu_util']:.0%}; load {load_average()})",
                        flush=True,
                    )
            runs = [] if args.skip_failover else [("failover", args.kills)]
            if args.soak:
                runs.append(("soak", args.soak_kills))
            for label, kills in runs:
                print(
                    f"{label}: {kills} leader kills, load {args.load_rate:,} records/s acks=all, "
                    f"session timeout {args.session_ms} ms",
                    flush=True,
                )
                r = failover(cluster, kills, args.load_rate, label)
                results[label] = r
                print(
                    f"{label}: failover median {r['median_s']:.2f} s (min {r['min_s']:.2f}, max "
                    f"{r['max_s']:.2f}) over {kills} kills; {r['acked']:,} acked of "
                    f"{r['produced']:,} produced, {r['lost_acked']} acked records lost, "
                    f"{r['duplicates']} duplicates, in order: {r['in_order']}, delivery errors "
                    f"{r['delivery_errors']}; load {load_average()}",
                    flush=True,
                )
        finally:
            cluster.stop(args.keep)
    if args.partition_cuts:
        print(
            f"partitioned leader: {args.partition_cuts} cuts, `logflume cluster up` defaults",
            flush=True,
        )
        r = results["partition"] = partition_failover(args.partition_cuts)
        print(
            f"partitioned leader: new leader after {r['elect_median_s']:.2f} s (median); "
            "clients resumed after (median, max) "
            + ", ".join(
                f"{c} {r['median_s'][c]:.2f} s, {r['max_s'][c]:.2f} s" for c in r["median_s"]
            )
            + f"; {r['acked']:,} acked, {r['lost_acked']} lost, {r['duplicates']} duplicates; "
            f"load {load_average()}",
            flush=True,
        )
    if args.zookeeper_kills:
        print(
            f"ZooKeeper ensemble of 3: {args.zookeeper_kills} kills of its leader, load"
            f" {args.load_rate:,} records/s acks=all, session timeout {args.session_ms} ms",
            flush=True,
        )
        r = results["zookeeper_loss"] = zookeeper_loss(
            args.zookeeper_kills, args.load_rate, args.session_ms
        )
        print(
            f"ZooKeeper leader lost: longest gap between acks median"
            f" {r['gap_during_median_s'] * 1000:.0f} ms, max {r['gap_during_max_s'] * 1000:.0f} ms"
            f" (steady state median {r['gap_steady_median_s'] * 1000:.0f} ms, max"
            f" {r['gap_steady_max_s'] * 1000:.0f} ms); partition leader elections"
            f" {r['leader_elections']}, delivery errors {r['delivery_errors']}; {r['acked']:,}"
            f" acked, {r['lost_acked']} lost, {r['duplicates']} duplicates; load {load_average()}",
            flush=True,
        )
    if args.rolling_restarts:
        print(
            f"rolling restart: {args.rolling_restarts} rolls of 3 brokers, `logflume cluster up`",
            flush=True,
        )
        r = results["rolling_restart"] = rolling_restarts(
            args.rolling_restarts, args.session_ms, args.seconds, args.producers, args.keep
        )
        print(
            f"rolling restart: {r['load_rate']:,} records/s offered"
            f" ({LOAD_SHARE:.0%} of {r['acks_all_capacity']:,} acks=all capacity), roll"
            f" {statistics.median(r['roll_s']):.1f} s (median); produce p99"
            f" {max(r['p99_during_s']) * 1000:.0f} ms during (max over rolls), "
            f"{max(r['p99_steady_s']) * 1000:.0f} ms steady; delivery errors "
            f"{r['delivery_errors']}; {r['acked']:,} acked, {r['lost_acked']} lost, "
            f"{r['duplicates']} duplicates; load {load_average()}",
            flush=True,
        )
    results["load_end"] = load_average()
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
