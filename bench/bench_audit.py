"""The audit finds one line lost among millions: how long `logflume audit --recount`
takes to name it once its minute has closed.

    .venv/bin/python -m bench.bench_audit                  # 10,000,000 lines
    .venv/bin/python -m bench.bench_audit --lines 1000000

A local broker (testkit.procs.BrokerProcess) and the agent's kafka sink, in this
process, fed from a memory channel: `--lines` distinct lines of ~100 bytes from one
host, all with a time of their own in one minute that closed five minutes ago (so
the bucket is closed when the last line is delivered). Under the sink, one line it
counts as delivered is never produced (a loss after the agent, as a broken broker
or disk would cause). Then `logflume audit --recount` runs as an operator runs it:
it reads the audit topic and recounts the topic (every record's XXH64), and must
name the host, the minute and 1 missing line. Its wall time is the detection time
from the moment the minute closed, when a scheduled audit starts then (`--serve`
adds at most its `--interval`, 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.api import Event  # noqa: E402
from agent.channels.memory import MemoryChannel  # noqa: E402
from agent.metrics import Registry  # noqa: E402
from common.aio import within  # noqa: E402
from common.audit import MINUTE_MS, minute_of, minute_text  # noqa: E402
from sinks.kafka import KafkaSink  # noqa: E402
from sinks.kafka.producer import SinkProducer  # noqa: E402
from testkit.procs import BrokerProcess  # noqa: E402

TOPIC = "audited"
HOST = "bench-host"
BATCH = 20_000


def drop_one(value: bytes) -> None:
    """Every SinkProducer made from now on skips `value` once, reporting it delivered."""
    init = SinkProducer.__init__

    def patched(producer, settings):
        init(producer, settings)
        real = producer.produce
        pending = [value]

        def produce(topic, v, *args, **kwargs):
            if pending and topic == TOPIC and v == pending[0]:
                pending.clear()
                args[2](None, None)  # (key, partition, on_delivery, ...): "delivered"
                return
            real(topic, v, *args, **kwargs)

        producer.produce = produce

    SinkProducer.__init__ = patched


async def ship(bootstrap: str, n: int, when: int, tmp: Path) -> float:
    """Deliver `n` lines through the sink; their delivery rate."""
    import logging

    from agent.api import Ack, Context

    def context(name):
        return Context("bench", name, Registry(), str(tmp), logging.getLogger(name))

    channel = MemoryChannel(MemoryChannel.Config(capacity=200_000), context("mem"))
    config = KafkaSink.Config(
        topic=TOPIC, bootstrap_servers=bootstrap, batch_events=BATCH, linger_ms=20
    )
    sink = asyncio.create_task(KafkaSink(config, context("k")).run(channel))
    delivered = asyncio.Event()
    ack = Ack(delivered.set, copies=n)
    headers = {"host": HOST}
    started = time.monotonic()
    try:
        for first in range(0, n, BATCH):
            await channel.put(
                [
                    Event(
                        b"GET /item/%010d HTTP/1.1 200 %d bench line" % (i, i % 997),
                        headers,
                        None,
                        ack,
                        when + i % MINUTE_MS,
                    )
                    for i in range(first, min(n, first + BATCH))
                ]  # fmt: skip
            )
        await within(delivered.wait(), 600)
    finally:
        sink.cancel()
        await asyncio.gather(sink, return_exceptions=True)
    return n / (time.monotonic() - started)


def run(n: int) -> dict:
    print(f"load average at start: {os.getloadavg()}", flush=True)
    when = minute_of(int(time.time() * 1000)) - 5 * MINUTE_MS
    lost = b"GET /item/%010d HTTP/1.1 200 %d bench line" % (n // 2, (n // 2) % 997)
    drop_one(lost)
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp_s:
        tmp = Path(tmp_s)
        broker = BrokerProcess(tmp / "broker").start()
        try:
            rate = asyncio.run(ship(broker.bootstrap, n, when, tmp))
            print(f"{n:,} lines delivered at {rate:,.0f} lines/s", flush=True)
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "logflume", "audit", "--bootstrap-server",
                 broker.bootstrap, "--recount", "--from", "1h", "--format", "json"],
                capture_output=True, text=True, timeout=900,
            )  # fmt: skip
            seconds = time.monotonic() - started
        finally:
            broker.stop()
    report = json.loads(proc.stdout)
    (bucket,) = [b for b in report["buckets"] if b["topic"] == TOPIC]
    named = (bucket["host"], bucket["minute"], bucket["status"], bucket["difference"])
    found = named == (HOST, minute_text(when), "missing", -1) and proc.returncode == 3
    print(f"audit --recount: {seconds:.1f} s, exit {proc.returncode}, verdict {named}")
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return {"lines": n, "seconds": seconds, "found": found, "named": named, "rate": rate}


def figures(mode: str) -> list[dict]:
    n = {"quick": 1_000_000, "default": 10_000_000, "full": 10_000_000}[mode]
    r = run(n)
    return [
        {
            "area": "audit",
            "metric": f"1 line lost among {n:,}: logflume audit --recount names it in",
            "value": r["seconds"],
            "unit": "s",
            "target": "<= 120",
            "reference": "issue 35: within 2 minutes of the bucket closing",
            "ok": r["found"] and r["seconds"] <= 120,
            "detail": f"verdict {r['named']}; the lines were shipped at {r['rate']:,.0f}"
            " lines/s by the kafka sink in this process (at-least-once, audit on)",
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    args = parser.parse_args()
    r = run(args.lines)
    sys.exit(0 if r["found"] else 1)


if __name__ == "__main__":
    main()
