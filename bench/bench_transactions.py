"""Transactional produce throughput against idempotent produce, side by side.

    .venv/bin/python -m bench.bench_transactions [--rounds 3] [--seconds 8]

One broker; per round and variant a fresh 6-partition topic and one confluent-kafka
producer in this process (lz4, linger.ms 50, batch.num.messages 100000, the 100-byte
log lines of bench_broker), producing for --seconds, then the final flush or commit:
records/s over the whole run. The order of the variants alternates per round.

    idempotent        enable.idempotence (acks=all), no transactions
    txn/100k, txn/10k one transaction per 100,000 / 10,000 records
                      (begin, produce, commit_transaction: AddPartitionsToTxn for the
                      six partitions, EndTxn, six markers, acks=all throughout)

The figure is the transactional rate over the idempotent one (median per variant).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time

from bench.bench_broker import PARTITIONS, Broker, record_pool

VARIANTS = {"idempotent": 0, "txn/100k": 100_000, "txn/10k": 10_000}
BASE = {
    "compression.type": "lz4",
    "linger.ms": 50,
    "batch.num.messages": 100_000,
    "batch.size": 1 << 20,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1 << 20,
}


def produce(broker: Broker, topic: str, seconds: float, per_txn: int, tid: str) -> float:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": broker.bootstrap, **BASE}
    if per_txn:
        conf["transactional.id"] = tid
    else:
        conf["enable.idempotence"] = True
    p = Producer(conf)
    if per_txn:
        p.init_transactions(30)
    pool = itertools.cycle(record_pool())
    sent, start = 0, time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        if per_txn:
            p.begin_transaction()
        chunk = per_txn or 10_000
        for _ in range(chunk):
            while True:
                try:
                    p.produce(topic, next(pool), partition=sent % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
            sent += 1
        if per_txn:
            p.commit_transaction(60)
        else:
            p.poll(0)
    assert p.flush(60) == 0
    return sent / (time.monotonic() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--seconds", type=float, default=8, help="produce time per variant")
    args = ap.parse_args()
    broker = Broker("asyncio")
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        for r in range(args.rounds):
            order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
            for variant in order:
                topic = f"bench-{variant.replace('/', '-')}-{r}"
                broker.create_topic(topic, PARTITIONS)
                rate = produce(broker, topic, args.seconds, VARIANTS[variant], f"bench-{r}")
                rates[variant].append(rate)
                print(f"round {r + 1} {variant}: {rate:,.0f} records/s", flush=True)
    finally:
        broker.stop()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    base = statistics.median(rates["idempotent"])
    print("| variant (1 producer, 6 partitions, lz4) | median records/s | vs idempotent |")
    print("|---|---:|---:|")
    for variant, values in rates.items():
        median = statistics.median(values)
        print(f"| {variant} | {median:,.0f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
