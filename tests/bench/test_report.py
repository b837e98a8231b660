"""The benchmark report generator on canned figures (no benchmark runs here)."""

from bench import report
from bench.__main__ import has_figures

FIGURES = [
    {
        "area": "broker",
        "metric": "produce acks=1, 6 partitions",
        "value": 1_234_567.8,
        "unit": "records/s",
        "target": ">= 1000000",
        "reference": "Kafka 2014 reference run: 821,557 records/s",
        "peer": "Redis Streams XADD: 400,000 records/s",
    },
    {
        "area": "broker",
        "metric": "e2e latency p99",
        "value": 7.5,
        "unit": "ms",
        "target": "<= 5",
        "plot": "latency",
        "x": "p99",
    },
    {"area": "broker", "metric": "e2e latency p50", "value": 0.31, "unit": "ms"},
    {"area": "groups", "metric": "idempotent / plain", "value": 0.93, "unit": "ratio"},
    {"area": "agent", "metric": "UDP loss", "value": "0 lost", "unit": "", "ok": True},
    {
        "area": "broker",
        "metric": "batch 100",
        "value": 300_000,
        "unit": "records/s",
        "plot": "batch",
        "x": 100,
    },
    {
        "area": "broker",
        "metric": "batch 10000",
        "value": 1_100_000,
        "unit": "records/s",
        "plot": "batch",
        "x": 10_000,
    },
]
OLD = """# Benchmark report

## Summary

stale

## Broker core (issue 3)

old broker table

## Spark ETL (issue 6)

hand-written spark section
| keep | me |

## Freshness, appended by someone

their text
"""
NOTES = "# notes\n\n## Broker core (issue 3)\n\nHow it is measured: carefully.\n"


def test_verdicts_and_target_formatting():
    produce, p99, p50, ratio, udp = FIGURES[:5]
    assert report.verdict(produce) == "met"
    assert report.verdict(p99) == "**missed**"
    assert report.verdict(p50) == ""
    assert report.verdict(udp) == "met"
    assert report.fmt_target(produce) == ">= 1,000,000 records/s"
    assert report.fmt_target({"target": ">= 0.9", "unit": "ratio"}) == ">= 0.9×"
    assert report.fmt_value(ratio) == "0.93×"
    assert report.fmt_number(1_234_567.8) == "1,234,568"
    assert report.fmt_number(0.01234) == "0.0123"


def test_render_tables_notes_and_kept_sections():
    meta = {"date": "today", "command": "python -m bench", "machine": "2 CPUs", "load": "3.1"}
    meta["area_loads"] = {"broker": "2.5 3.0 3.1"}
    md = report.render(
        FIGURES,
        meta,
        OLD,
        NOTES,
        {"broker": "![p](plots/x.png)"},
        {"bench.bench_spark": "42 rows/s"},
    )
    _, sections = report.split_sections(md)
    summary = sections["Summary"]
    assert (
        "| broker (2.5) | produce acks=1, 6 partitions | 1,234,568 records/s | >= 1,000,000 records/s | met |"
        in summary
    )
    assert "| broker (2.5) | e2e latency p99 | 7.50 ms | <= 5 ms | **missed** |" in summary
    assert "latency p50" not in summary  # no target, not in the summary
    broker = sections["Broker core (issue 3)"]
    assert "old broker table" not in broker
    assert (
        "| produce acks=1, 6 partitions | **1,234,568 records/s** | >= 1,000,000 records/s | met "
        "| Kafka 2014 reference run: 821,557 records/s | Redis Streams XADD: 400,000 records/s |"
    ) in broker
    assert broker.index("![p](plots/x.png)") < broker.index("How it is measured: carefully.")
    assert (
        "| idempotent / plain | 0.93× |"
        in sections["Consumer groups and idempotent producer (issue 4)"]
    )
    # not measured by this run: kept verbatim, in area order; foreign sections at the end
    assert sections["Spark ETL (issue 6)"] == "hand-written spark section\n| keep | me |"
    assert sections["Freshness, appended by someone"] == "their text"
    assert list(sections).index("Spark ETL (issue 6)") < list(sections).index(
        "Freshness, appended by someone"
    )
    assert "42 rows/s" in sections[report.RAW_OUTPUT]
    assert md.count("## Summary") == 1 and "stale" not in md
    # rendering its own output again keeps everything (idempotent)
    assert (
        report.render(
            FIGURES,
            meta,
            md,
            NOTES,
            {"broker": "![p](plots/x.png)"},
            {"bench.bench_spark": "42 rows/s"},
        )
        == md
    )


def test_plots_are_written(tmp_path):
    links = report.plots(FIGURES, tmp_path)
    assert (tmp_path / "produce_vs_batch.png").stat().st_size > 1000
    assert (tmp_path / "latency_percentiles.png").stat().st_size > 1000
    assert "plots/produce_vs_batch.png" in links["broker"]


def test_every_area_module_defines_the_hook():
    for area in report.AREAS:
        for module in area.modules:
            if module != "bench.bench_freshness":  # run with its own command line
                assert has_figures(module), module
