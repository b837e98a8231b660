"""The demo's web server stand-in: appends realistic nginx lines to an access log.

Run by `logflume up` as `python -m logflume.demo --output FILE --rate N`. Lines come
from `spark_etl.loggen` (the same generator the tests and benchmarks use) over
windows of one hour starting now, so their timestamps follow the wall clock; line i
of a window is written when the clock reaches it, in small batches every `TICK`
seconds. After a stall the generator catches up at most one second of lines.
`--backfill-seconds N` first writes the N seconds of traffic before now (only into a
new, empty file, so a restart does not write history twice): the near-real-time job
then has complete minutes to report as soon as it starts. When the
file passes `--rotate-bytes` it is renamed to `FILE.1` (replacing an older one) and a
new file is started, as logrotate would, so the agent's rotation handling runs too.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spark_etl import loggen

TICK = 0.1
WINDOW = 3600
REPORT_EVERY = 60.0


def _windows(rate: float, seed: int, bad_ratio: float):
    """Endless nginx lines, `rate` per second of their timestamps, starting now."""
    start = datetime.now(UTC).replace(microsecond=0)
    for n in itertools.count():
        begin = start + timedelta(seconds=n * WINDOW)
        end = begin + timedelta(seconds=WINDOW)
        count = max(1, int(rate * WINDOW))
        yield from loggen.lines(begin, end, count, seed=seed + n, bad_ratio=bad_ratio)


class AccessLog:
    """An append-only file rotated by size; used by one thread."""

    def __init__(self, path: Path, rotate_bytes: int):
        self.path = path
        self.rotate_bytes = rotate_bytes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "ab")

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.file.flush()
        if self.rotate_bytes and self.file.tell() >= self.rotate_bytes:
            self.file.close()
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            self.file = open(self.path, "ab")

    def close(self) -> None:
        self.file.close()


def backfill(log: AccessLog, seconds: int, rate: float, seed: int, bad_ratio: float) -> int:
    end = datetime.now(UTC).replace(microsecond=0)
    count = int(seconds * rate)
    history = loggen.lines(
        end - timedelta(seconds=seconds), end, count, seed=seed - 1, bad_ratio=bad_ratio
    )
    while chunk := list(itertools.islice(history, 10_000)):
        log.write("".join(line + "\n" for line in chunk).encode())
    return count


def run(
    output: Path, rate: float, seed: int, bad_ratio: float, rotate_bytes: int, backfill_seconds: int
) -> None:
    log = AccessLog(output, rotate_bytes)
    if backfill_seconds > 0 and log.file.tell() == 0:
        count = backfill(log, backfill_seconds, rate, seed, bad_ratio)
        print(f"wrote {count} lines of the last {backfill_seconds}s into {output}", flush=True)
    lines = _windows(rate, seed, bad_ratio)
    print(f"appending ~{rate:g} nginx lines/s to {output}", flush=True)
    began = last_report = time.monotonic()
    written = 0
    try:
        while True:
            now = time.monotonic()
            due = int((now - began) * rate) - written
            if due > rate:  # we were stalled: drop the backlog instead of a huge burst
                skipped = due - int(rate)
                collections.deque(itertools.islice(lines, skipped), maxlen=0)
                written += skipped
                due = int(rate)
            if due > 0:
                batch = "".join(line + "\n" for line in itertools.islice(lines, due))
                log.write(batch.encode())
                written += due
            if now - last_report >= REPORT_EVERY:
                print(f"{written} lines written so far", flush=True)
                last_report = now
            time.sleep(TICK)
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logflume.demo", description=__doc__)
    parser.add_argument("--output", type=Path, required=True, help="access log to append to")
    parser.add_argument("--rate", type=float, default=200.0, help="lines per second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bad-ratio", type=float, default=0.002, help="share of unparsable lines")
    parser.add_argument("--rotate-bytes", type=int, default=64 << 20, help="0 = never rotate")
    parser.add_argument(
        "--backfill-seconds", type=int, default=0, help="history to write first, into a new file"
    )
    args = parser.parse_args(argv)
    if args.rate <= 0:
        parser.error("--rate must be positive")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        run(
            args.output,
            args.rate,
            args.seed,
            args.bad_ratio,
            args.rotate_bytes,
            args.backfill_seconds,
        )
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
