"""Share groups (KIP-932) against classic consumer groups: records per second
acknowledged by 3 share consumers of one share group vs consumed by 3 consumers of
one classic group, over the same 3-partition topic of a broker subprocess.

    .venv/bin/python -m bench.bench_share                  # 200,000 records x 3 runs
    .venv/bin/python -m bench.bench_share --records 1000 --runs 1   # a smoke check

Each consumer is a process of its own (confluent-kafka 2.16: `ShareConsumer` in
implicit acknowledgement mode, each poll accepting the previous poll's records;
`Consumer` with auto-commit). The consumers join first; for the share group,
b"warm" records go to every partition until each partition's share-partition exists
(it starts at the high watermark); then the records are produced (acks=all,
lz4) while the consumers run. The clock runs from the first record a consumer got to
the moment the last one was got: the figure is the slower of producing and
consuming, the same producer for both cases. Runs alternate the cases; medians are
quoted. The share figure also pays for the share-partition's durable state: every
acknowledgement waits for its write to `__share_group_state`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.procs import BrokerProcess  # noqa: E402

CONSUMERS = 3
PARTITIONS = 3


def _consume(kind: str, bootstrap: str, topic: str, group: str, total, got, first, last, stop):
    """One consumer process: counts what it gets into the shared counters."""
    from confluent_kafka import Consumer, ShareConsumer

    if kind == "share":
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    else:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
            }
        )
    consumer.subscribe([topic])
    while not stop.is_set():
        if kind == "share":
            messages = list(consumer.poll(0.5))
        else:
            messages = consumer.consume(500, 0.5)
        data = [m for m in messages if m.error() is None and m.value() != b"warm"]
        warm = [m for m in messages if m.error() is None and m.value() == b"warm"]
        now = time.monotonic()
        with got.get_lock():
            for m in warm:
                got[m.partition()] = 1  # this partition's share-partition exists
            if data:
                if first.value == 0:
                    first.value = now
                total.value += len(data)
                last.value = now
    consumer.close()


def run_case(kind: str, bootstrap: str, records: int, run: int) -> float:
    """Records per second for one case."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"bench-{kind}-{run}", f"bench-{kind}-{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    total = multiprocessing.Value("q", 0)
    got = multiprocessing.Array("i", PARTITIONS)
    first = multiprocessing.Value("d", 0.0)
    last = multiprocessing.Value("d", 0.0)
    stop = multiprocessing.Event()
    procs = [
        multiprocessing.Process(
            target=_consume, args=(kind, bootstrap, topic, group, total, got, first, last, stop)
        )
        for _ in range(CONSUMERS)
    ]
    for p in procs:
        p.start()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 5}
    )
    deadline = time.monotonic() + 120
    if kind == "share":
        while not all(got[:]):
            if time.monotonic() > deadline:
                raise RuntimeError("the share consumers never got the warm-up records")
            for partition in range(PARTITIONS):
                producer.produce(topic, b"warm", partition=partition)
            producer.flush(30)
            time.sleep(0.3)
    else:
        time.sleep(5)  # the classic group's first rebalance
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)
    deadline = time.monotonic() + 300
    while total.value < records and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for p in procs:
        p.join(60)
    if total.value < records:
        raise RuntimeError(f"{kind}: {total.value} of {records} records consumed")
    return records / max(last.value - first.value, 1e-6)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    rates: dict[str, list[float]] = {"share": [], "classic": []}
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            for run in range(args.runs):
                for kind in ("share", "classic") if run % 2 == 0 else ("classic", "share"):
                    rate = run_case(kind, broker.bootstrap, args.records, run)
                    rates[kind].append(rate)
                    print(f"run {run} {kind}: {rate:,.0f} records/s", flush=True)
        finally:
            broker.stop()
    for kind, values in rates.items():
        print(
            f"{kind}: median {statistics.median(values):,.0f} records/s over {len(values)} run(s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
