"""Side-by-side figures of two git revisions: does a change make anything slower?

    .venv/bin/python -m bench.compare_revisions --base fb7c9e1 \\
        --modules bench.bench_log,bench.bench_broker --mode quick --rounds 3

Each revision is checked out into its own git worktree (its records-check C extension
built in place: `setup.py` at the root before it became native/recordscheck),
and every benchmark module with the figure protocol (`figures(mode)`, see
bench/report.py) runs there as `python -m bench --child`, the two revisions
alternating round by round (base first in odd rounds, head first in even ones), so
both see the same machine load. The table gives each figure's median per revision
and head/base: on a shared, noisy machine a ratio measured side by side in one run is
the figure to trust, not either absolute value.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NATIVE = Path("native/recordscheck")


def checkout(rev: str, into: Path) -> Path:
    """A worktree of `rev` with the records-check extension built; reused if present."""
    if not into.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev],
            check=True,
            capture_output=True,
        )
    for where in (into, into / NATIVE):
        if (where / "setup.py").exists():
            subprocess.run(
                [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                cwd=where,
                check=True,
                capture_output=True,
            )
    return into


def pythonpath(tree: Path) -> str:
    """The tree first, then its own build of the records check (not the venv's)."""
    return os.pathsep.join(str(p) for p in (tree, tree / NATIVE) if p.exists())


def run_module(tree: Path, module: str, mode: str) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        out = Path(tmp) / "figures.json"
        cmd = [sys.executable, "-m", "bench", "--child", module, "--mode", mode, "--out", str(out)]
        env = dict(os.environ, PYTHONPATH=pythonpath(tree))
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not out.exists():
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit(f"{module} failed in {tree} (exit {proc.returncode})")
        return json.loads(out.read_text())


def number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compare_revisions", description=__doc__)
    ap.add_argument("--base", required=True, help="the revision to compare against")
    ap.add_argument("--head", default="HEAD", help="the revision under test (default HEAD)")
    ap.add_argument("--modules", required=True, help="comma list, e.g. bench.bench_broker")
    ap.add_argument("--mode", default="quick", choices=["quick", "default", "full"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench-revs")
    args = ap.parse_args(argv)

    trees = {}
    for label, rev in (("base", args.base), ("head", args.head)):
        sha = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", rev],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        trees[label] = (sha, checkout(sha, args.workdir / sha))
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    units: dict[tuple[str, str], str] = {}
    print(f"load before: {loadavg()}", flush=True)
    for n in range(args.rounds):
        order = ("base", "head") if n % 2 == 0 else ("head", "base")
        for module in args.modules.split(","):
            for label in order:
                for f in run_module(trees[label][1], module.strip(), args.mode):
                    key = (f["area"], f["metric"])
                    values.setdefault(key, {"base": [], "head": []})[label].append(f["value"])
                    units[key] = f.get("unit", "")
        print(f"round {n + 1}/{args.rounds} done, load {loadavg()}", flush=True)

    base_sha, head_sha = trees["base"][0], trees["head"][0]
    print(f"\n{args.mode} mode, {args.rounds} rounds, load after: {loadavg()}\n")
    print(f"| figure | unit | base {base_sha} median | head {head_sha} median | head/base |")
    print("|---|---|---:|---:|---:|")
    for key, got in values.items():
        if not got["base"] or not got["head"]:
            continue
        b, h = statistics.median(got["base"]), statistics.median(got["head"])
        ratio = f"{h / b:.2f}" if b else "-"
        print(f"| {key[0]}: {key[1]} | {units[key]} | {number(b)} | {number(h)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
