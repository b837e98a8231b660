"""HTTP traffic for one web host's nginx: `python -m testkit.loadgen --port P ...`.

Runs inside the web host (the fleet lab starts it in the host's namespaces), asks
`127.0.0.1:<port>` over one keep-alive connection (requests pipelined, a batch
every 20 ms) for a mix that gives every status class and many body sizes (the site
the fleet lab's nginx serves: `/static/s<k>`, a missing path, a redirect, a 500),
each request with a unique `?n=<seq>`, so that every access-log line is distinct
and can be found exactly once downstream. It
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
import random
import signal
import socket
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


TICK_S = 0.02  # requests due are sent together every tick, pipelined
USER_AGENT = "fleet-loadgen"


def run(
    port: int, rate: float, seconds: float, tail_rate: float, seed: int, times: list | None = None
) -> dict:
    """Ask for `rate` requests/s for `seconds`, then `tail_rate` until SIGTERM.

    Requests due are written together every TICK_S on one keep-alive connection
    (HTTP/1.1 pipelining, which nginx answers in order) and their responses read
    before the next tick: a few microseconds of Python per request, where a
    request-response loop of http.client cost ~350 us of CPU, a third of a core at
    625 requests/s, on the machine whose cores the fleet figures measure."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    rng = random.Random(seed)
    statuses: collections.Counter = collections.Counter()
    conn: Pipeline | None = None
    start = time.monotonic()
    sent = 0.0  # requests owed so far, fractional
    seq = 0
    last = start
    while not stop:
        now = time.monotonic()
        busy = now - start < seconds
        if not busy and tail_rate <= 0:
            break
        # after a stall, no burst beyond one second's worth
        sent += min(now - last, 1.0) * (rate if busy else tail_rate)
        last = now
        due = int(sent)
        sent -= due
        if due:
            paths = [request_path(rng, seq + i + 1) for i in range(due)]
            seq += due
            try:
                conn = conn or Pipeline(port)
                for status in conn.exchange(paths):
                    statuses[status] += 1
                    if times is not None:
                        times.append(time.time())
            except (OSError, ValueError):
                statuses["error"] += due
                if conn is not None:
                    conn.close()
                conn = None
        time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
    if conn is not None:
        conn.close()
    return dict(statuses)


class Pipeline:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:`port` that sends requests
    in batches and reads their responses in order."""

    def __init__(self, port: int):
        self.port = port
        self._connect()

    def _connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.buf = b""

    def exchange(self, paths: list[str]):
        """Send GETs of `paths`; yield each response's status as it is read.

        nginx ends a keep-alive connection after `keepalive_requests` (1,000): it
        answers that request with `Connection: close` and ignores those pipelined
        after it, which go again on a new connection."""
        pending = paths
        while pending:
            self.sock.sendall(
                "".join(
                    f"GET {p} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {USER_AGENT}\r\n\r\n"
                    for p in pending
                ).encode()
            )
            answered = 0
            while answered < len(pending):
                status, closing = self._response()
                answered += 1
                yield status
                if closing:
                    self.close()
                    self._connect()
                    break
            pending = pending[answered:]

    def _response(self) -> tuple[int, bool]:
        """The next response's status, and whether the server closes after it."""
        while (head_end := self.buf.find(b"\r\n\r\n")) < 0:
            self._fill()
        head = self.buf[:head_end].lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            raise ValueError(f"response without Content-Length: {head[:200]!r}")
        value_end = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : value_end if value_end > 0 else len(head)])
        end = head_end + 4 + length
        while len(self.buf) < end:
            self._fill()
        status = int(self.buf[9:12])
        self.buf = self.buf[end:]
        return status, b"\r\nconnection: close" in head

    def _fill(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("nginx closed the connection")
        self.buf += data

    def close(self) -> None:
        self.sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.loadgen", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rate", type=float, default=100.0, help="requests/s while busy")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the busy phase")
    parser.add_argument("--tail-rate", type=float, default=0.0, help="requests/s afterwards")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", help="write each response's arrival time to this file")
    args = parser.parse_args(argv)
    times: list[float] | None = [] if args.record else None
    counts = run(args.port, args.rate, args.seconds, args.tail_rate, args.seed, times)
    if times is not None:
        with open(args.record, "w") as out:
            out.write("".join(f"{t:.6f}\n" for t in times))
    sys.stdout.write(orjson.dumps({str(k): v for k, v in counts.items()}).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
