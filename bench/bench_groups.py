"""Consumer groups and idempotent-producer state: what they cost.

    .venv/bin/python -m bench.bench_groups              # ~30 s
    .venv/bin/python -m bench.bench_groups --repeats 9 --no-broker

Cases (each repeated, cases interleaved, medians quoted):
- append: a 1 KiB single-batch `PartitionLog.append` alone, vs the same batch with
  producer id through `ProducerStateManager.check` + append + `update` (the wired
  produce path, plus one extra header parse the wired path does not need): the
  relative overhead of de-duplication; and check + update alone;
- snapshot: write and load a snapshot of 10,000 producers (5 batches each);
- coordinator: OffsetCommit of 10 partitions and a 100-member rebalance (join of
  every member + leader sync), pure, over an in-memory store;
- broker (unless --no-broker): synchronous offset commits per second from
  confluent-kafka against a broker subprocess on loopback.
"""

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _batch(pid: int, seq: int) -> bytes:
    from broker.protocol.records import BatchBuilder

    b = BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    for i in range(8):
        b.append(b"x" * 100, key=b"k%d" % i, timestamp_ms=1_700_000_000_000)
    return b.build()


def bench_append(tmp: Path, n: int) -> tuple[float, float]:
    """Median µs per append: (plain, with producer state)."""
    from broker.log import LogConfig, PartitionLog
    from broker.log.producer_state import ProducerStateManager
    from broker.protocol.records import RecordBatch

    plain_batch = _batch(-1, -1)
    idem = [_batch(7, seq * 8) for seq in range(n)]
    plog = PartitionLog(tmp / f"plain-{time.monotonic_ns()}-0", LogConfig())
    state = ProducerStateManager(plog.dir)
    t0 = time.perf_counter()
    for _ in range(n):
        plog.append(plain_batch)
    plain = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for records in idem:
        batch = RecordBatch(records)
        if state.check(batch).append:
            info = plog.append(records)
            state.update(batch, info.first_offset, info.last_offset, 0)
    with_state = (time.perf_counter() - t0) / n * 1e6
    plog.close()
    return plain, with_state


def bench_check_update(n: int) -> float:
    """Median µs of ProducerStateManager.check + update for in-sequence batches."""
    from broker.log.producer_state import ProducerStateManager
    from broker.protocol.records import RecordBatch

    state = ProducerStateManager(Path(tempfile.gettempdir()))
    batches = [RecordBatch(_batch(7, seq * 8)) for seq in range(n)]
    t0 = time.perf_counter()
    for i, b in enumerate(batches):
        if state.check(b).append:
            state.update(b, i * 8, i * 8 + 7, 0)
    return (time.perf_counter() - t0) / n * 1e6


def bench_snapshot(tmp: Path, producers: int) -> tuple[float, float]:
    """ms to write and to load a snapshot of `producers` producers."""
    from broker.log.producer_state import ProducerStateManager
    from broker.protocol.records import RecordBatch

    d = tmp / f"snap-{time.monotonic_ns()}"
    d.mkdir()
    state = ProducerStateManager(d)
    offset = 0
    for pid in range(producers):
        for seq in range(5):
            b = RecordBatch(_batch(pid, seq * 8))
            state.update(b, offset, offset + 7, 1_700_000_000_000)
            offset += 8
    t0 = time.perf_counter()
    state.take_snapshot(offset)
    write_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    ProducerStateManager(d).load(0, offset, lambda o: iter(()), 1_700_000_000_000)
    load_ms = (time.perf_counter() - t0) * 1e3
    return write_ms, load_ms


class _MemoryStore:
    async def append(self, partition: int, records: bytes) -> int:
        return 0

    def read_all(self, partition: int):
        return ()


async def _coordinator_case(commits: int, members: int) -> tuple[float, float]:
    from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator

    coord = GroupCoordinator(_MemoryStore(), CoordinatorConfig(initial_rebalance_delay_ms=0))
    for p in range(50):
        coord.load_partition(p, 0)
    offsets = {("t", p): (100, -1, "") for p in range(10)}
    t0 = time.perf_counter()
    for i in range(commits):
        await coord.commit_offsets("simple", "", None, -1, offsets, i)
    commit_us = (time.perf_counter() - t0) / commits * 1e6

    protocols = [("range", b"\x00" * 40)]
    first = await coord.join_group(
        "big", "", None, "c", "/h", 10_000, 30_000, "consumer", protocols, False, 0
    )
    await coord.sync_group("big", first.member_id, None, 1, {first.member_id: b""}, 0)
    t0 = time.perf_counter()
    joins = [
        asyncio.ensure_future(
            coord.join_group(
                "big", "", None, "c", "/h", 10_000, 30_000, "consumer", protocols, False, 1
            )
        )
        for _ in range(members - 1)
    ]
    joins.append(
        asyncio.ensure_future(
            coord.join_group(
                "big",
                first.member_id,
                None,
                "c",
                "/h",
                10_000,
                30_000,
                "consumer",
                protocols,
                False,
                1,
            )
        )
    )
    results = await asyncio.gather(*joins)
    leader = next(r for r in results if r.members)
    assignment = {m.member_id: b"a" * 20 for m in leader.members}
    syncs = [
        coord.sync_group("big", r.member_id, None, r.generation_id, assignment, 2)
        for r in results
        if r is not leader
    ]
    syncs.append(coord.sync_group("big", leader.member_id, None, 2, assignment, 2))
    await asyncio.gather(*syncs)
    rebalance_ms = (time.perf_counter() - t0) * 1e3
    return commit_us, rebalance_ms


def bench_broker_commits(seconds: float) -> float:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.procs import BrokerProcess

    tmp = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    broker = BrokerProcess(tmp / "data", settings={"group.initial.rebalance.delay.ms": 0})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("bench-commit", 4, 1)])["bench-commit"].result(10)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "bench",
                "enable.auto.commit": False,
            }
        )
        parts = [TopicPartition("bench-commit", p, 0) for p in range(4)]
        consumer.commit(offsets=parts, asynchronous=False)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for tp in parts:
                tp.offset = n
            consumer.commit(offsets=parts, asynchronous=False)
            n += 1
        rate = n / (time.perf_counter() - t0)
        consumer.close()
        return rate
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--appends", type=int, default=20_000)
    ap.add_argument("--no-broker", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    rows: dict[str, list[float]] = {}
    try:
        for _ in range(args.repeats):
            plain, idem = bench_append(tmp, args.appends)
            rows.setdefault("append 1 KiB batch, plain (µs)", []).append(plain)
            rows.setdefault("append with producer state (µs)", []).append(idem)
            rows.setdefault("producer-state overhead (ratio)", []).append(idem / plain)
            rows.setdefault("check + update alone (µs)", []).append(
                bench_check_update(args.appends)
            )
            w, ld = bench_snapshot(tmp, 10_000)
            rows.setdefault("snapshot write, 10k producers (ms)", []).append(w)
            rows.setdefault("snapshot load, 10k producers (ms)", []).append(ld)
            commit_us, rebalance_ms = asyncio.run(_coordinator_case(2000, 100))
            rows.setdefault("coordinator OffsetCommit of 10 partitions (µs)", []).append(commit_us)
            rows.setdefault("coordinator 100-member rebalance (ms)", []).append(rebalance_ms)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not args.no_broker:
        rows["broker: sync commits/s, confluent-kafka (4 partitions)"] = [bench_broker_commits(3.0)]
    width = max(len(k) for k in rows)
    for name, values in rows.items():
        print(f"{name:<{width}}  median {statistics.median(values):10.2f}  (n={len(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
