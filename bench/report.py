"""The benchmark report: figures in, one markdown file (and PNG plots) out.

The figure protocol. A benchmark module under `bench/` that takes part defines

    def figures(mode: str) -> list[dict]      # mode: "quick" | "default" | "full"

and returns one dict per measured figure:

    area       key of the report section ("broker", "groups", "log", ...; AREAS below)
    metric     what was measured, with its conditions ("produce acks=1, 6 partitions")
    value      a number (or a short string such as "0 lost")
    unit       "records/s", "ms", "MiB/s", "ratio", ... ("" for none)
    target     "" or a comparison with the issue's number: ">= 1000000", "<= 5"
    reference  "" or where the target or a comparable figure comes from
               ("Kafka 2014: 821,557 records/s on three 6-core brokers")
    peer       "" or the peer measured in the same run ("Redis Streams XADD 395,291/s")

and optionally `ok` (True/False: a verdict for a target that is not a number),
`plot` + `x` (a point of a named plot, see `plots()`), `detail` (a short note shown
under the table). It prints progress lines on stdout while it runs; `bench/__main__.py`
runs it in a subprocess and collects the list as JSON.

Everything here is pure (markdown in, markdown out) except `plots()`, which writes
PNG files with matplotlib's Agg backend.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Area:
    """A report section: its key, heading, and the modules that measure it."""

    key: str
    heading: str
    modules: tuple[str, ...]


AREAS = (
    Area("physical", "Physical limits", ("bench.physical",)),
    Area("protocol", "Wire codec", ("bench.bench_protocol",)),
    Area("log", "Storage engine (issue 2)", ("bench.bench_log",)),
    Area("broker", "Broker core (issue 3)", ("bench.bench_broker", "bench.bench_startup")),
    Area("groups", "Consumer groups and idempotent producer (issue 4)", ("bench.bench_groups",)),
    Area("agent", "Agent (issue 5)", ("bench.bench_agent", "bench.bench_sources")),
    Area(
        "spark",
        "Spark ETL (issue 6)",
        ("bench.bench_spark", "bench.bench_spark_decode", "bench.bench_freshness"),
    ),
    Area("cluster", "Cluster (issue 7)", ("bench.bench_cluster",)),
    Area("scale", "Broker at scale", ("bench.bench_scale",)),
    Area("tls", "TLS and SASL listeners (security, parts 1 and 2)", ("bench.bench_tls",)),
    Area("fleet", "Fleet of web hosts, as deployed (issue 33)", ("bench.bench_fleet",)),
    Area("audit", "Audit: every line, per host and minute (issue 35)", ("bench.bench_audit",)),
    Area(
        "rebalance",
        "Rebalance cost: consumer group protocol (KIP-848) vs classic",
        ("bench.bench_rebalance",),
    ),
)
SUMMARY = "Summary"
RAW_OUTPUT = "Output of benchmarks without figures"
GENERATED_ONLY = {SUMMARY, RAW_OUTPUT}
TITLE = "# Benchmark report"

_TARGET = re.compile(r"^\s*(>=|<=|>|<|==)\s*([-+]?[\d_,]*\.?\d+(?:e[-+]?\d+)?)\s*$", re.I)


def area(key: str) -> Area:
    for a in AREAS:
        if a.key == key:
            return a
    raise KeyError(key)


def fmt_number(value) -> str:
    """1234567 -> '1,234,567'; 2.3456 -> '2.35'; 0.01234 -> '0.0123'; strings as is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if isinstance(value, int) or magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1 or value == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def parse_target(target: str) -> tuple[str, float] | None:
    m = _TARGET.match(target or "")
    if not m:
        return None
    return m.group(1), float(m.group(2).replace(",", "").replace("_", ""))


def verdict(figure: dict) -> str:
    """'met', 'missed' or '' (no target, or nothing to compare)."""
    if "ok" in figure and figure["ok"] is not None:
        return "met" if figure["ok"] else "**missed**"
    parsed = parse_target(figure.get("target", ""))
    value = figure.get("value")
    if parsed is None or isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    op, bound = parsed
    ok = {
        ">=": value >= bound,
        "<=": value <= bound,
        ">": value > bound,
        "<": value < bound,
        "==": value == bound,
    }[op]
    return "met" if ok else "**missed**"


def with_unit(text: str, unit: str | None) -> str:
    if unit == "ratio":
        return f"{text}×"
    return f"{text} {unit or ''}".strip()


def fmt_value(figure: dict) -> str:
    return with_unit(fmt_number(figure["value"]), figure.get("unit"))


def fmt_target(figure: dict) -> str:
    """ ">= 1000000" -> ">= 1,000,000 records/s"; bounds below 1000 stay as written."""
    target = figure.get("target") or ""
    parsed = parse_target(target)
    if parsed is None:
        return target
    op, bound = parsed
    number = f"{bound:,.0f}" if bound >= 1000 else _TARGET.match(target).group(2)
    return f"{op} {with_unit(number, figure.get('unit'))}"


def print_figures(figures: list[dict]) -> None:
    """A module's figures on stdout, one per line with its detail below, for a
    benchmark run by hand (`python -m bench.bench_x`)."""
    for f in figures:
        target = f" (target {f['target']})" if f.get("target") else ""
        value = f["value"]
        shown = f"{value:,.2f}" if isinstance(value, float) else value
        print(f"{f['metric']}: {shown} {f.get('unit', '')}{target}")
        if f.get("detail"):
            print(f"    {f['detail']}")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def area_table(figures: list[dict]) -> str:
    rows = [
        "| metric | measured | target | verdict | reference | peer, same run |",
        "|---|---|---|---|---|---|",
    ]
    for f in figures:
        value = fmt_value(f)
        rows.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f["metric"],
                    f"**{value}**" if f.get("target") or "ok" in f else value,
                    fmt_target(f),
                    verdict(f),
                    f.get("reference") or "",
                    f.get("peer") or "",
                )
            )
            + " |"
        )
    details = [f"- {f['metric']}: {f['detail']}" for f in figures if f.get("detail")]
    return "\n".join(rows + ([""] + details if details else []))


def summary_table(figures: list[dict], loads: dict[str, str] | None = None) -> str:
    """Figures with a target; `loads` adds each area's starting load average (1 min)."""
    loads = loads or {}
    rows = [
        "| area (load) | metric | latest | target | verdict |",
        "|---|---|---|---|---|",
    ]
    for f in figures:
        if not f.get("target") and "ok" not in f:
            continue
        value = fmt_value(f)
        rows.append(
            f"| {_cell(_area_load(f['area'], loads))} | {_cell(f['metric'])} | {_cell(value)} "
            f"| {_cell(fmt_target(f))} | {verdict(f)} |"
        )
    return "\n".join(rows)


def _area_load(key: str, loads: dict[str, str]) -> str:
    load = loads.get(key, "").split()
    return f"{key} ({load[0]})" if load else key


def split_sections(markdown: str) -> tuple[str, dict[str, str]]:
    """(text before the first `## `, {heading: the section's body}) in file order."""
    head, sections, current = [], {}, None
    for line in markdown.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current is None:
            head.append(line)
        else:
            sections[current].append(line)
    return "\n".join(head), {k: "\n".join(v).strip("\n") for k, v in sections.items()}


def render(
    figures: list[dict],
    meta: dict,
    old_results: str = "",
    notes: str = "",
    plots: dict[str, str] | None = None,
    raw_outputs: dict[str, str] | None = None,
) -> str:
    """The whole RESULTS.md.

    `meta`: {"date", "command", "machine", "load", "failed", "area_loads"} describing
    the run (`area_loads`: {area key: load average when it started}).
    `old_results`: the previous RESULTS.md; a section this run produced no figures
    for (not run, or a module without the figure protocol) is kept verbatim, and so is
    any section whose heading is not an area's.
    `notes`: bench/NOTES.md, hand-written narrative: its `## <area heading>` sections
    follow the generated tables of those areas.
    `plots`: {area key: markdown linking its PNGs}.
    `raw_outputs`: {module: its last lines of output} for modules without figures.
    """
    _, old = split_sections(old_results)
    _, note = split_sections(notes)
    by_area: dict[str, list[dict]] = {}
    for f in figures:
        by_area.setdefault(f["area"], []).append(f)
    out = [
        TITLE,
        "",
        "Generated by `make bench` (`.venv/bin/python -m bench`); do not edit by hand:"
        " narrative notes live in `bench/NOTES.md`, and a section of this file that the"
        " run did not measure is kept as it was.",
        "",
        f"- run: {meta.get('date', '?')}, command `{meta.get('command', '?')}`",
        f"- machine: {meta.get('machine', '?')}",
        f"- load average: {meta.get('load', '?')}",
    ]
    if meta.get("failed"):
        out.append(f"- failed this run (sections kept from before): {meta['failed']}")
    out += [
        "",
        f"## {SUMMARY}",
        "",
        "The latest figure of every area that has a target; in brackets the 1-minute load average when the area started (2 cores: above 2 the benchmarks shared the CPUs).",
        "",
    ]
    out.append(summary_table(figures, meta.get("area_loads")))
    known = {a.heading for a in AREAS}
    for a in AREAS:
        if a.key in by_area:
            out += ["", f"## {a.heading}", ""]
            if meta.get("area_loads", {}).get(a.key):
                out += [
                    f"Load average (1, 5, 15 min) when this area started: {meta['area_loads'][a.key]}.",
                    "",
                ]
            out.append(area_table(by_area[a.key]))
            if plots and plots.get(a.key):
                out += ["", plots[a.key]]
            if note.get(a.heading):
                out += ["", "### Notes (from bench/NOTES.md)", "", note[a.heading]]
        elif a.heading in old:
            out += ["", f"## {a.heading}", "", old[a.heading]]
    for heading, body in old.items():
        if heading not in known and heading not in GENERATED_ONLY:
            out += ["", f"## {heading}", "", body]
    if raw_outputs:
        out += ["", f"## {RAW_OUTPUT}", ""]
        out.append(
            "These modules do not implement `figures(mode)` yet: they ran with their"
            " own command line, and their sections above are kept as written by hand."
        )
        for module, text in raw_outputs.items():
            out += ["", f"`python -m {module}`:", "", "```", text.rstrip(), "```"]
    return "\n".join(out).rstrip() + "\n"


def plots(figures: list[dict], out_dir: Path) -> dict[str, str]:
    """Draw the named plots found in `figures` into `out_dir`; return markdown links
    per area. Plot names: "batch" (x = producer batch size, value = records/s) and
    "latency" (x = percentile label such as "p99", value = ms)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    links: dict[str, list[str]] = {}
    batch = [f for f in figures if f.get("plot") == "batch"]
    if batch:
        batch.sort(key=lambda f: f["x"])
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
        xs = [f["x"] for f in batch]
        ys = [f["value"] / 1e6 for f in batch]
        ax.plot(xs, ys, marker="o")
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(f"{y:.2f}M", (x, y), textcoords="offset points", xytext=(0, 7), ha="center")
        ax.set_xscale("log")
        ax.set_xlabel("producer batch.num.messages (records per batch, log scale)")
        ax.set_ylabel("produce throughput (M records/s)")
        ax.set_title(batch[0].get("plot_title", "produce throughput vs batch size"))
        ax.axhline(1.0, color="#c44e52", linestyle="--", linewidth=1)
        ax.annotate(
            "target 1 M/s (acks=1, 30 s run)",
            (xs[-1], 1.0),
            xytext=(0, -12),
            textcoords="offset points",
            ha="right",
            color="#c44e52",
            fontsize=8,
        )
        ax.set_ylim(0, max(max(ys), 1.0) * 1.2)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(out_dir / "produce_vs_batch.png")
        plt.close(fig)
        links.setdefault(batch[0]["area"], []).append(
            "![produce throughput against producer batch size](plots/produce_vs_batch.png)"
        )
    latency = [f for f in figures if f.get("plot") == "latency"]
    if latency:
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
        labels = [f["x"] for f in latency]
        values = [f["value"] for f in latency]
        bars = ax.bar(labels, values, color="#4878a8")
        for bar, v in zip(bars, values, strict=True):
            ax.annotate(
                f"{v:.2f} ms",
                (bar.get_x() + bar.get_width() / 2, v),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
            )
        ax.axhline(5.0, color="#c44e52", linestyle="--", linewidth=1)
        ax.annotate(
            "p99 target 5 ms",
            (-0.4, 5.0),
            xytext=(0, 4),
            textcoords="offset points",
            color="#c44e52",
            fontsize=8,
        )
        ax.set_yscale("log")
        ax.set_ylabel("end-to-end latency (ms, log scale)")
        ax.set_title(latency[0].get("plot_title", "end-to-end latency percentiles"))
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out_dir / "latency_percentiles.png")
        plt.close(fig)
        links.setdefault(latency[0]["area"], []).append(
            "![end-to-end latency percentiles](plots/latency_percentiles.png)"
        )
    return {k: "\n\n".join(v) for k, v in links.items()}
