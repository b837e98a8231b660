"""Produce throughput with broker metrics on and off, side by side in one run.

    .venv/bin/python -m bench.bench_metrics [--rounds 5] [--seconds 8]

"Off" is a broker without `metrics.listen`; "on" serves /metrics and is scraped
every second while it works (Prometheus usually scrapes every 15-60 s: one second
is the harsh case; each scrape walks every partition of the broker). The broker
counts its events in both (the counters are plain numbers bumped on the event loop);
what "on" adds is the server and the scrapes. Each round starts a fresh broker per
variant, alternating which goes first, and runs two workloads of 2 producer
processes, acks=1, 6 partitions, lz4 (bench_broker's producer role):

    large batches   linger.ms 50, batch.num.messages 100000 (bench_broker's default)
    small batches   linger.ms 50, batch.num.messages 100: many more requests per
                    record, where per-request costs (latency histogram, error walk) show

The figure is on/off of the median records/s per workload (target >= 0.97). With
metrics on it also gives the broker's CPU per produce request (its requests counter),
to set the metrics' own cost per request against.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import urllib.request

from bench.bench_broker import PARTITIONS, Broker, produce_run
from common.ports import free_port
from testkit.scrape import scrape

WORKLOADS = {"large batches": 100_000, "small batches": 100}
SCRAPE_EVERY_S = 1.0


class Scraper(threading.Thread):
    """GET /metrics every second until stopped; counts the scrapes and their bytes."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.stopped = threading.Event()
        self.scrapes = 0
        self.bytes = 0

    def run(self) -> None:
        while not self.stopped.wait(SCRAPE_EVERY_S):
            with urllib.request.urlopen(self.url, timeout=10) as r:
                self.bytes += len(r.read())
            self.scrapes += 1


def _produce_requests(port: int) -> float:
    return scrape(port).get("logflume_broker_requests_total", api="Produce") or 0.0


def one(variant: str, seconds: float) -> dict[str, float]:
    settings, scraper = {}, None
    if variant == "on":
        port = free_port()
        settings["metrics.listen"] = f"127.0.0.1:{port}"
    broker = Broker("asyncio", settings=settings)
    try:
        if variant == "on":
            scraper = Scraper(port)
            scraper.start()
        rates = {}
        for name, batch in WORKLOADS.items():
            topic = f"metrics-{batch}"
            broker.create_topic(topic, PARTITIONS)
            before = _produce_requests(port) if scraper else 0
            cpu = broker.cpu_seconds()
            r = produce_run(broker, topic, seconds, 2, acks=1, batch_messages=batch)
            rates[name] = r["rate"]
            if scraper is not None:
                requests = _produce_requests(port) - before
                rates[f"{name}: broker CPU us per produce request"] = (
                    (broker.cpu_seconds() - cpu) / requests * 1e6
                )
        if scraper is not None:
            scraper.stopped.set()
            scraper.join(15)
            assert scraper.scrapes >= seconds, f"only {scraper.scrapes} scrapes"
            rates["scrape bytes"] = scraper.bytes / scraper.scrapes
        return rates
    finally:
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternating on/off rounds")
    ap.add_argument("--seconds", type=float, default=8, help="produce time per workload")
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for r in range(args.rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for variant in order:
            rates = one(variant, args.seconds)
            runs[variant].append(rates)
            shown = ", ".join(f"{k} {v:,.0f}" for k, v in rates.items())
            print(f"round {r + 1} metrics {variant}: {shown}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(
        "| workload (2 producers, acks=1, 6 partitions) | off, records/s | on, records/s | on/off |"
    )
    print("|---|---:|---:|---:|")
    for name in WORKLOADS:
        off = statistics.median(x[name] for x in runs["off"])
        on = statistics.median(x[name] for x in runs["on"])
        print(f"| {name} | {off:,.0f} | {on:,.0f} | {on / off:.3f} |")
    size = statistics.median(x["scrape bytes"] for x in runs["on"])
    print(f"one scrape: {size:,.0f} bytes")
    for name in WORKLOADS:
        key = f"{name}: broker CPU us per produce request"
        print(f"{key} (metrics on): {statistics.median(x[key] for x in runs['on']):,.0f}")


if __name__ == "__main__":
    main()
