"""HTTP traffic for one web host's nginx: `python -m testkit.loadgen --port P ...`.

Runs inside the web host (the fleet lab starts it in the host's namespaces), asks
`127.0.0.1:<port>` over one keep-alive connection for a mix that gives every status
class and many body sizes (the site the fleet lab's nginx serves: `/static/s<k>`,
a missing path, a redirect, a 500), each request with a unique `?n=<seq>`, so that
every access-log line is distinct and can be found exactly once downstream. It
paces itself to `--rate` requests per second for `--seconds`, then to
`--tail-rate` until SIGTERM (the light traffic that keeps event time moving so
that the realtime job can close the last busy minute). On exit it prints one JSON
line: the requests it made per status code. With `--record FILE` it also writes
the wall-clock time each response arrived, one per line (the probes of
bench/bench_fleet.py's freshness).
"""

from __future__ import annotations

import argparse
import collections
import http.client
import random
import signal
import sys
import time

import orjson

STATIC_FILES = 10  # /static/s0 .. s9, s<k> is 100 * k + 17 bytes
MIX = (("static", 80), ("missing", 10), ("moved", 5), ("boom", 5))


def site_files() -> dict[str, bytes]:
    """The files of the web root, by path: what the lab's nginx serves."""
    return {f"static/s{k}": b"x" * (100 * k + 17) for k in range(STATIC_FILES)}


def request_path(rng: random.Random, seq: int) -> str:
    kind = rng.choices([k for k, _ in MIX], weights=[w for _, w in MIX])[0]
    if kind == "static":
        return f"/static/s{rng.randrange(STATIC_FILES)}?n={seq}"
    if kind == "missing":
        return f"/missing/{seq}"
    return f"/{kind}?n={seq}"


def run(
    port: int, rate: float, seconds: float, tail_rate: float, seed: int, times: list | None = None
) -> dict:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    rng = random.Random(seed)
    statuses: collections.Counter = collections.Counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    start = next_at = time.monotonic()
    seq = 0
    while not stop:
        now = time.monotonic()
        busy = now - start < seconds
        if not busy and tail_rate <= 0:
            break
        if now < next_at:
            time.sleep(min(next_at - now, 0.2))
            continue
        next_at += 1.0 / (rate if busy else tail_rate)
        next_at = max(next_at, now - 1.0)  # after a stall, no burst beyond one second
        seq += 1
        try:
            conn.request("GET", request_path(rng, seq), headers={"User-Agent": "fleet-loadgen"})
            resp = conn.getresponse()
            resp.read()
            statuses[resp.status] += 1
            if times is not None:
                times.append(time.time())
        except (OSError, http.client.HTTPException):
            statuses["error"] += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.close()
    return dict(statuses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.loadgen", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rate", type=float, default=100.0, help="requests/s while busy")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the busy phase")
    parser.add_argument("--tail-rate", type=float, default=0.0, help="requests/s afterwards")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", help="write each response's arrival time to this file")
    args = parser.parse_args(argv)
    times = [] if args.record else None
    counts = run(args.port, args.rate, args.seconds, args.tail_rate, args.seed, times)
    if args.record:
        with open(args.record, "w") as out:
            out.write("".join(f"{t:.6f}\n" for t in times))
    sys.stdout.write(orjson.dumps({str(k): v for k, v in counts.items()}).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
