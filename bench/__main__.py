"""`make bench`: run every benchmark under bench/ and rewrite bench/RESULTS.md.

    .venv/bin/python -m bench                      # the documented runs (~20-30 min)
    .venv/bin/python -m bench --quick              # short runs: a smoke check (~5 min)
    .venv/bin/python -m bench --full               # longer runs (Spark job over 10 M lines, ...)
    .venv/bin/python -m bench --only broker,groups # some areas; the others' sections stay

Each benchmark module runs in its own subprocess, so one that crashes does not stop
the others. A module with the figure protocol (`figures(mode)`, see bench/report.py)
is run through `python -m bench --child MODULE`, which writes its figures as JSON; a
module without it is run with its own command line, its output is kept in an
appendix, and its hand-written section of RESULTS.md stays as it was. While a module
runs, its output lines are shown behind `[area +mm:ss]`, and a line every 30 s says
it is still running when it is quiet. The figures of each area are kept in
bench/results.json, so a run with `--only` rewrites the whole report: the areas it did
not measure come from their latest run (dated in the report).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from bench import report

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "RESULTS.md"
NOTES = BENCH / "NOTES.md"
STORE = BENCH / "results.json"  # the latest figures of every area, for --only runs
PLOTS = BENCH / "plots"
HEARTBEAT_S = 30.0
LIBRDKAFKA_LOG = re.compile(r"^%\d\|")
TIMEOUT_S = {"quick": 900, "default": 2400, "full": 7200}
# command-line arguments for modules without figures(), per mode ("default": none)
OWN_CLI_ARGS = {
    "bench.bench_agent": {
        "quick": ["--lines", "200000", "--runs", "1", "--udp-seconds", "3"],
        "full": ["--lines", "1000000", "--runs", "3", "--udp-seconds", "30"],
    },
    "bench.bench_sources": {"quick": ["--lines", "200000", "--repeat", "1", "--udp-seconds", "2"]},
    "bench.bench_spark": {
        "quick": ["--records", "200000", "--job-lines", "50000", "--repeat", "1"],
        "full": ["--records", "4000000", "--job-lines", "10000000"],
    },
    "bench.bench_cluster": {},
    "bench.bench_reassign": {
        "quick": ["--gib", "0.05", "--throttle-mb", "5", "--baseline", "5"],
        "full": ["--gib", "10", "--throttle-mb", "100"],
    },
    "bench.bench_share": {"quick": ["--records", "20000", "--runs", "1"]},
}


def has_figures(module: str) -> bool:
    """Whether the module's source defines `figures(` at top level (without importing it)."""
    path = REPO / (module.replace(".", "/") + ".py")
    return bool(re.search(r"^def figures\(", path.read_text(), re.M))


def unlisted_modules() -> list[str]:
    """bench/bench_*.py modules that no area lists: run too, with their own CLI."""
    listed = {m for a in report.AREAS for m in a.modules}
    found = (f"bench.{p.stem}" for p in sorted(BENCH.glob("bench_*.py")))
    return [m for m in found if m not in listed]


def module_exists(module: str) -> bool:
    return (REPO / (module.replace(".", "/") + ".py")).exists()


def merge_stored(figures: list[dict], meta: dict) -> list[dict]:
    """Store this run's figures per area in bench/results.json and return them with
    the stored figures of the areas this run did not measure (so `--only` keeps one
    whole report); those areas' loads in `meta` get the date of their run."""
    stored = json.loads(STORE.read_text()) if STORE.exists() else {}
    fresh = {f["area"] for f in figures}
    for key in fresh:
        stored[key] = {
            "date": meta["date"],
            "load": meta["area_loads"].get(key, "?"),
            "figures": [f for f in figures if f["area"] == key],
        }
    STORE.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n")
    merged = []
    for a in report.AREAS:
        if a.key in fresh:
            merged += [f for f in figures if f["area"] == a.key]
        elif a.key in stored:
            merged += stored[a.key]["figures"]
            meta["area_loads"][a.key] = f"{stored[a.key]['load']}, run {stored[a.key]['date']}"
    return merged + [f for f in figures if f["area"] not in {a.key for a in report.AREAS}]


def child(module: str, mode: str, out: Path) -> int:
    figures = importlib.import_module(module).figures(mode)
    for f in figures:
        missing = {"area", "metric", "value"} - set(f)
        if missing:
            raise ValueError(f"{module}: figure {f!r} lacks {sorted(missing)}")
    out.write_text(json.dumps(figures))
    return 0


class Run:
    """One module's subprocess with its output relayed live; owned by the main thread."""

    def __init__(self, label: str, argv: list[str]):
        self.label = label
        self.start = time.monotonic()
        self.tail: collections.deque[str] = collections.deque(maxlen=60)
        self.last_line = self.start
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self.reader = threading.Thread(target=self._relay, daemon=True)
        self.reader.start()

    def prefix(self) -> str:
        elapsed = int(time.monotonic() - self.start)
        return f"[{self.label} +{elapsed // 60:02d}:{elapsed % 60:02d}]"

    def _relay(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if not LIBRDKAFKA_LOG.match(line):  # connection chatter: shown, not kept
                self.tail.append(line)
            self.last_line = time.monotonic()
            print(f"{self.prefix()} {line}", flush=True)

    def wait(self, timeout: float) -> int:
        deadline = self.start + timeout
        while True:
            try:
                code = self.proc.wait(timeout=5)
                self.reader.join(5)
                return code
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if now > deadline:
                    print(f"{self.prefix()} timed out after {timeout:.0f}s; killing it", flush=True)
                    self.proc.kill()
                    self.proc.wait()
                    return -9
                if now - self.last_line >= HEARTBEAT_S:
                    self.last_line = now
                    print(f"{self.prefix()} still running", flush=True)


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, Linux {platform.release()},"
        f" CPython {platform.python_version()}"
    )


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--only", default="", help="comma list of areas: " + ", ".join(a.key for a in report.AREAS)
    )
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="short runs, for a smoke check")
    size.add_argument(
        "--full", action="store_true", help="the full-size runs (10 M-line Spark job, ...)"
    )
    ap.add_argument(
        "--output", type=Path, default=RESULTS, help="report file (default bench/RESULTS.md)"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="default", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.mode, args.out)

    mode = "quick" if args.quick else "full" if args.full else "default"
    wanted = {a.strip() for a in args.only.split(",") if a.strip()}
    unknown = wanted - {a.key for a in report.AREAS}
    if unknown:
        ap.error(f"unknown area(s): {', '.join(sorted(unknown))}")
    areas = [a for a in report.AREAS if not wanted or a.key in wanted]
    if not wanted and unlisted_modules():
        areas.append(report.Area("other", "Other benchmarks", tuple(unlisted_modules())))
    load_before = loadavg()
    started = datetime.now().astimezone()
    figures: list[dict] = []
    raw_outputs: dict[str, str] = {}
    failed: list[str] = []
    t0 = time.monotonic()
    area_loads: dict[str, str] = {}
    for a in areas:
        area_loads[a.key] = loadavg()
        for module in a.modules:
            if not module_exists(module):
                print(f"[{a.key}] {module}: no such module, skipped", flush=True)
                continue
            with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
                out = Path(tmp) / "figures.json"
                if has_figures(module):
                    cmd = [sys.executable, "-m", "bench", "--child", module, "--mode", mode]
                    cmd += ["--out", str(out)]
                else:
                    cmd = [
                        sys.executable,
                        "-m",
                        module,
                        *OWN_CLI_ARGS.get(module, {}).get(mode, []),
                    ]
                print(f"[{a.key}] running {' '.join(cmd[2:])} (load {loadavg()})", flush=True)
                run = Run(a.key, cmd)
                code = run.wait(TIMEOUT_S[mode])
                if code != 0:
                    failed.append(f"{module} (exit {code})")
                    print(f"[{a.key}] {module} FAILED with exit code {code}", flush=True)
                elif out.exists():
                    figures += json.loads(out.read_text())
                else:
                    raw_outputs[module] = "\n".join(run.tail)
    elapsed = time.monotonic() - t0
    command = "python -m bench" + (f" --{mode}" if mode != "default" else "")
    command += f" --only {args.only}" if args.only else ""
    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M %Z"),
        "command": command,
        "machine": machine(),
        "load": f"{load_before} before, {loadavg()} after ({elapsed / 60:.0f} min run)",
        "failed": ", ".join(failed),
        "area_loads": area_loads,
    }
    if args.output == RESULTS:
        figures = merge_stored(figures, meta)
    try:
        links = report.plots(figures, PLOTS)
    except Exception as exc:  # a report without plots beats no report
        print(f"plots failed: {exc!r}", flush=True)
        links = {}
    old = args.output.read_text() if args.output.exists() else ""
    notes = NOTES.read_text() if NOTES.exists() else ""
    args.output.write_text(report.render(figures, meta, old, notes, links, raw_outputs))
    print(f"wrote {args.output} ({len(figures)} figures, {elapsed / 60:.1f} min)", flush=True)
    for f in figures:
        v = report.verdict(f)
        if v:
            print(f"  {v:12} {f['area']}: {f['metric']} = {report.fmt_value(f)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
