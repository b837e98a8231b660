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
import re
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

    from testkit.procs import BrokerProcess

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


class _Member:
    """One confluent-kafka group consumer polled by its own thread; on_assign
    callbacks are timestamped (time.monotonic) into `assignments`. The thread owns
    the consumer; other threads only read `assignments` and set `leave`."""

    def __init__(self, bootstrap: str, group: str, topic: str, settings: dict):
        import threading

        from confluent_kafka import Consumer

        self.assignments: list[tuple[float, frozenset[int]]] = []
        self.leave = threading.Event()
        self.left_at = self.closed_at = 0.0
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
            | settings
        )
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        self.assignments.append((time.monotonic(), frozenset(p.partition for p in partitions)))

    def current(self) -> frozenset[int]:
        return self.assignments[-1][1] if self.assignments else frozenset()

    def _run(self) -> None:
        while not self.leave.is_set():
            self.consumer.poll(0.05)
        self.left_at = time.monotonic()
        self.consumer.close()  # LeaveGroup
        self.closed_at = time.monotonic()


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"rebalance bench: {what} after {timeout:.0f}s")
        time.sleep(0.005)


def _stable(members: list[_Member], everything: frozenset[int]) -> bool:
    owned = [m.current() for m in members]
    return all(owned) and frozenset().union(*owned) == everything


def _one_rebalance(bootstrap: str, group: str, partitions: int, settings: dict) -> float:
    """Four members join; once settled, member 0 close()s; seconds from the close()
    call until the other three each got a new assignment and together own all."""
    everything = frozenset(range(partitions))
    members = [_Member(bootstrap, group, "bench-rebalance", settings) for _ in range(4)]
    try:
        _wait(lambda: _stable(members, everything), 60, "4 members never shared the partitions")
        time.sleep(1.0)  # no rebalance left in flight
        _wait(lambda: _stable(members, everything), 60, "the group did not settle")
        leaver, rest = members[0], members[1:]
        leaver.leave.set()
        _wait(lambda: leaver.left_at > 0, 10, "the leaving member did not stop polling")
        t0 = leaver.left_at

        def reassigned() -> bool:
            fresh = [m.assignments[-1] for m in rest if m.assignments[-1][0] > t0]
            return len(fresh) == 3 and frozenset().union(*(a for _, a in fresh)) == everything

        _wait(reassigned, 60, "the remaining 3 members were not reassigned")
        return max(m.assignments[-1][0] for m in rest) - t0
    finally:
        for m in members:
            m.leave.set()
        for m in members:
            m.thread.join(30)


def bench_rebalance(repeats: int, partitions: int, settings: dict) -> list[float]:
    """Seconds from a member's close() to the other three covering every partition,
    one fresh group per repeat, against a broker subprocess."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from testkit.procs import BrokerProcess

    tmp = Path(tempfile.mkdtemp(prefix="bench-rebalance-"))
    broker = BrokerProcess(tmp / "data", settings={"group.initial.rebalance.delay.ms": 0})
    broker.start()
    times = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        new = NewTopic("bench-rebalance", partitions, 1)
        admin.create_topics([new])["bench-rebalance"].result(10)
        for rep in range(repeats):
            times.append(_one_rebalance(broker.bootstrap, f"rebalance-{rep}", partitions, settings))
            print(f"  rebalance rep {rep + 1}/{repeats}: {times[-1] * 1000:.0f} ms", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return times


IDEMPOTENCE_VARIANTS = {
    "acks=1, max.in.flight 1M, not idempotent (the core benchmark)": {
        "acks": "1",
        "idempotence": "false",
        "max_in_flight": 1_000_000,
    },
    "acks=all, max.in.flight 5, not idempotent": {
        "acks": "all",
        "idempotence": "false",
        "max_in_flight": 5,
    },
    "enable.idempotence=true (acks=all, max.in.flight 5)": {
        "acks": "all",
        "idempotence": "true",
        "max_in_flight": 5,
    },
}


def bench_idempotence(seconds: float, repeats: int) -> dict[str, list[float]]:
    """records/s of each variant on the broker core's produce benchmark (2 producer
    processes, produce_batch of 10k 100-byte records, lz4, linger 50 ms, 6 partitions),
    variants alternating within each repeat, one broker for all."""
    from bench.bench_broker import PARTITIONS, Broker, produce_run

    broker = Broker("asyncio")
    rates: dict[str, list[float]] = {k: [] for k in IDEMPOTENCE_VARIANTS}
    try:
        for rep in range(repeats):
            for name, opts in IDEMPOTENCE_VARIANTS.items():
                topic = f"idem-{rep}-{len(rates[name])}-{opts['idempotence']}-{opts['acks']}"
                broker.create_topic(topic, PARTITIONS)
                r = produce_run(broker, topic, seconds, 2, **opts)
                rates[name].append(r["rate"])
                print(f"  rep {rep + 1}/{repeats} {name}: {r['rate']:,.0f} records/s", flush=True)
    finally:
        broker.stop()
    return rates


REBALANCE_SETTINGS = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000}


def figures(mode: str) -> list[dict]:
    idem_seconds, idem_repeats, rebalance_repeats, repeats = {
        "quick": (3, 1, 2, 1),
        "default": (8, 3, 5, 3),
        "full": (15, 5, 9, 5),
    }[mode]
    median = statistics.median
    out = []
    print(f"idempotent vs plain produce, {idem_repeats} x {idem_seconds}s per variant", flush=True)
    rates = bench_idempotence(idem_seconds, idem_repeats)
    names = list(IDEMPOTENCE_VARIANTS)
    acks1, acks_all, idem = (median(rates[n]) for n in names)
    for name in names:
        out.append(
            {
                "area": "groups",
                "metric": f"produce {name}",
                "value": median(rates[name]),
                "unit": "records/s",
                "detail": "runs " + ", ".join(f"{r:,.0f}" for r in rates[name]),
            }
        )
    out.append(
        {
            "area": "groups",
            "metric": "idempotent / non-idempotent produce, both acks=all max.in.flight 5",
            "value": median(i / a for i, a in zip(rates[names[2]], rates[names[1]], strict=True)),
            "unit": "ratio",
            "target": ">= 0.9",
            "reference": "issue 4: idempotence costs at most 10 %",
            "detail": f"median of the per-repeat ratios of adjacent {idem_seconds} s runs"
            f" ({idem_repeats} repeats; ratio of the medians {idem / acks_all:.2f}), 2 producer"
            " processes, confluent-kafka, otherwise identical settings",
        }
    )
    out.append(
        {
            "area": "groups",
            "metric": "idempotent / acks=1 non-idempotent produce (the core benchmark's settings)",
            "value": idem / acks1,
            "unit": "ratio",
        }
    )
    print(f"group of 4 consumers, one leaves, {rebalance_repeats} repeats", flush=True)
    times = bench_rebalance(rebalance_repeats, 12, REBALANCE_SETTINGS)
    out.append(
        {
            "area": "groups",
            "metric": "rebalance of 4 confluent-kafka consumers after one close()s: until the"
            " other 3 own all 12 partitions, median",
            "value": median(times) * 1000,
            "unit": "ms",
            "reference": "issue 4 (no number given)",
            "detail": f"{rebalance_repeats} repeats: "
            + ", ".join(f"{t * 1000:.0f}" for t in times)
            + " ms; group.initial.rebalance.delay.ms=0 on the broker, session.timeout.ms"
            f" {REBALANCE_SETTINGS['session.timeout.ms']}, heartbeat.interval.ms"
            f" {REBALANCE_SETTINGS['heartbeat.interval.ms']}, eager range assignor"
            " (librdkafka default); timed from the close() call to the last on_assign",
        }
    )
    print(f"coordinator and producer-state micro-benchmarks, {repeats} repeats", flush=True)
    rows = micro(repeats, 20_000 if mode != "quick" else 5_000)
    rows["broker: sync commits/s, confluent-kafka (4 partitions)"] = [bench_broker_commits(3.0)]
    for name, values in rows.items():
        unit = re.search(r"\((µs|ms|ratio)\)$", name)
        out.append(
            {
                "area": "groups",
                "metric": re.sub(r" \((µs|ms|ratio)\)$", "", name),
                "value": median(values),
                "unit": unit.group(1) if unit else "commits/s",
            }
        )
    return out


def micro(repeats: int, appends: int) -> dict[str, list[float]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    rows: dict[str, list[float]] = {}
    try:
        for _ in range(repeats):
            plain, idem = bench_append(tmp, appends)
            rows.setdefault("append 1 KiB batch, plain (µs)", []).append(plain)
            rows.setdefault("append with producer state (µs)", []).append(idem)
            rows.setdefault("producer-state overhead (ratio)", []).append(idem / plain)
            rows.setdefault("check + update alone (µs)", []).append(bench_check_update(appends))
            w, ld = bench_snapshot(tmp, 10_000)
            rows.setdefault("snapshot write, 10k producers (ms)", []).append(w)
            rows.setdefault("snapshot load, 10k producers (ms)", []).append(ld)
            commit_us, rebalance_ms = asyncio.run(_coordinator_case(2000, 100))
            rows.setdefault("coordinator OffsetCommit of 10 partitions (µs)", []).append(commit_us)
            rows.setdefault("coordinator 100-member rebalance (ms)", []).append(rebalance_ms)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--appends", type=int, default=20_000)
    ap.add_argument("--no-broker", action="store_true", help="skip the broker subprocess cases")
    ap.add_argument("--rebalance-repeats", type=int, default=5)
    ap.add_argument(
        "--idempotence-seconds",
        type=float,
        default=0,
        help="seconds per idempotent/plain produce run (0: skip; 8 in `make bench`)",
    )
    args = ap.parse_args(argv)
    rows = micro(args.repeats, args.appends)
    if not args.no_broker:
        rows["broker: sync commits/s, confluent-kafka (4 partitions)"] = [bench_broker_commits(3.0)]
        times = bench_rebalance(args.rebalance_repeats, 12, REBALANCE_SETTINGS)
        rows["rebalance of 4 consumers after one leaves (ms)"] = [t * 1000 for t in times]
    if args.idempotence_seconds > 0:
        for name, rates in bench_idempotence(args.idempotence_seconds, args.repeats).items():
            rows[f"produce {name} (records/s)"] = rates
    width = max(len(k) for k in rows)
    for name, values in rows.items():
        print(f"{name:<{width}}  median {statistics.median(values):10.2f}  (n={len(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
