"""The clients of bench/bench_scale.py, each run as its own process:

    python -m bench.scale_clients --role load|hold|members|commit --port PORT [options]

- load: produces whole prebuilt batches over the wire with the broker's own codec
  (Produce v8, acks=1, producer id -1, `--per-request` partitions a request,
  `--in-flight` requests pipelined on each of `--connections` connections, a thread
  each); the batch bytes are built once and resent (the broker rewrites baseOffset
  and leader epoch, which the CRC does not cover), so the loader costs almost
  nothing. Either `--batches` rounds over the partitions of `scale-<i>` topics, one
  uncompressed batch of `--record-bytes` records (bench_scale), or `--seconds` of
  `--topic`'s partitions with `--distinct` batches of `--records-per-batch` of
  bench_broker's 100-byte lines, each batch a different slice of the pool,
  `--codec`-compressed (bench_broker's produce row: a load generator like
  redis-benchmark); every partition error is counted;
- hold: one asyncio process holding many connections (ApiVersions + Metadata each,
  a few producing a small batch every second); stdin `check` pings every
  connection, `quit` closes them;
- members: one confluent-kafka consumer per group (a thread each); stdin `go`
  subscribes them all at once, `leave` close()s them all (LeaveGroup);
- commit: `--groups` groups, each committing an offset of each of the 6 partitions
  of the groups' topic once a second, as a consumer with auto-commit does, over one
  blocking connection with the broker's codec (OffsetCommit v8 outside any
  generation, as a standalone consumer commits; a tenth of the groups' requests
  pipelined every 1/10 s), until stdin says `quit`: a lightweight stand-in for
  1,000 committing consumers, whose own cost would drown the broker's.

Each prints JSON lines on stdout, its result last.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import resource
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field

from common.aio import within

GIB = 1 << 30
MIB = 1 << 20
CLIENT_ID = "bench-scale"
GROUP_TOPIC = "scale-groups"
GROUP_PARTITIONS = 6
GROUP_SETTINGS = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000}
PRODUCE_V, FETCH_V, METADATA_V, API_VERSIONS_V = 8, 11, 8, 2
PER_REQUEST = 16  # partitions per Produce / Fetch request
IN_FLIGHT = 8  # Produce requests pipelined on a load connection


def partition_layout(partitions: int, topics: int) -> list[tuple[str, int]]:
    """(topic, partition) pairs: `topics` topics scale-<i> sharing `partitions` as
    evenly as possible (the first topics get one more when it does not divide)."""
    if topics <= 0 or partitions < topics:
        raise ValueError("need at least one partition per topic")
    base, extra = divmod(partitions, topics)
    return [(f"scale-{t}", p) for t in range(topics) for p in range(base + (t < extra))]


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- wire helpers ------------------------------------------------------------------------


def _metadata_body(topics: list[str] | None) -> dict:
    return {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def _fetch_body(parts: list[tuple[str, int, int]], per_partition: int) -> dict:
    by_topic: dict[str, list] = {}
    for topic, p, offset in parts:
        by_topic.setdefault(topic, []).append(
            {
                "partition": p,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "log_start_offset": -1,
                "partition_max_bytes": per_partition,
            }
        )
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": per_partition * len(parts),
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _produce_body(parts: list[tuple[str, int, bytes]], acks: int = 1) -> dict:
    """A Produce request's body: (topic, partition, batch bytes) each."""
    by_topic: dict[str, list] = {}
    for topic, p, records in parts:
        by_topic.setdefault(topic, []).append({"index": p, "records": records})
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()],
    }


class Wire:
    """One blocking connection speaking the broker's codec; not thread-safe."""

    def __init__(self, port: int, timeout: float = 60.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, frame: bytes) -> int:
        """Send a prebuilt request frame with a fresh correlation id in place of its
        own; the frame itself is not modified (connections of other threads may be
        sending it too): its patched 12-byte head and the rest go in one sendmsg."""
        self.corr += 1
        head = bytearray(frame[:12])
        struct.pack_into(">i", head, 8, self.corr)
        parts = [memoryview(head), memoryview(frame)[12:]]
        while parts:
            sent = self.sock.sendmsg(parts)
            while sent:
                if sent >= len(parts[0]):
                    sent -= len(parts.pop(0))
                else:
                    parts[0] = parts[0][sent:]
                    sent = 0
        return self.corr

    def send(self, api_key: int, version: int, body: dict) -> int:
        from broker.protocol import encode_request

        self.corr += 1
        self.sock.sendall(encode_request(api_key, version, self.corr, CLIENT_ID, body))
        return self.corr

    def recv(self, api_key: int, version: int) -> dict:
        from broker.protocol import decode_response

        (size,) = struct.unpack(">i", self._exact(4))
        return decode_response(api_key, version, self._exact(size))[1]

    def request(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return self.recv(api_key, version)

    def _exact(self, n: int) -> memoryview:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("connection closed by broker")
            got += k
        return view


def _errors(body: dict, key: str, parts_key: str) -> list[int]:
    return [p["error_code"] for t in body[key] for p in t[parts_key] if p["error_code"] != 0]


def _build_batch(batch_bytes: int, record_bytes: int = 1000) -> bytes:
    """One uncompressed batch of about `batch_bytes` of `record_bytes`-byte records
    made of log-like lines (bench_broker's pool, joined)."""
    from bench.bench_broker import record_pool
    from broker.protocol.records import BatchBuilder

    pool = record_pool()
    per_line = len(pool[0]) + 1
    lines = max(1, record_bytes // per_line)
    b = BatchBuilder()
    now = int(time.time() * 1000)
    size, i = 61, 0
    while size + record_bytes + 12 <= batch_bytes or not len(b):
        value = b"\n".join(pool[(i + j) % len(pool)] for j in range(lines))
        b.append(value.ljust(record_bytes, b" ")[:record_bytes], timestamp_ms=now)
        size += record_bytes + 8
        i += lines
    return b.build()


# -- roles (each in its own process) --------------------------------------------------------


def pool_batches(records_per_batch: int, distinct: int, codec: int) -> list[bytes]:
    """`distinct` batches of `records_per_batch` of bench_broker's 100-byte lines,
    compressed with `codec` (the broker's own compression: lz4 is Kafka's lz4 frame),
    producer id -1, CreateTime now; batch i starts at line i * 4096 / distinct of the
    pool (wrapping around it), so the batches differ as a producer's would."""
    from bench.bench_broker import record_pool
    from broker.protocol.records import BatchBuilder

    pool = record_pool()
    now = int(time.time() * 1000)
    out = []
    for i in range(distinct):
        first = i * len(pool) // distinct
        b = BatchBuilder(codec=codec)
        for j in range(records_per_batch):
            b.append(pool[(first + j) % len(pool)], timestamp_ms=now)
        out.append(b.build())
    return out


@dataclass(frozen=True)
class Frame:
    """A prebuilt Produce request: its bytes (correlation id 0) and the records and
    bytes of the batch it holds for each (topic, partition)."""

    data: bytes
    records: dict[tuple[str, int], int]
    batch_bytes: dict[tuple[str, int], int]


def produce_frames(
    layout: list[tuple[str, int]], batches: list[bytes], per_request: int
) -> list[Frame]:
    """Produce v8 requests (acks=1) covering `layout` `len(batches)` times, each with
    `per_request` partitions, the batches taken in turn (one batch: the same batch
    for every partition, a single round)."""
    from broker.protocol import ApiKey, encode_request
    from broker.protocol.records import RecordBatch

    counts = [RecordBatch(b).records_count for b in batches]
    slots = [(tp, k % len(batches)) for k, tp in enumerate(layout * len(batches))]
    frames = []
    for i in range(0, len(slots), per_request):
        group = slots[i : i + per_request]
        body = _produce_body([(t, p, batches[k]) for (t, p), k in group])
        frames.append(
            Frame(
                encode_request(ApiKey.PRODUCE, PRODUCE_V, 0, CLIENT_ID, body),
                {tp: counts[k] for tp, k in group},
                {tp: len(batches[k]) for tp, k in group},
            )
        )
    return frames


@dataclass
class LoadTally:
    """What one connection's acknowledged requests stored, and its partition errors."""

    requests: int = 0
    records: int = 0
    bytes: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)

    def add(self, frame: Frame, body: dict) -> None:
        self.requests += 1
        for topic in body["responses"]:
            for part in topic["partition_responses"]:
                tp = (topic["name"], part["index"])
                if part["error_code"]:
                    self.errors[part["error_code"]] += 1
                else:
                    self.records += frame.records[tp]
                    self.bytes += frame.batch_bytes[tp]


def pipelined_produce(
    port: int,
    frames: list[Frame],
    in_flight: int,
    first: int = 0,
    rounds: int | None = None,
    deadline: float | None = None,
) -> LoadTally:
    """Send `frames` in turn from index `first` over one connection, `in_flight`
    requests pipelined, `rounds` times over them or until time.perf_counter() passes
    `deadline`, then read the last responses."""
    from broker.protocol import ApiKey

    wire = Wire(port)
    tally = LoadTally()
    pending: collections.deque[Frame] = collections.deque()
    total = None if rounds is None else rounds * len(frames)
    n = 0
    while (total is None or n < total) and (deadline is None or time.perf_counter() < deadline):
        if len(pending) >= in_flight:
            tally.add(pending.popleft(), wire.recv(ApiKey.PRODUCE, PRODUCE_V))
        frame = frames[(first + n) % len(frames)]
        wire.send_frame(frame.data)
        pending.append(frame)
        n += 1
    while pending:
        tally.add(pending.popleft(), wire.recv(ApiKey.PRODUCE, PRODUCE_V))
    wire.close()
    return tally


def role_load(args) -> dict:
    """Produce prebuilt batches over `--connections` connections (see the module's
    docstring for the two workloads); the CPU reported is this process's over the
    sending, the batches already built."""
    from common.compression import Codec

    if args.topic:
        layout = [(args.topic, p) for p in range(args.partitions)]
        batches = pool_batches(args.records_per_batch, args.distinct, Codec[args.codec.upper()])
        rounds, deadline_s = None, args.seconds
    else:
        layout = partition_layout(args.partitions, args.topics)[args.shard :: args.shards]
        batches = [_build_batch(args.batch_kib * 1024, args.record_bytes)]
        rounds, deadline_s = args.batches, None
    frames = produce_frames(layout, batches, args.per_request)
    connections = args.connections
    tallies: list[LoadTally] = []
    failures: list[BaseException] = []

    def run(c: int, deadline: float | None) -> None:
        try:
            first = c * len(frames) // connections
            tallies.append(
                pipelined_produce(args.port, frames, args.in_flight, first, rounds, deadline)
            )
        except Exception as e:  # reported below: a lost connection must fail the run
            failures.append(e)

    cpu0 = _own_cpu()
    start = time.perf_counter()
    deadline = None if deadline_s is None else start + deadline_s
    threads = [threading.Thread(target=run, args=(c, deadline)) for c in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    cpu = _own_cpu() - cpu0
    if failures:
        raise RuntimeError(f"load connection failed: {failures[0]!r}")
    errors: collections.Counter = collections.Counter()
    for t in tallies:
        errors.update(t.errors)
    return {
        "records": sum(t.records for t in tallies),
        "bytes": sum(t.bytes for t in tallies),
        "requests": sum(t.requests for t in tallies),
        "seconds": elapsed,
        "cpu_s": cpu,
        "batch_bytes": len(batches[0]),
        "batch_records": max(f for fr in frames for f in fr.records.values()),
        "errors": {str(k): v for k, v in errors.items()},
    }


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _conn_open(port: int, topic: str, limit_s: float):
    from broker.protocol import ApiKey, decode_response, encode_request

    reader, writer = await within(asyncio.open_connection("127.0.0.1", port), limit_s)
    conn = {"r": reader, "w": writer, "corr": 0}

    async def call(api_key: int, version: int, body: dict) -> dict:
        conn["corr"] += 1
        writer.write(encode_request(api_key, version, conn["corr"], CLIENT_ID, body))
        size = struct.unpack(">i", await within(reader.readexactly(4), limit_s))[0]
        frame = await within(reader.readexactly(size), limit_s)
        return decode_response(api_key, version, frame)[1]

    conn["call"] = call
    await call(ApiKey.API_VERSIONS, API_VERSIONS_V, {})
    md = await call(ApiKey.METADATA, METADATA_V, _metadata_body([topic]))
    if md["topics"][0]["error_code"]:
        raise RuntimeError(f"metadata error {md['topics'][0]['error_code']}")
    return conn


async def _hold(args) -> None:
    from broker.protocol import ApiKey

    topics = sorted({t for t, _ in partition_layout(args.partitions, args.topics)})
    sem = asyncio.Semaphore(100)
    timeout = 60.0

    async def open_one(i: int):
        async with sem:
            try:
                return await _conn_open(args.port, topics[i % len(topics)], timeout)
            except (TimeoutError, OSError, RuntimeError, asyncio.IncompleteReadError):
                return None

    t0 = time.perf_counter()
    conns = await asyncio.gather(*(open_one(i) for i in range(args.connections)))
    opened = [c for c in conns if c is not None]
    _say({"event": "open", "opened": len(opened), "seconds": time.perf_counter() - t0})
    produced = collections.Counter()
    from bench.bench_broker import record_pool
    from broker.protocol.records import BatchBuilder

    pool = record_pool(64)

    async def produce_loop(i: int, conn) -> None:
        topic = topics[i % len(topics)]
        while True:
            b = BatchBuilder()
            for v in pool[:10]:
                b.append(v)
            try:
                body = await conn["call"](
                    ApiKey.PRODUCE, PRODUCE_V, _produce_body([(topic, i % 10, b.build())])
                )
                bad = _errors(body, "responses", "partition_responses")
                produced["error" if bad else "ok"] += 1
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                produced["failed"] += 1
                return
            await asyncio.sleep(1.0)

    producers = [
        asyncio.create_task(produce_loop(i, c)) for i, c in enumerate(opened[: args.producing])
    ]
    loop = asyncio.get_running_loop()
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if line == "check":
            for task in producers:
                task.cancel()
            await asyncio.gather(*producers, return_exceptions=True)

            async def ping(conn) -> bool:
                try:
                    body = await conn["call"](ApiKey.API_VERSIONS, API_VERSIONS_V, {})
                    return body["error_code"] == 0
                except (TimeoutError, OSError, asyncio.IncompleteReadError):
                    return False

            t0 = time.perf_counter()
            ok = await asyncio.gather(*(ping(c) for c in opened))
            _say(
                {
                    "event": "check",
                    "served": sum(ok),
                    "opened": len(opened),
                    "seconds": time.perf_counter() - t0,
                    "produced": dict(produced),
                }
            )
        elif line in ("quit", ""):
            for c in opened:
                c["w"].close()
            return


def role_hold(args) -> dict:
    _raise_nofile()
    asyncio.run(_hold(args))
    return {"event": "done"}


_print_lock = threading.Lock()


def _say(obj: dict) -> None:
    with _print_lock:
        print(json.dumps(obj), flush=True)


def role_members(args) -> dict:
    """One consumer of each of `--groups` groups (member index `--member`); stdin
    commands: go (subscribe all), leave (close all), quit."""
    from confluent_kafka import Consumer

    stop = threading.Event()
    consumers = []
    for g in range(args.groups):
        c = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{args.port}",
                "group.id": f"scale-g{g}",
                "client.id": f"scale-g{g}-m{args.member}",
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            }
            | GROUP_SETTINGS
        )
        consumers.append(c)

    def run(g: int, c) -> None:
        def on_assign(consumer, partitions) -> None:
            _say(
                {
                    "event": "assign",
                    "g": g,
                    "m": args.member,
                    "t": time.time(),
                    "parts": sorted(p.partition for p in partitions),
                }
            )

        def on_revoke(consumer, partitions) -> None:
            _say({"event": "revoke", "g": g, "m": args.member, "t": time.time()})

        c.subscribe([GROUP_TOPIC], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            c.poll(0.1)
        c.close()

    _say({"event": "ready", "m": args.member})
    threads = []
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "go":
            threads = [
                threading.Thread(target=run, args=(g, c), daemon=True)
                for g, c in enumerate(consumers)
            ]
            for t in threads:
                t.start()
        elif cmd in ("leave", "quit"):
            stop.set()
            t0 = time.time()
            for t in threads:
                t.join(60)
            _say({"event": "left", "m": args.member, "t": t0, "closed_s": time.time() - t0})
            break
    return {"event": "done"}


def _commit_body(group: str, offset: int) -> dict:
    parts = [
        {"partition_index": p, "committed_offset": offset, "committed_metadata": ""}
        for p in range(GROUP_PARTITIONS)
    ]
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": GROUP_TOPIC, "partitions": parts}],
    }


COMMIT_V, FIND_COORDINATOR_V = 8, 4
TICKS_PER_S = 10


def role_commit(args) -> dict:
    """Every group commits once a second, the groups spread over TICKS_PER_S ticks;
    prints a `ready` line once every group's first commit succeeded, then commits
    until stdin says `quit` (or closes), and reports commits made, errors and how
    far behind schedule the ticks ran."""
    from broker.protocol import ApiKey

    w = Wire(args.port)
    groups = [f"scale-commit-g{g}" for g in range(args.groups)]
    for i in range(0, len(groups), 100):
        body = w.request(
            ApiKey.FIND_COORDINATOR,
            FIND_COORDINATOR_V,
            {"key_type": 0, "coordinator_keys": groups[i : i + 100]},
        )
        bad = [c["error_code"] for c in body["coordinators"] if c["error_code"]]
        if bad:
            raise RuntimeError(f"FindCoordinator errors {collections.Counter(bad)}")
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "quit":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    counts: collections.Counter = collections.Counter()
    late_max = 0.0
    per_tick = -(-len(groups) // TICKS_PER_S)
    tick, offset = 0, 0
    t0 = time.monotonic()
    ready = False
    while not stop.is_set():
        due = t0 + tick / TICKS_PER_S
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        else:
            late_max = max(late_max, now - due)
        start = (tick % TICKS_PER_S) * per_tick
        if start == 0:
            offset += 1
        chunk = groups[start : start + per_tick]
        for g in chunk:
            w.send(ApiKey.OFFSET_COMMIT, COMMIT_V, _commit_body(g, offset))
        for _ in chunk:
            body = w.recv(ApiKey.OFFSET_COMMIT, COMMIT_V)
            counts["error" if _errors(body, "topics", "partitions") else "ok"] += 1
        tick += 1
        if not ready and tick == TICKS_PER_S:
            if counts["error"]:
                raise RuntimeError(f"the first commits failed: {dict(counts)}")
            _say({"event": "ready", "commits": counts["ok"]})
            ready = True
    w.close()
    return {
        "event": "done",
        "commits": dict(counts),
        "seconds": time.monotonic() - t0,
        "late_max_s": late_max,
    }


ROLES = {"load": role_load, "hold": role_hold, "members": role_members, "commit": role_commit}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=sorted(ROLES), required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--batch-kib", type=int, default=64)
    ap.add_argument("--record-bytes", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=1, help="load: rounds over the partitions")
    ap.add_argument("--shard", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--connections", type=int, default=None, help="hold: 1000 by default; load: 1")
    ap.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="load: per connection")
    ap.add_argument("--per-request", type=int, default=PER_REQUEST, help="load: partitions")
    ap.add_argument("--topic", default=None, help="load: this topic's pool batches for --seconds")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--records-per-batch", type=int, default=9082)
    ap.add_argument("--distinct", type=int, default=8, help="load: distinct pool batches")
    ap.add_argument("--codec", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="lz4")
    ap.add_argument("--producing", type=int, default=20)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--member", type=int, default=0)
    args = ap.parse_args(argv)
    if args.connections is None:
        args.connections = 1000 if args.role == "hold" else 1
    for name in ("connections", "in_flight", "per_request", "records_per_batch", "distinct"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    print(json.dumps(ROLES[args.role](args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
