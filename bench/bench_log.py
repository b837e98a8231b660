"""Storage engine benchmark (issue 2): append throughput vs raw os.write, per-append
cost against log size, random reads, recovery after SIGKILL.

    .venv/bin/python -m bench.bench_log                 # 0.5 GiB, a couple of minutes
    .venv/bin/python -m bench.bench_log --size-gib 4    # the full run (needs ~10 GB free)
    .venv/bin/python -m bench.bench_log --size-gib 4 --flat   # per-tenth append cost only

A child process writes a raw file and the log in alternating 64 MiB blocks (so
both see the same page-cache and writeback state), deletes the raw file, measures reads,
checkpoints the recovery point once the roll fsyncs are done, and waits; the parent
SIGKILLs it and times opening the data directory again (recovery). All data is
deleted at the end. Batches are 16 KiB, built once and appended as bytes.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH_BYTES = 16 * 1024
BLOCK = 4096  # appends per alternating block (64 MiB)


def make_batch() -> bytes:
    from broker.protocol.records import BatchBuilder

    rng = random.Random(7)
    b = BatchBuilder()
    for _ in range(16):
        b.append(
            bytes(rng.getrandbits(8) for _ in range(BATCH_BYTES // 16 - 26)),
            timestamp_ms=1_700_000_000_000,
        )
    return b.build()


def index_append_cost(dir: Path, n: int = 200_000) -> dict:
    """An index entry of the active segment (kept in memory, written at flush) vs an
    8-byte os.write per entry (the 'append' alternative)."""
    from broker.log import OffsetIndex

    idx = OffsetIndex(dir / "bench.index", 0, 8 * n, active=True)
    t0 = time.perf_counter()
    for i in range(n):
        idx.append(i, i)
    entry = (time.perf_counter() - t0) / n
    idx.delete()
    fd = os.open(dir / "bench.append", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    data = b"\x00" * 8
    t0 = time.perf_counter()
    for _ in range(n):
        os.write(fd, data)
    wr = (time.perf_counter() - t0) / n
    os.close(fd)
    os.unlink(dir / "bench.append")
    return {"index_entry_us": entry * 1e6, "index_entry_write_us": wr * 1e6}


def flat(dir: Path, size_gib: float) -> list[tuple[float, float]]:
    """Append-only run with an untimed sync before each tenth: per-tenth medians of
    wall and thread-CPU time per append, free of other writers' page-cache pressure."""
    from broker.log import LogConfig, PartitionLog

    batch = make_batch()
    log = PartitionLog(dir / "flat-0", LogConfig(retention_ms=-1))
    tenth = int(size_gib * 1024**3) // len(batch) // 10
    rows = []
    for _ in range(10):
        os.sync()
        wall, cpu = [], []
        for _ in range(tenth):
            a, c = time.perf_counter_ns(), time.thread_time_ns()
            log.append(batch)
            wall.append(time.perf_counter_ns() - a)
            cpu.append(time.thread_time_ns() - c)
        rows.append((statistics.median(wall) / 1000, statistics.median(cpu) / 1000))
    log.delete()
    print("tenth  wall_median_us  cpu_median_us")
    for i, (w, c) in enumerate(rows):
        print(f"{i + 1:5}  {w:14.2f}  {c:13.2f}")
    print(f"last/first wall {rows[-1][0] / rows[0][0]:.3f}  cpu {rows[-1][1] / rows[0][1]:.3f}")
    return rows


def child(dir: Path, size_gib: float, segment_bytes: int, reads: int) -> None:
    from broker.log import LogConfig, LogManager

    batch = make_batch()
    # just under the size, so the active segment is nearly full: the worst case to recover
    n = int(size_gib * 1024**3) // len(batch) - 100
    out = {"batch_bytes": len(batch), "appends": n}
    out.update(index_append_cost(dir))
    os.sync()
    config = LogConfig(segment_bytes=segment_bytes, retention_ms=-1)
    manager = LogManager(dir / "data", config)
    log = manager.create("bench", 0, config)
    raw_fd = os.open(dir / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    raw_times, log_times = [0] * n, [0] * n
    raw_cpu, log_cpu = (
        [0] * n,
        [0] * n,
    )  # thread CPU time: excludes sleeping in writeback throttling
    cpu = time.thread_time_ns
    raw_total = log_total = 0.0
    clock = time.perf_counter_ns
    append, write = log.append, os.write
    # raw writes and appends alternate in 64 MiB blocks, so both see the same machine;
    # before the last 10% a sync (untimed) gives both the writeback state of the start
    tenth = max(1, n // 10)
    starts = sorted(set(range(0, n, BLOCK)) | {n - tenth}) + [n]
    for start, stop in zip(starts, starts[1:], strict=False):
        if start == n - tenth:
            os.sync()
        t0 = time.perf_counter()
        for i in range(start, stop):
            a, c = clock(), cpu()
            write(raw_fd, batch)
            raw_times[i], raw_cpu[i] = clock() - a, cpu() - c
        t1 = time.perf_counter()
        for i in range(start, stop):
            a, c = clock(), cpu()
            append(batch)
            log_times[i], log_cpu[i] = clock() - a, cpu() - c
        raw_total += t1 - t0
        log_total += time.perf_counter() - t1
    os.close(raw_fd)
    os.unlink(dir / "raw.bin")
    for name, times, total in (("raw", raw_times, raw_total), ("append", log_times, log_total)):
        first, last = statistics.median(times[:tenth]), statistics.median(times[-tenth:])
        out[f"{name}_mib_s"] = n * len(batch) / total / 2**20
        out[f"{name}_median_us"] = statistics.median(times) / 1000
        out[f"{name}_median_first10pct_us"] = first / 1000
        out[f"{name}_median_last10pct_us"] = last / 1000
        out[f"{name}_last_over_first"] = last / first
    for name, times in (("raw", raw_cpu), ("append", log_cpu)):
        first, last = statistics.median(times[:tenth]), statistics.median(times[-tenth:])
        out[f"{name}_cpu_median_first10pct_us"] = first / 1000
        out[f"{name}_cpu_median_last10pct_us"] = last / 1000
        out[f"{name}_cpu_last_over_first"] = last / first
    out["append_vs_raw_throughput"] = out["append_mib_s"] / out["raw_mib_s"]
    out["segments"] = len(log.segments)
    rng = random.Random(1)
    end = log.log_end_offset
    for label, max_bytes, copy in (
        ("read_slice_1MiB", 1 << 20, False),
        ("read_copy_64KiB", 1 << 16, True),
    ):
        lat = []
        for _ in range(reads):
            offset = rng.randrange(end)
            a = clock()
            piece = log.read(offset, max_bytes)
            if copy:
                piece.read_bytes()
            lat.append(clock() - a)
        out[f"{label}_median_us"] = statistics.median(lat) / 1000
        out[f"{label}_p99_us"] = sorted(lat)[int(len(lat) * 0.99)] / 1000
    log.local_log.reap_flushes(wait=True)  # the server's periodic checkpoint runs after roll fsyncs
    manager.checkpoint_recovery_points()
    out["recovery_point"] = log.recovery_point
    out["log_end_offset"] = log.log_end_offset
    print(json.dumps(out), flush=True)
    time.sleep(3600)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-gib", type=float, default=0.5)
    parser.add_argument(
        "--segment-mib",
        type=int,
        default=None,
        help="default: 1024 (Kafka's), or size/4 for small runs",
    )
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir in /tmp)")
    parser.add_argument("--flat", action="store_true", help="only the per-tenth append cost run")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    segment_bytes = (args.segment_mib or min(1024, max(16, int(args.size_gib * 1024 / 4)))) * 2**20
    if args.child:
        child(Path(args.child), args.size_gib, segment_bytes, args.reads)
        return
    dir = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    if args.flat:
        try:
            flat(dir, args.size_gib)
        finally:
            shutil.rmtree(dir, ignore_errors=True)
        return
    result = interleaved(dir, args.size_gib, segment_bytes, args.reads)
    for key, value in result.items():
        print(f"{key:32} {value:.3f}" if isinstance(value, float) else f"{key:32} {value}")


def interleaved(dir: Path, size_gib: float, segment_bytes: int, reads: int) -> dict:
    """The child's run (raw vs log, reads), then SIGKILL and timed recovery; removes `dir`."""
    from broker.log import LogConfig, LogManager

    try:
        cmd = [sys.executable, "-m", "bench.bench_log", "--child", str(dir)]
        cmd += ["--size-gib", str(size_gib)]
        cmd += ["--segment-mib", str(segment_bytes // 2**20), "--reads", str(reads)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        result = json.loads(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.perf_counter()
        manager = LogManager(dir / "data", LogConfig(segment_bytes=segment_bytes, retention_ms=-1))
        result["recovery_s"] = time.perf_counter() - t0
        log = manager.get("bench", 0)
        result["recovered_log_end_offset"] = log.log_end_offset
        result["rescanned_bytes"] = sum(
            s.size
            for s in log.segments
            if s.base_offset >= result["recovery_point"] or s is log.active
        )
        manager.close()
    finally:
        shutil.rmtree(dir, ignore_errors=True)
    result["size_gib"] = size_gib
    result["segment_bytes"] = segment_bytes
    return result


def figures(mode: str) -> list[dict]:
    size = {"quick": 0.25, "default": 4.0, "full": 4.0}[mode]
    segment_bytes = min(1024, max(16, int(size * 1024 / 4))) * 2**20
    print(f"interleaved raw/log run, {size:g} GiB each", flush=True)
    r = interleaved(Path(tempfile.mkdtemp(prefix="bench-log-")), size, segment_bytes, 20_000)
    print(f"flat append-only run, {size:g} GiB", flush=True)
    dir = Path(tempfile.mkdtemp(prefix="bench-log-"))
    try:
        rows = flat(dir, size)
    finally:
        shutil.rmtree(dir, ignore_errors=True)
    issue = "issue 2" + ("" if size >= 4 else f" (over 4 GiB; this run {size:g} GiB, --full for 4)")
    return [
        {
            "area": "log",
            "metric": f"append throughput / raw os.write, 16 KiB batches, {size:g} GiB",
            "value": r["append_vs_raw_throughput"],
            "unit": "ratio",
            "target": ">= 0.7",
            "reference": "issue 2",
            "peer": f"log {r['append_mib_s']:,.0f} MiB/s vs raw os.write {r['raw_mib_s']:,.0f} MiB/s",
        },
        {
            "area": "log",
            "metric": "per-append median, last 10 % / first 10 % (log alone, sync per tenth)",
            "value": rows[-1][0] / rows[0][0],
            "unit": "ratio",
            "target": "<= 1.2",
            "reference": issue,
            "detail": "tenth medians "
            + ", ".join(f"{w:.1f}" for w, _ in rows)
            + f" µs; inside the interleaved run {r['append_last_over_first']:.2f}"
            f" (raw os.write alongside {r['raw_last_over_first']:.2f})",
        },
        {
            "area": "log",
            "metric": "random read(offset, 1 MiB), median",
            "value": r["read_slice_1MiB_median_us"],
            "unit": "µs",
            "target": "< 50",
            "reference": issue,
            "detail": f"p99 {r['read_slice_1MiB_p99_us']:.0f} µs; with a 64 KiB copy"
            f" {r['read_copy_64KiB_median_us']:.0f} µs",
        },
        {
            "area": "log",
            "metric": "recovery after SIGKILL",
            "value": r["recovery_s"],
            "unit": "s",
            "target": "<= 2",
            "reference": issue,
            "detail": f"rescanned {r['rescanned_bytes'] / 2**20:,.0f} MiB (the active segment)",
        },
    ]


if __name__ == "__main__":
    main()
