"""The clients of bench/bench_scale.py, each run as its own process:

    python -m bench.scale_clients --role load|hold|members|commit --port PORT [options]

- load: produces whole prebuilt batches over the wire with the broker's own codec
  (Produce v8, acks=1, 16 partitions a request, 8 requests in flight); the batch
  bytes are built once and resent (the broker rewrites baseOffset and leader epoch,
  which the CRC does not cover), so the loader costs almost nothing;
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
import resource
import socket
import struct
import sys
import threading
import time

from common.aio import within

GIB = 1 << 30
MIB = 1 << 20
CLIENT_ID = "bench-scale"
GROUP_TOPIC = "scale-groups"
GROUP_PARTITIONS = 6
GROUP_SETTINGS = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000}
PRODUCE_V, FETCH_V, METADATA_V, API_VERSIONS_V = 8, 11, 8, 2
PER_REQUEST = 16  # partitions per Produce / Fetch request
IN_FLIGHT = 8


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


def _produce_body(parts: list[tuple[str, int]], records: bytes, acks: int = 1) -> dict:
    by_topic: dict[str, list] = {}
    for topic, p in parts:
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

    def send_frame(self, frame: bytes | bytearray) -> int:
        """Send a prebuilt request frame with a fresh correlation id patched in."""
        self.corr += 1
        frame[8:12] = struct.pack(">i", self.corr)
        self.sock.sendall(frame)
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


def role_load(args) -> dict:
    """Produce `--batches` rounds of one batch to each of this shard's partitions."""
    from broker.protocol import ApiKey, encode_request

    layout = partition_layout(args.partitions, args.topics)[args.shard :: args.shards]
    records = _build_batch(args.batch_kib * 1024, args.record_bytes)
    frames = [
        bytearray(
            encode_request(
                ApiKey.PRODUCE,
                PRODUCE_V,
                0,
                CLIENT_ID,
                _produce_body(layout[i : i + PER_REQUEST], records),
            )
        )
        for i in range(0, len(layout), PER_REQUEST)
    ]
    wire = Wire(args.port)
    inflight = 0
    sent_bytes = 0
    errors: collections.Counter = collections.Counter()
    start = time.perf_counter()
    for _ in range(args.batches):
        for frame in frames:
            if inflight >= IN_FLIGHT:
                for code in _errors(
                    wire.recv(ApiKey.PRODUCE, PRODUCE_V), "responses", "partition_responses"
                ):
                    errors[code] += 1
                inflight -= 1
            wire.send_frame(frame)
            inflight += 1
            sent_bytes += len(frame)
    while inflight:
        for code in _errors(
            wire.recv(ApiKey.PRODUCE, PRODUCE_V), "responses", "partition_responses"
        ):
            errors[code] += 1
        inflight -= 1
    elapsed = time.perf_counter() - start
    wire.close()
    return {
        "bytes": args.batches * len(layout) * len(records),
        "wire_bytes": sent_bytes,
        "seconds": elapsed,
        "batch_bytes": len(records),
        "errors": dict(errors),
    }


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
                    ApiKey.PRODUCE, PRODUCE_V, _produce_body([(topic, i % 10)], b.build())
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
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--producing", type=int, default=20)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--member", type=int, default=0)
    args = ap.parse_args(argv)
    print(json.dumps(ROLES[args.role](args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
