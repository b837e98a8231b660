"""Start-up: how long a broker takes from its process start to accepting connections,
and `logflume transactions list` (a command that speaks the protocol itself) from
its start to its answer. Every broker a test starts, every restart of one and every
such command pays it.

    .venv/bin/python -m bench.bench_startup --trees /tmp/bench-revs/b319fc5,. --rounds 7

compares source trees side by side: each round starts one broker (and runs one
command) of each tree, the trees' order alternating, and the medians per tree are
printed with their ratio to the first tree's. In the figure protocol
(`figures(mode)`) it measures this tree alone.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROUNDS = {"quick": 3, "default": 7, "full": 15}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _env(tree: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(tree))


def one_round(tree: Path) -> tuple[float, float]:
    """(seconds from spawning `logflume broker` of `tree` to its port accepting,
    seconds of a `transactions list` of `tree` asking that broker)."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as data:
        cmd = [sys.executable, "-m", "logflume", "broker", "--data-dir", data]
        cmd += ["--listen", f"127.0.0.1:{port}"]
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=tree, env=_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            while not _accepting(port):
                if proc.poll() is not None or time.perf_counter() - started > 30:
                    raise SystemExit(f"the broker of {tree} did not start")
                time.sleep(0.005)
            broker = time.perf_counter() - started
            cmd = [sys.executable, "-m", "logflume", "transactions"]
            cmd += ["--bootstrap-server", f"127.0.0.1:{port}", "list"]
            started = time.perf_counter()
            subprocess.run(
                cmd, cwd=tree, env=_env(tree), check=True, capture_output=True, timeout=60
            )
            command = time.perf_counter() - started
        finally:
            proc.terminate()
            proc.wait(30)
    return broker, command


def figures(mode: str) -> list[dict]:
    rounds = [one_round(REPO) for _ in range(ROUNDS[mode])]
    return [
        {
            "area": "broker",
            "metric": f"broker start to accepting connections (median of {len(rounds)})",
            "value": round(statistics.median(r[0] for r in rounds) * 1000),
            "unit": "ms",
            "target": "",
            "reference": "",
            "peer": "",
        },
        {
            "area": "broker",
            "metric": f"`logflume transactions list` against it (median of {len(rounds)})",
            "value": round(statistics.median(r[1] for r in rounds) * 1000),
            "unit": "ms",
            "target": "",
            "reference": "",
            "peer": "",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", required=True, help="source trees, comma-separated")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    got: dict[Path, list[tuple[float, float]]] = {t: [] for t in trees}
    for i in range(args.rounds):
        for tree in trees if i % 2 == 0 else trees[::-1]:
            got[tree].append(one_round(tree))
    base = trees[0]
    print(f"load average {os.getloadavg()[0]:.2f} after {args.rounds} rounds")
    for tree in trees:
        broker = statistics.median(r[0] for r in got[tree])
        command = statistics.median(r[1] for r in got[tree])
        ratio_b = broker / statistics.median(r[0] for r in got[base])
        ratio_c = command / statistics.median(r[1] for r in got[base])
        print(
            f"{tree}: broker start {broker * 1000:.0f} ms ({ratio_b:.2f}x), "
            f"transactions list {command * 1000:.0f} ms ({ratio_c:.2f}x)"
        )


if __name__ == "__main__":
    main()
