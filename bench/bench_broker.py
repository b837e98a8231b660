"""Broker core benchmark: produce, consume, end-to-end latency, and Redis Streams.

    .venv/bin/python -m bench.bench_broker [--seconds 10] [--event-loop asyncio|uvloop|both]

Everything runs on this machine over loopback, each party in its own process:
the broker (`logflume broker`), a confluent-kafka producer, a confluent-kafka
consumer, redis-server and redis-benchmark. Records are 100-byte log-like lines
(a pool of 4096 distinct ones), lz4-compressed by the producer in large batches.

1. produce, acks=1, one topic with 6 partitions, for --seconds (30 for the full run),
   from --producers processes (default 2, each `produce_batch` of --chunk records,
   linger.ms --linger-ms, batch.size 1 MB, all 6 partitions);
   records/s counted over the whole run including the final flush, plus the
   broker's CPU seconds per million records (utime+stime from /proc/<pid>/stat).
2. consume everything from the beginning (assign, no group): records/s.
3. end-to-end latency at 10,000 records/s with acks=all: producer stamps each
   record with its send time, a consumer (long-polling) computes receive - send.
4. the same produce workload as Redis Streams XADD (redis-benchmark, 100-byte field,
   pipelined 64 deep, 4 connections) against a private redis-server with AOF.
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

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)

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
    records = sum(p["records"] for p in parts)
    elapsed = max(p["seconds"] for p in parts)
    cpu = broker.cpu_seconds() - cpu0
    return {
        "records": records,
        "seconds": elapsed,
        "rate": records / elapsed,
        "client_cpu_util": sum(p["client_cpu_util"] for p in parts),
        "broker_cpu_s_per_million": cpu / (records / 1e6),
        "broker_cpu_util": cpu / elapsed,
    }


def bench_throughput(
    event_loop: str,
    seconds: float,
    profile: Path | None,
    consumers: list[int],
    producers: int = 2,
    linger_ms: int = 50,
    chunk: int = 10_000,
) -> dict:
    broker = Broker(event_loop, profile)
    try:
        broker.create_topic("bench", PARTITIONS)
        prod = produce_run(
            broker, "bench", seconds, producers, acks=1, linger_ms=linger_ms, chunk=chunk
        )
        out = {"produce": prod}
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


def bench_redis(records: int) -> float:
    from bench.peers.redis import RedisServer

    with RedisServer() as redis:
        return redis.xadd_rate(records)


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
    # seconds, event loops, consumer counts, latency seconds, sweep seconds, sweep sizes
    "quick": (5, ["asyncio"], [1], 3, 2, [100, 1000, 10_000, 100_000]),
    "default": (30, ["asyncio"], [1], 10, 5, [100, 500, 2000, 10_000, 100_000]),
    "full": (30, ["asyncio", "uvloop"], [1, 2], 30, 10, [100, 500, 2000, 10_000, 100_000]),
}
KAFKA_2014 = "Kafka 2014 reference run: 821,557 records/s on three 6-core brokers"


def figures(mode: str) -> list[dict]:
    seconds, loops, consumers, lat_seconds, sweep_seconds, sizes = MODES[mode]
    out: list[dict] = []
    best = None
    for loop in loops:
        print(f"produce {seconds}s + consume, {loop} loop", flush=True)
        r = bench_throughput(loop, seconds, None, consumers)
        p = r["produce"]
        print(f"  produce {p['rate']:,.0f} records/s", flush=True)
        best = p if best is None or p["rate"] > best["rate"] else best
        out.append(
            {
                "area": "broker",
                "metric": f"produce acks=1, 6 partitions, 2 producer processes, {seconds} s ({loop})",
                "value": p["rate"],
                "unit": "records/s",
                "target": ">= 1000000",
                "reference": KAFKA_2014,
                "detail": f"broker CPU {p['broker_cpu_s_per_million']:.3f} s per million records"
                f" ({p['broker_cpu_util']:.0%} of a core); producers {p['client_cpu_util']:.0%}",
            }
        )
        out.append(
            {
                "area": "broker",
                "metric": f"broker CPU per million records produced ({loop})",
                "value": p["broker_cpu_s_per_million"],
                "unit": "s",
            }
        )
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
    print("Redis Streams XADD", flush=True)
    redis = bench_redis(max(200_000, int(best["records"])))
    peer = f"Redis Streams XADD 100 B, -P 64, AOF everysec: {redis:,.0f} records/s"
    for f in out:
        if f["metric"].startswith("produce acks=1"):
            f["peer"] = peer
    out.append(
        {
            "area": "broker",
            "metric": "logflume / Redis Streams produce (best loop)",
            "value": best["rate"] / redis,
            "unit": "ratio",
            "target": ">= 2",
            "reference": "issue 3",
            "peer": peer,
        }
    )
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
                "plot_title": f"produce acks=1, 6 partitions, 2 producer processes, {sweep_seconds} s per point",
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
    ap.add_argument(
        "--consumers", default="1,2", help="consumer process counts to measure (comma list)"
    )
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--latency-seconds", type=int, default=10)
    ap.add_argument("--event-loop", choices=("asyncio", "uvloop", "both"), default="both")
    ap.add_argument("--profile", type=Path, default=None, help="cProfile the broker into this file")
    ap.add_argument("--skip-redis", action="store_true")
    args = ap.parse_args()
    if args.role:
        args.seconds = int(args.seconds) if args.role.startswith("latency") else args.seconds
        print(json.dumps(ROLES[args.role](args)))
        return
    loops = ["asyncio", "uvloop"] if args.event_loop == "both" else [args.event_loop]
    results = {}
    for loop in loops:
        consumers = [int(n) for n in args.consumers.split(",")]
        profile = args.profile if loop == loops[0] else None
        results[loop] = bench_throughput(
            loop, args.seconds, profile, consumers, args.producers, args.linger_ms, args.chunk
        )
        p = results[loop]["produce"]
        print(
            f"[{loop}] produce acks=1 6 partitions, {args.producers} producer process(es): "
            f"{p['rate']:,.0f} records/s "
            f"({p['records']:,} in {p['seconds']:.1f}s), broker CPU {p['broker_cpu_s_per_million']:.2f} s per M "
            f"records ({p['broker_cpu_util']:.0%} of a core; producer processes {p['client_cpu_util']:.0%})"
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
        best = max(results.values(), key=lambda r: r["produce"]["rate"])["produce"]
        redis_rate = bench_redis(max(200_000, int(best["records"])))
        print(f"redis XADD 100 B, pipelined 64: {redis_rate:,.0f} records/s")
        print(f"logflume / redis produce ratio: {best['rate'] / redis_rate:.2f}")


if __name__ == "__main__":
    main()
