"""Broker core benchmark: produce, consume, end-to-end latency, and Redis Streams.

    .venv/bin/python -m bench.bench_broker [--seconds 10] [--event-loop asyncio|uvloop|both]

Everything runs on this machine over loopback, each party in its own process:
the broker (`logflume broker`), confluent-kafka producers, a raw load generator,
a confluent-kafka consumer, redis-server and redis-benchmark. Records are 100-byte
log-like lines (a pool of 4096 distinct ones), lz4-compressed in large batches.

1. produce, acks=1, one topic with 6 partitions, for --seconds (30 for the full run),
   --rounds times (a fresh topic each round), with two load generators in turn:
   a. --producers processes (default 2) of confluent-kafka (librdkafka), each calling
      `produce_batch` with --chunk records for one partition at a time, the partitions
      in turn (linger.ms --linger-ms, batch.size 1 MB, lz4). On a machine the broker
      and the producers share, their CPU per record bounds the rate: the figures'
      detail gives that ceiling.
   b. prebuilt batches over raw connections, a load generator of the redis-benchmark
      kind (`bench/scale_clients.py`, role load): --raw-connections connections, each
      pipelining --raw-in-flight Produce v8 requests (acks=1, producer id -1) of one
      lz4 batch per partition, --raw-records-per-batch records each (librdkafka's
      batches of these records under batch.size 1 MB hold 9,082), 8 distinct batches
      (different slices of the pool, CreateTime) built once and resent. Every
      partition error fails the run; afterwards the partitions' end offsets must sum
      to the records acknowledged, and confluent-kafka must read the last records of
      every partition back; the topic is then deleted (its data is large).
   Records/s counted over the whole run (librdkafka's including the final flush), plus
   the CPU seconds per million records of the broker (utime+stime from
   /proc/<pid>/stat) and of the load generator's processes, and the broker's CPU per
   MB it stored (the lz4 batches as they arrived).
2. consume everything from the beginning (assign, no group): records/s.
3. end-to-end latency at 10,000 records/s with acks=all: producer stamps each
   record with its send time, a consumer (long-polling) computes receive - send.
4. after each produce run, the same workload as Redis Streams XADD (redis-benchmark,
   100-byte field, pipelined 64 deep, 4 connections; as many records as the run
   produced, at most REDIS_MAX_RECORDS) against a private redis-server with AOF; the
   logflume / Redis ratio of each load generator is the median of its rounds' ratios.
   redis-benchmark costs Redis almost nothing, as the raw generator costs the broker
   almost nothing: that row is the like-for-like comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.cluster.launcher import broker_command
from common.ports import free_port, wait_for_port

RECORD_SIZE = 100
PARTITIONS = 6
CLK_TCK = os.sysconf("SC_CLK_TCK")
REDIS_MAX_RECORDS = 10_000_000  # an XADD run long enough for a steady rate
RAW_CONNECTIONS = 2  # as many as the librdkafka row's producers (one connection each)
RAW_IN_FLIGHT = 8  # requests pipelined per raw connection
RAW_RECORDS_PER_BATCH = 9082  # what librdkafka puts in a 1 MB batch.size of these records
RAW_DISTINCT_BATCHES = 8  # as the producer role's 8 slices of the pool


def record_pool(n: int = 4096) -> list[bytes]:
    """Log-like 100-byte lines: repetitive structure, varying fields (lz4 gets ~2-3x)."""
    rng = random.Random(7)
    paths = ["/api/v1/items", "/index.html", "/static/app.js", "/login", "/api/v2/search?q="]
    out = []
    for i in range(n):
        line = (
            f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)} - - "
            f'[22/Nov/2026:10:{i % 60:02d}:{rng.randrange(60):02d}] "GET {rng.choice(paths)}'
            f'{rng.randrange(10**6)} HTTP/1.1" {rng.choice([200, 200, 304, 404])} {rng.randrange(99999)}'
        )
        out.append(line.encode()[:RECORD_SIZE].ljust(RECORD_SIZE, b" "))
    return out


# -- roles (each runs in its own process) -------------------------------------------------


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def role_producer(args) -> dict:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": args.acks,
            "compression.type": "lz4",
            "linger.ms": args.linger_ms,
            "batch.size": 1_000_000,
            "batch.num.messages": args.batch_messages,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": args.idempotence == "true",
            "max.in.flight.requests.per.connection": args.max_in_flight,
        }
    )
    pool = record_pool()
    chunk = args.chunk
    batches = [
        [{"value": pool[(i + j) % len(pool)]} for j in range(chunk)] for i in range(0, 4096, 512)
    ]
    sent = 0
    k = 0
    start = time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        msgs = batches[k % len(batches)]
        accepted = producer.produce_batch(args.topic, msgs, partition=k % PARTITIONS)
        sent += accepted
        k += 1
        if accepted < len(msgs):
            producer.poll(0.005)
        else:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    return {
        "records": sent - left,
        "seconds": elapsed,
        "rate": (sent - left) / elapsed,
        "client_cpu_util": _own_cpu() / elapsed,
    }


def role_consumer(args) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 2_097_152,
            "queued.max.messages.kbytes": 1_048_576,
            # librdkafka >= 2.4 backs a partition off for fetch.queue.backoff.ms (1 s)
            # once the consumer's queue holds queued.min.messages (100k); one fetch of
            # 6 x 1 MB lz4 batches of 100-byte records already exceeds that.
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 10,
            "fetch.wait.max.ms": 100,
        }
    )
    partitions = [int(p) for p in args.partitions.split(",")]
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions])
    count = 0
    start = time.perf_counter()
    while count < args.expect and time.perf_counter() - start < 300:
        msgs = consumer.consume(num_messages=100_000, timeout=1.0)
        count += len(msgs)
    elapsed = time.perf_counter() - start
    cpu = _own_cpu()
    consumer.close()
    return {
        "records": count,
        "seconds": elapsed,
        "rate": count / elapsed,
        "client_cpu_util": cpu / elapsed,
    }


def role_latency_consumer(args) -> dict:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(args.topic, 0, OFFSET_END)])
    consumer.consume(num_messages=1, timeout=1.0)
    print("ready", flush=True)
    lat = []
    deadline = time.time() + args.seconds + 30
    while len(lat) < args.expect and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            now = time.time()
            (sent,) = struct.unpack_from(">d", msg.value())
            lat.append(now - sent)
    consumer.close()
    return {"records": len(lat), "latencies_ms": [x * 1000 for x in lat]}


def role_latency_producer(args) -> dict:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 0,
            "enable.idempotence": False,
        }
    )
    pad = b"p" * (RECORD_SIZE - 8)
    per_tick = max(1, args.rate // 1000)
    total = args.rate * args.seconds
    sent = 0
    start = time.perf_counter()
    while sent < total:
        target = start + sent / args.rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        for _ in range(per_tick):
            producer.produce(args.topic, struct.pack(">d", time.time()) + pad, partition=0)
        sent += per_tick
        producer.poll(0)
    producer.flush(30)
    return {"records": sent}


ROLES = {
    "producer": role_producer,
    "consumer": role_consumer,
    "latency-consumer": role_latency_consumer,
    "latency-producer": role_latency_producer,
}


# -- orchestration ------------------------------------------------------------------------


def spawn_role(role: str, **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "bench.bench_broker", "--role", role]
    for key, value in kw.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 600) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"bench role failed with {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


class Broker:
    def __init__(self, event_loop: str, profile: Path | None = None, settings: dict | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="bench-broker-"))
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        cmd = broker_command(
            self.dir / "data",
            self.bootstrap,
            settings=settings,
            log_flags=["--log-level", "WARNING"],
            extra_args=["--event-loop", event_loop],
        )
        if profile is not None:  # python -m cProfile -o FILE -m logflume ...
            cmd[1:1] = ["-m", "cProfile", "-o", str(profile)]
        self.proc = subprocess.Popen(cmd)
        wait_for_port(self.port, 20, self.proc)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stored_bytes(self, topic: str) -> int:
        """Bytes of the topic's log segments: the batches as the broker appended them."""
        dirs = (d for d in (self.dir / "data").iterdir() if d.name.rpartition("-")[0] == topic)
        return sum(f.stat().st_size for d in dirs for f in d.glob("*.log"))

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)

    def delete_topic(self, name: str) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.delete_topics([name])[name].result(30)

    def partition_ends(self, topic: str) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-unused"})
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS)
        }
        c.close()
        return ends

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def produce_run(broker: Broker, topic: str, seconds: float, producers: int, **opts) -> dict:
    """`producers` producer processes for `seconds` into `topic` (role options in
    `opts`): total records/s, their CPU, and the broker's CPU per million records."""
    cpu0 = broker.cpu_seconds()
    procs = [
        spawn_role("producer", bootstrap=broker.bootstrap, topic=topic, seconds=seconds, **opts)
        for _ in range(producers)
    ]
    parts = [finish(p) for p in procs]
    cpu = broker.cpu_seconds() - cpu0
    return produce_figures(
        broker,
        topic,
        records=sum(p["records"] for p in parts),
        elapsed=max(p["seconds"] for p in parts),
        broker_cpu=cpu,
        client_cpu=sum(p["client_cpu_util"] * p["seconds"] for p in parts),
    )


def raw_produce_run(
    broker: Broker,
    topic: str,
    seconds: float,
    connections: int = RAW_CONNECTIONS,
    in_flight: int = RAW_IN_FLIGHT,
    records_per_batch: int = RAW_RECORDS_PER_BATCH,
) -> dict:
    """The raw load generator (bench/scale_clients.py, role load) for `seconds` into
    `topic`: prebuilt lz4 batches, one per partition a request; the same figures as
    `produce_run`, after checking that the broker stored and serves what it
    acknowledged. A partition error or a mismatch raises RuntimeError."""
    cmd = [sys.executable, "-m", "bench.scale_clients", "--role", "load"]
    opts = {
        "port": broker.port,
        "topic": topic,
        "partitions": PARTITIONS,
        "per_request": PARTITIONS,
        "seconds": seconds,
        "connections": connections,
        "in_flight": in_flight,
        "records_per_batch": records_per_batch,
        "distinct": RAW_DISTINCT_BATCHES,
        "codec": "lz4",
    }
    for key, value in opts.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    cpu0 = broker.cpu_seconds()
    res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    cpu = broker.cpu_seconds() - cpu0
    if res["errors"]:
        raise RuntimeError(f"raw load: partition errors {res['errors']} (error code: count)")
    if not res["records"]:
        raise RuntimeError("raw load: no records acknowledged")
    check_stored(broker, topic, res["records"])
    return produce_figures(
        broker,
        topic,
        records=res["records"],
        elapsed=res["seconds"],
        broker_cpu=cpu,
        client_cpu=res["cpu_s"],
    )


def check_stored(broker: Broker, topic: str, records: int, tail: int = 3) -> None:
    """The topic's end offsets sum to `records` (it was empty before), and
    confluent-kafka reads the last `tail` records of every partition: lines of the
    record pool, at the offsets expected. Raises RuntimeError otherwise."""
    from confluent_kafka import Consumer, TopicPartition

    ends = broker.partition_ends(topic)
    if sum(ends.values()) != records:
        raise RuntimeError(
            f"{topic}: the partitions' end offsets sum to {sum(ends.values()):,},"
            f" the load generator had {records:,} records acknowledged"
        )
    pool = set(record_pool())
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
        }
    )
    try:
        for p, end in ends.items():
            want = list(range(max(0, end - tail), end))
            consumer.assign([TopicPartition(topic, p, want[0] if want else end)])
            got: list = []
            deadline = time.monotonic() + 60
            while len(got) < len(want) and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is not None and msg.error() is None:
                    got.append(msg)
            if [m.offset() for m in got] != want or any(m.value() not in pool for m in got):
                raise RuntimeError(
                    f"{topic}-{p}: read offsets {[m.offset() for m in got]},"
                    f" expected {want} holding lines of the record pool"
                )
    finally:
        consumer.close()


def produce_figures(
    broker: Broker, topic: str, records: int, elapsed: float, broker_cpu: float, client_cpu: float
) -> dict:
    """A produce run's figures: records/s, and the broker's and the load generator's
    CPU per million records (and the broker's per MB stored in `topic`)."""
    stored_mb = broker.stored_bytes(topic) / 1e6
    return {
        "records": records,
        "seconds": elapsed,
        "rate": records / elapsed,
        "client_cpu_util": client_cpu / elapsed,
        "client_cpu_s_per_million": client_cpu / (records / 1e6),
        "broker_cpu_s_per_million": broker_cpu / (records / 1e6),
        "broker_cpu_s_per_mb": broker_cpu / stored_mb if stored_mb else float("nan"),
        "stored_bytes_per_record": stored_mb * 1e6 / records,
        "broker_cpu_util": broker_cpu / elapsed,
    }


def cpu_ceiling(run: dict, cores: int | None = None) -> float:
    """Records/s at which broker and load generator together would use every core, or
    the broker one whole core (its event loop serves every produce request), at the
    CPU per record they spent in `run`, whichever comes first."""
    per_record = (run["broker_cpu_s_per_million"] + run["client_cpu_s_per_million"]) / 1e6
    return min((cores or os.cpu_count() or 1) / per_record, 1e6 / run["broker_cpu_s_per_million"])


def bench_throughput(
    event_loop: str,
    seconds: float,
    profile: Path | None,
    consumers: list[int],
    producers: int = 2,
    linger_ms: int = 50,
    chunk: int = 10_000,
    rounds: int = 1,
    redis_rounds: bool = False,
    raw: dict | None = None,
) -> dict:
    """`rounds` produce runs (topics bench, bench-2, ...), each followed by a Redis
    XADD run when `redis_rounds`, then, unless `raw` is None, a run of the raw load
    generator (`raw` holds `raw_produce_run`'s options, {} for its defaults; topics
    bench-raw-1, ..., deleted once checked), followed by its own Redis run.
    "produce" and "raw produce" are the median rounds; consumers read the first
    round's topic."""
    broker = Broker(event_loop, profile)
    try:
        runs, raw_runs = [], []
        for n in range(rounds):
            topic = "bench" if n == 0 else f"bench-{n + 1}"
            broker.create_topic(topic, PARTITIONS)
            run = produce_run(
                broker, topic, seconds, producers, acks=1, linger_ms=linger_ms, chunk=chunk
            )
            if redis_rounds:
                run["redis_rate"] = bench_redis(run["records"])
            runs.append(run)
            if raw is not None:
                topic = f"bench-raw-{n + 1}"
                broker.create_topic(topic, PARTITIONS)
                run = raw_produce_run(broker, topic, seconds, **raw)
                broker.delete_topic(topic)
                if redis_rounds:
                    run["redis_rate"] = bench_redis(run["records"])
                raw_runs.append(run)
        prod = median_run(runs)
        out = {"produce": prod, "produce rounds": runs}
        if raw_runs:
            out |= {"raw produce": median_run(raw_runs), "raw produce rounds": raw_runs}
        for n in consumers:
            cpu0 = broker.cpu_seconds()
            expect = broker.partition_ends("bench")
            procs = []
            for i in range(n):
                mine = [p for p in range(PARTITIONS) if p % n == i]
                procs.append(
                    spawn_role(
                        "consumer",
                        bootstrap=broker.bootstrap,
                        topic="bench",
                        partitions=",".join(map(str, mine)),
                        expect=sum(expect[p] for p in mine),
                    )
                )
            parts = [finish(p) for p in procs]
            records = sum(p["records"] for p in parts)
            seconds = max(p["seconds"] for p in parts)
            out[f"consume x{n}"] = {
                "records": records,
                "seconds": seconds,
                "rate": records / seconds,
                "client_cpu_util": sum(p["client_cpu_util"] for p in parts),
                "broker_cpu_s_per_million": (broker.cpu_seconds() - cpu0) / (records / 1e6),
            }
        if shutil.which("kcat"):
            out["consume kcat"] = kcat_consume(broker.bootstrap, "bench", prod["records"])
        return out
    finally:
        broker.stop()


def kcat_consume(bootstrap: str, topic: str, expect: int) -> dict:
    """The C client (kcat/librdkafka) reading everything, one newline per record."""
    start = time.perf_counter()
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q", "-f", "\\n"]
        + ["-X", "queued.min.messages=1000000"],
        capture_output=True,
        check=True,
        timeout=600,
    ).stdout
    elapsed = time.perf_counter() - start
    records = out.count(b"\n")
    return {"records": records, "seconds": elapsed, "rate": records / elapsed}


def bench_latency(event_loop: str, seconds: int, rate: int) -> dict:
    broker = Broker(event_loop)
    try:
        broker.create_topic("lat", 1)
        consumer = spawn_role(
            "latency-consumer",
            bootstrap=broker.bootstrap,
            topic="lat",
            seconds=seconds,
            expect=rate * seconds,
        )
        assert consumer.stdout.readline().strip() == "ready"
        finish(
            spawn_role(
                "latency-producer",
                bootstrap=broker.bootstrap,
                topic="lat",
                seconds=seconds,
                rate=rate,
            )
        )
        res = finish(consumer)
        lat = sorted(res.pop("latencies_ms"))
        q = statistics.quantiles(lat, n=1000)
        res.update(p50_ms=q[499], p90_ms=q[899], p99_ms=q[989], p999_ms=q[998], max_ms=lat[-1])
        return res
    finally:
        broker.stop()


def median_run(runs: list[dict]) -> dict:
    """The run with the median rate (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda r: r["rate"])
    return ordered[(len(ordered) - 1) // 2]


def bench_redis(records: int) -> float:
    """XADD records/s of a fresh redis-server, for as many records as `records`
    (at least 200,000, at most REDIS_MAX_RECORDS)."""
    from bench.peers.redis import RedisServer

    with RedisServer() as redis:
        return redis.xadd_rate(min(max(200_000, records), REDIS_MAX_RECORDS))


def batch_sweep(seconds: float, sizes: list[int], producers: int = 2) -> list[tuple[int, dict]]:
    """Produce acks=1 at each producer batch.num.messages in `sizes` (linger 50 ms,
    batch.size 1 MB), one broker, a fresh 6-partition topic per point."""
    broker = Broker("asyncio")
    out = []
    try:
        for size in sizes:
            topic = f"sweep-{size}"
            broker.create_topic(topic, PARTITIONS)
            r = produce_run(broker, topic, seconds, producers, acks=1, batch_messages=size)
            print(f"  batch.num.messages={size}: {r['rate']:,.0f} records/s", flush=True)
            out.append((size, r))
    finally:
        broker.stop()
    return out


MODES = {
    # seconds, produce rounds, event loops, consumer counts, latency seconds,
    # sweep seconds, sweep sizes
    "quick": (5, 1, ["asyncio"], [1], 3, 2, [100, 1000, 10_000, 100_000]),
    "default": (30, 3, ["asyncio"], [1], 10, 5, [100, 500, 2000, 10_000, 100_000]),
    "full": (30, 3, ["asyncio", "uvloop"], [1, 2], 30, 10, [100, 500, 2000, 10_000, 100_000]),
}
KAFKA_2014 = "Kafka 2014 reference run: 821,557 records/s on three 6-core brokers"
LIBRDKAFKA = "2 confluent-kafka producer processes"
LOAD_GENERATOR = (
    "load: 2 confluent-kafka (librdkafka) processes, produce_batch of 10,000 100-byte"
    " records per call, lz4, linger.ms 50, batch.size 1 MB"
)
RAW = (
    f"prebuilt lz4 batches over {RAW_CONNECTIONS} raw connections, {RAW_IN_FLIGHT} in flight"
    " (a load generator like redis-benchmark)"
)
RAW_GENERATOR = (
    f"load: bench/scale_clients.py (role load), one process, {RAW_CONNECTIONS} connections"
    f" each pipelining {RAW_IN_FLIGHT} Produce v8 requests (acks=1, producer id -1) of one lz4"
    f" batch of {RAW_RECORDS_PER_BATCH:,} 100-byte records per partition (librdkafka's"
    " batches of these records under batch.size 1 MB),"
    f" {RAW_DISTINCT_BATCHES} distinct batches built once and resent;"
    " end offsets and the last records of every partition checked after each round"
)
REDIS_PEER = "Redis Streams XADD 100 B, redis-benchmark -P 64 -c 4, AOF everysec"


def _round_rates(runs: list[dict]) -> str:
    return ", ".join(f"{r['rate']:,.0f}" for r in runs)


def produce_rows(loop: str, seconds: float, runs: list[dict], raw: bool) -> list[dict]:
    """The figures of one load generator's produce rounds on one event loop: the
    raw generator's row carries issue 39's target, librdkafka's its CPU ceiling."""
    p = median_run(runs)
    who = "raw load generator" if raw else LIBRDKAFKA
    cpu = (
        f"broker CPU {p['broker_cpu_s_per_million']:.3f} s per million records"
        f" ({p['broker_cpu_util']:.0%} of a core), {p['broker_cpu_s_per_mb'] * 1000:.2f} ms"
        f" per MB stored; load generator {p['client_cpu_s_per_million']:.4f} s per million"
        f" ({p['client_cpu_util']:.0%})"
    )
    head = {
        "area": "broker",
        "metric": f"produce acks=1, 6 partitions, {RAW if raw else LIBRDKAFKA}, {seconds} s ({loop})",
        "value": p["rate"],
        "unit": "records/s",
    }
    if raw:
        head |= {
            "target": ">= 3500000",
            "reference": f"issue 39; {KAFKA_2014}",
            "detail": f"median of {len(runs)} round(s): {_round_rates(runs)} records/s; {cpu}:"
            f" the broker's core (its event loop), or {os.cpu_count()} cores with the load"
            f" generator, saturate at {cpu_ceiling(p):,.0f} records/s;"
            f" {RAW_GENERATOR}",
        }
    else:
        head |= {
            "reference": KAFKA_2014,
            "detail": f"median of {len(runs)} round(s): {_round_rates(runs)} records/s; {cpu}:"
            f" broker and producers saturate {os.cpu_count()} cores at"
            f" {cpu_ceiling(p):,.0f} records/s (issue 39's target is on the raw load"
            f" generator's row); {LOAD_GENERATOR}",
        }
    return [
        head,
        {
            "area": "broker",
            "metric": f"broker CPU per million records produced, {who} ({loop})",
            "value": p["broker_cpu_s_per_million"],
            "unit": "s",
        },
        {
            "area": "broker",
            "metric": f"broker CPU per MB produced, lz4 batches as stored, {who} ({loop})",
            "value": p["broker_cpu_s_per_mb"] * 1000,
            "unit": "ms",
            "detail": f"{p['stored_bytes_per_record']:.1f} bytes stored per 100-byte record",
        },
        {
            "area": "broker",
            "metric": f"load generator's CPU per million records produced, {who} ({loop})",
            "value": p["client_cpu_s_per_million"],
            "unit": "s",
        },
    ]


def redis_ratio_row(best: list[dict], redis_runs: list[dict], raw: bool) -> tuple[str, dict]:
    """The Redis peer text and the logflume / Redis ratio row of one load generator:
    the median of its rounds' ratios (`best`: the rounds of its best loop;
    `redis_runs`: the first loop's rounds, each with the Redis rate measured after it)."""
    redis_rates = [run["redis_rate"] for run in redis_runs]
    peer = (
        f"{REDIS_PEER}: {statistics.median(redis_rates):,.0f} records/s"
        f" (median of {len(redis_rates)})"
    )
    ratios = [run["rate"] / redis_rate for run, redis_rate in zip(best, redis_rates, strict=True)]
    detail = "median of the rounds' ratios, Redis run after each produce round: " + ", ".join(
        f"{x:.2f}" for x in ratios
    )
    row = {
        "area": "broker",
        "metric": "logflume / Redis Streams produce, "
        + (f"{RAW} vs redis-benchmark" if raw else LIBRDKAFKA)
        + " (best loop)",
        "value": statistics.median(ratios),
        "unit": "ratio",
        "peer": peer,
        "detail": detail,
    }
    if raw:
        row |= {"target": ">= 4", "reference": "issue 39"}
    else:
        row["detail"] += "; the producers' own CPU bounds this row (see its ceiling)"
    return peer, row


def figures(mode: str) -> list[dict]:
    seconds, rounds, loops, consumers, lat_seconds, sweep_seconds, sizes = MODES[mode]
    out: list[dict] = []
    best: dict[bool, list[dict]] = {}  # per generator (raw?), the rounds of its best loop
    first: dict[bool, list[dict]] = {}  # the first loop's rounds, each with its Redis rate
    produce_rows_at: dict[bool, list[int]] = {False: [], True: []}
    for i, loop in enumerate(loops):
        print(
            f"produce {seconds}s x {rounds} x 2 load generators + consume, {loop} loop", flush=True
        )
        r = bench_throughput(
            loop,
            seconds,
            None,
            consumers,
            rounds=rounds,
            redis_rounds=i == 0,
            raw={},
        )
        for raw, key in ((False, "produce rounds"), (True, "raw produce rounds")):
            runs = r[key]
            print(
                f"  produce, {RAW if raw else LIBRDKAFKA}: {_round_rates(runs)} records/s",
                flush=True,
            )
            if i == 0:
                first[raw] = runs
            if raw not in best or median_run(runs)["rate"] > median_run(best[raw])["rate"]:
                best[raw] = runs
            produce_rows_at[raw].append(len(out))
            out += produce_rows(loop, seconds, runs, raw)
        for n in consumers:
            c = r[f"consume x{n}"]
            out.append(
                {
                    "area": "broker",
                    "metric": f"consume from beginning, {n} confluent-kafka (Python) consumer(s) ({loop})",
                    "value": c["rate"],
                    "unit": "records/s",
                    "target": ">= 2000000",
                    "reference": "issue 3",
                    "detail": f"broker CPU {c['broker_cpu_s_per_million']:.3f} s per million records",
                }
            )
        if "consume kcat" in r:
            out.append(
                {
                    "area": "broker",
                    "metric": f"consume from beginning, kcat (C client) ({loop})",
                    "value": r["consume kcat"]["rate"],
                    "unit": "records/s",
                    "target": ">= 2000000",
                    "reference": "issue 3",
                }
            )
    print(f"e2e latency, {lat_seconds}s at 10,000 records/s", flush=True)
    lat = bench_latency(loops[0], lat_seconds, 10_000)
    title = f"end-to-end latency, acks=all, 10,000 records/s, {lat['records']:,} records"
    for label, key in (
        ("p50", "p50_ms"),
        ("p90", "p90_ms"),
        ("p99", "p99_ms"),
        ("p99.9", "p999_ms"),
    ):
        out.append(
            {
                "area": "broker",
                "metric": f"e2e latency acks=all @ 10k records/s, {label}",
                "value": lat[key],
                "unit": "ms",
                "target": "<= 5" if label == "p99" else "",
                "reference": "issue 3" if label == "p99" else "",
                "plot": "latency",
                "x": label,
                "plot_title": title,
            }
        )
    for raw in (False, True):
        peer, row = redis_ratio_row(best[raw], first[raw], raw)
        for at in produce_rows_at[raw]:
            out[at]["peer"] = peer
        out.append(row)
    print(f"producer batch size sweep, {sweep_seconds}s per point", flush=True)
    for size, r in batch_sweep(sweep_seconds, sizes):
        out.append(
            {
                "area": "broker",
                "metric": f"produce acks=1, batch.num.messages={size}, linger 50 ms, {sweep_seconds} s",
                "value": r["rate"],
                "unit": "records/s",
                "plot": "batch",
                "x": size,
                "plot_title": f"produce acks=1, 6 partitions, {LIBRDKAFKA}, {sweep_seconds} s per point",
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--role", choices=sorted(ROLES))
    ap.add_argument("--bootstrap")
    ap.add_argument("--topic")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--partitions", default="0,1,2,3,4,5")
    ap.add_argument("--linger-ms", type=int, default=50)
    ap.add_argument("--batch-messages", type=int, default=100_000, help="batch.num.messages")
    ap.add_argument("--idempotence", choices=("true", "false"), default="false")
    ap.add_argument("--max-in-flight", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=10_000, help="records per produce_batch call")
    ap.add_argument("--producers", type=int, default=2, help="producer processes")
    ap.add_argument("--rounds", type=int, default=1, help="produce runs (median reported)")
    ap.add_argument(
        "--consumers", default="1,2", help="consumer process counts to measure (comma list)"
    )
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--latency-seconds", type=int, default=10)
    ap.add_argument("--event-loop", choices=("asyncio", "uvloop", "both"), default="both")
    ap.add_argument("--profile", type=Path, default=None, help="cProfile the broker into this file")
    ap.add_argument("--skip-redis", action="store_true")
    ap.add_argument("--skip-raw", action="store_true", help="no raw load generator runs")
    ap.add_argument("--raw-connections", type=int, default=RAW_CONNECTIONS)
    ap.add_argument(
        "--raw-in-flight", type=int, default=RAW_IN_FLIGHT, help="requests per raw connection"
    )
    ap.add_argument("--raw-records-per-batch", type=int, default=RAW_RECORDS_PER_BATCH)
    args = ap.parse_args()
    if args.role:
        args.seconds = int(args.seconds) if args.role.startswith("latency") else args.seconds
        print(json.dumps(ROLES[args.role](args)))
        return
    loops = ["asyncio", "uvloop"] if args.event_loop == "both" else [args.event_loop]
    results = {}
    generators = [(f"{args.producers} confluent-kafka producer process(es)", "produce rounds")]
    if not args.skip_raw:
        generators.append(
            (
                f"prebuilt lz4 batches over {args.raw_connections} raw connection(s),"
                f" {args.raw_in_flight} in flight",
                "raw produce rounds",
            )
        )
    raw = None
    if not args.skip_raw:
        raw = {
            "connections": args.raw_connections,
            "in_flight": args.raw_in_flight,
            "records_per_batch": args.raw_records_per_batch,
        }
    for loop in loops:
        consumers = [int(n) for n in args.consumers.split(",") if n]
        profile = args.profile if loop == loops[0] else None
        results[loop] = bench_throughput(
            loop,
            args.seconds,
            profile,
            consumers,
            args.producers,
            args.linger_ms,
            args.chunk,
            rounds=args.rounds,
            redis_rounds=loop == loops[0] and not args.skip_redis,
            raw=raw,
        )
        for who, key in generators:
            for p in results[loop][key]:
                print(
                    f"[{loop}] produce acks=1 6 partitions, {who}: "
                    f"{p['rate']:,.0f} records/s ({p['records']:,} in {p['seconds']:.1f}s), "
                    f"broker CPU {p['broker_cpu_s_per_million']:.3f} s per M records, "
                    f"{p['broker_cpu_s_per_mb'] * 1000:.2f} ms per MB stored "
                    f"({p['broker_cpu_util']:.0%} of a core); load generator "
                    f"{p['client_cpu_s_per_million']:.4f} s per M records"
                    f" ({p['client_cpu_util']:.0%}); CPU ceiling {cpu_ceiling(p):,.0f} records/s"
                    + (
                        f"; redis XADD {p['redis_rate']:,.0f} records/s"
                        if "redis_rate" in p
                        else ""
                    )
                )
        for n in consumers:
            c = results[loop][f"consume x{n}"]
            print(
                f"[{loop}] consume from beginning, {n} consumer process(es): {c['rate']:,.0f} records/s "
                f"(broker CPU {c['broker_cpu_s_per_million']:.3f} s per M records; "
                f"consumer processes {c['client_cpu_util']:.0%})"
            )
        if "consume kcat" in results[loop]:
            k = results[loop]["consume kcat"]
            print(f"[{loop}] consume from beginning, kcat (C client): {k['rate']:,.0f} records/s")
    lat = bench_latency(loops[0], args.latency_seconds, args.rate)
    print(
        f"[{loops[0]}] e2e latency acks=all at {args.rate:,}/s ({lat['records']:,} records): "
        f"p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, p99.9 {lat['p999_ms']:.2f} ms, max {lat['max_ms']:.1f} ms"
    )
    if not args.skip_redis:
        for who, key in generators:
            runs = results[loops[0]][key]
            ratios = [run["rate"] / run["redis_rate"] for run in runs]
            print(
                f"[{loops[0]}] logflume ({who}) / redis XADD (100 B, pipelined 64) produce"
                f" ratio, median of {len(ratios)}: {statistics.median(ratios):.2f}"
            )


if __name__ == "__main__":
    main()
