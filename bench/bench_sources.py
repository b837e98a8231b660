"""Agent sources and parsers in isolation (no channel, no broker).

    .venv/bin/python -m bench.bench_sources                     # 1M lines, 5 s of UDP
    .venv/bin/python -m bench.bench_sources --lines 2000000 --udp-seconds 30

1. tail read+split: a file of nginx lines from spark_etl.loggen (~200 bytes each)
   is read by the `tail` source (`start_at: beginning`, 256 KiB chunks, batches of
   1,000) into an emit that does nothing, then into one that settles every event
   (the Ack/position path); lines/s from start until the last line was emitted.
2. nginx parsing: the `nginx` interceptor over the same lines in batches of 1,000;
   then parsing plus `orjson.dumps(record)` (what a JSON sink adds).
3. UDP: a sender process paces datagrams (one ~200-byte line each) at `--udp-rate`
   for `--udp-seconds`; the `udp` source receives into an offer that only counts.
   Loss = sent - received; the kernel's UDP RcvbufErrors delta is shown too.

Each throughput figure is the median of `--repeat` runs, as wall-clock lines/s and
as lines per CPU-second of this process (steadier on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402

from agent.api import Context, Event  # noqa: E402
from agent.interceptors.nginx import NginxParser  # noqa: E402
from agent.metrics import Registry  # noqa: E402
from common.ports import free_port  # noqa: E402
from sources.tail import TailSource  # noqa: E402
from sources.udp import UdpSource  # noqa: E402
from spark_etl.loggen import lines as loggen_lines  # noqa: E402


def context(state_dir: Path, name: str) -> Context:
    return Context("bench", name, Registry(), str(state_dir), logging.getLogger(name))


def sample_lines(n: int) -> list[bytes]:
    start = datetime(2024, 10, 10, tzinfo=UTC)
    distinct = [s.encode() for s in loggen_lines(start, start + timedelta(hours=1), 50_000, seed=1)]
    return [distinct[i % len(distinct)] for i in range(n)]


async def tail_once(path: Path, n: int, settle: bool) -> float:
    with tempfile.TemporaryDirectory() as state:
        cfg = TailSource.Config(paths=[str(path)], start_at="beginning", watch=False)
        src = TailSource(cfg, context(Path(state), "tail"))
        done = asyncio.Event()
        count = 0

        async def emit(batch: list[Event]) -> None:
            nonlocal count
            if settle:
                for e in batch:
                    e.settle()
            count += len(batch)
            if count >= n:
                done.set()

        t0, c0 = time.perf_counter(), time.process_time()
        task = asyncio.create_task(src.run(emit, None))
        await done.wait()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return n / elapsed, n / cpu


def bench_tail(lines: list[bytes], repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "access.log"
        path.write_bytes(b"\n".join(lines) + b"\n")
        out = {}
        for settle in (False, True):
            runs = [asyncio.run(tail_once(path, len(lines), settle)) for _ in range(repeat)]
            out["tail, emit settles acks" if settle else "tail, no-op emit"] = median2(runs)
        return out


def median2(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def bench_nginx(lines: list[bytes], repeat: int) -> dict[str, float]:
    parser = NginxParser(NginxParser.Config(format="combined_timed"), context(Path("/"), "nginx"))
    out = {}
    for with_json in (False, True):
        runs = []
        for _ in range(repeat):
            batches = [[Event(b) for b in lines[i : i + 1000]] for i in range(0, len(lines), 1000)]
            t0, c0 = time.perf_counter(), time.process_time()
            for batch in batches:
                parser.intercept(batch)
                if with_json:
                    for e in batch:
                        orjson.dumps(e.record)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            runs.append((len(lines) / wall, len(lines) / cpu))
        assert all(e.record is not None for e in batches[0])
        out["nginx parse + orjson.dumps" if with_json else "nginx parse"] = median2(runs)
    return out


def udp_sender(port: int, rate: int, seconds: float, line: bytes, sent) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    per_tick, tick = max(1, rate // 1000), 0.001
    start = time.perf_counter()
    n = 0
    while True:
        now = time.perf_counter()
        if now - start >= seconds:
            break
        due = int((now - start) / tick + 1) * per_tick
        while n < due:
            s.sendto(line, ("127.0.0.1", port))
            n += 1
        time.sleep(max(0.0, start + (n / per_tick) * tick - time.perf_counter()))
    sent.value = n


def rcvbuf_errors() -> int:
    rows = [line.split() for line in Path("/proc/net/snmp").read_text().splitlines()]
    udp = [r for r in rows if r[0] == "Udp:"]
    return int(udp[1][udp[0].index("RcvbufErrors")])


async def bench_udp(rate: int, seconds: float, line: bytes) -> dict[str, float]:
    port = free_port()
    with tempfile.TemporaryDirectory() as state:
        src = UdpSource(UdpSource.Config(listen=f"127.0.0.1:{port}"), context(Path(state), "udp"))
        received = 0

        def offer(batch: list[Event]) -> bool:
            nonlocal received
            received += len(batch)
            return True

        task = asyncio.create_task(src.run(None, offer))
        await asyncio.sleep(0.2)
        kernel_before = rcvbuf_errors()
        sent = multiprocessing.Value("q", 0)
        proc = multiprocessing.Process(target=udp_sender, args=(port, rate, seconds, line, sent))
        t0 = time.perf_counter()
        proc.start()
        await asyncio.to_thread(proc.join)
        elapsed = time.perf_counter() - t0
        await asyncio.sleep(1.0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return {
            "sent": sent.value,
            "received": received,
            "lost": sent.value - received,
            "rate": sent.value / elapsed,
            "kernel_rcvbuf_errors": rcvbuf_errors() - kernel_before,
        }


def figures(mode: str) -> list[dict]:
    n, repeat, udp_seconds = {
        "quick": (200_000, 1, 2.0),
        "default": (1_000_000, 3, 5.0),
        "full": (1_000_000, 3, 30.0),
    }[mode]
    lines = sample_lines(n)
    print(f"{n:,} lines, median of {repeat}", flush=True)
    results = {**bench_tail(lines, repeat), **bench_nginx(lines, repeat)}
    out = [
        {
            "area": "agent",
            "metric": f"in isolation (no channel, no broker): {name}",
            "value": wall,
            "unit": "lines/s",
            "detail": f"{cpu:,.0f} lines per CPU-second",
        }
        for name, (wall, cpu) in results.items()
    ]
    udp = asyncio.run(bench_udp(50_000, udp_seconds, lines[0]))
    out.append(
        {
            "area": "agent",
            "metric": f"in isolation: UDP source at 50,000/s for {udp_seconds:g} s, lost",
            "value": udp["lost"],
            "unit": "datagrams",
            "detail": f"{udp['sent']:,} sent, kernel RcvbufErrors +{udp['kernel_rcvbuf_errors']}",
        }
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--udp-rate", type=int, default=50_000)
    ap.add_argument("--udp-seconds", type=float, default=5.0)
    args = ap.parse_args()
    lines = sample_lines(args.lines)
    avg = sum(map(len, lines)) / len(lines)
    print(f"{args.lines:,} lines, {avg:.0f} bytes on average, median of {args.repeat} runs")
    print(f"  {'':32s} {'lines/s (wall)':>16s} {'lines/CPU-second':>18s}")
    results = {**bench_tail(lines, args.repeat), **bench_nginx(lines, args.repeat)}
    for name, (wall, cpu) in results.items():
        print(f"  {name:32s} {wall:>16,.0f} {cpu:>18,.0f}")
    udp = asyncio.run(bench_udp(args.udp_rate, args.udp_seconds, lines[0]))
    print(
        f"  udp at {args.udp_rate:,}/s for {args.udp_seconds:g} s: sent {udp['sent']:,} "
        f"(actual {udp['rate']:,.0f}/s), received {udp['received']:,}, lost {udp['lost']:,}, "
        f"kernel RcvbufErrors +{udp['kernel_rcvbuf_errors']}"
    )


if __name__ == "__main__":
    main()
