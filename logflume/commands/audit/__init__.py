"""`logflume audit`: did every line of every host reach the output, minute by minute?

Reads the tiers' totals from the audit topic (common/audit.py: the agent's sink,
the Spark jobs) and, with --recount, counts the data topics themselves (the
`broker` tier); then prints, per (host, topic, minute), each tier's count, and a
verdict: complete, missing N, duplicated N, checksum differs (as many records but
not the same ones), still open (the minute ended less than --grace ago), no agent
count (records no audited agent delivered), unchecked (no tier to compare with).
A Spark job is held to the agents' counts only in the minutes it has covered: from
the first it counted (for the realtime job the one after) to those that had closed
when it last read the topic to its end (its progress marks).

Exit status: 0 when nothing is missing, duplicated or different; 3 when something
is; 1 when the audit could not be made (unreachable, not authorized); 2 for a
usage error. `--serve` (serve.py) keeps reconciling and exports the verdicts as
Prometheus metrics instead.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import time

from common.audit import (
    AGENT,
    AGENT_SOURCE,
    GRACE_S,
    TIERS,
    compared_tiers,
    coverage,
    extra_totals,
    minute_text,
    reconcile,
    totals,
)
from common.topic_names import AUDIT_TOPIC
from logflume import client_config

PROBLEM_EXIT = 3  # argparse's usage errors are 2
SERVE_PORT = 8289
_RELATIVE = re.compile(r"-?(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "audit",
        help="reconcile what each tier counted, per host and minute",
        description=(
            "Compare, per host, topic and minute, the records the agents delivered with "
            "what the topics hold (--recount) and what the Spark jobs read. Exit status "
            "3 when anything is missing, duplicated or different."
        ),
    )
    client_config.add_arguments(p)
    p.add_argument(
        "--from",
        dest="from_time",
        metavar="TIME",
        default="1h",
        help="start of the window: ISO 8601 (local time without an offset), epoch ms, "
        "'now', or that long before now: 15m, 2h, 1d (default: 1h)",
    )
    p.add_argument("--to", dest="to_time", metavar="TIME", default="now", help="end (default: now)")
    p.add_argument("--host", action="append", help="only this host (repeatable)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument(
        "--recount", action="store_true", help="count the topics themselves (the broker tier)"
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.add_argument(
        "--grace",
        type=float,
        default=GRACE_S,
        metavar="SECONDS",
        help=f"a minute is final this long after it ends (default: {GRACE_S:.0f})",
    )
    p.add_argument("--audit-topic", default=AUDIT_TOPIC, help=f"default: {AUDIT_TOPIC}")
    p.add_argument(
        "--timeout-ms", type=int, default=30000, help="most time to wait for the brokers"
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="keep reconciling the last --from (default 1h) every --interval seconds and "
        "export Prometheus metrics on --listen, until stopped",
    )
    p.add_argument(
        "--listen",
        default=f"127.0.0.1:{SERVE_PORT}",
        metavar="HOST:PORT",
        help=f"--serve: where /metrics is served (default 127.0.0.1:{SERVE_PORT})",
    )
    p.add_argument(
        "--interval", type=float, default=30.0, metavar="SECONDS", help="--serve: default 30"
    )
    p.set_defaults(func=run)


def parse_time(text: str, now_ms: int) -> int:
    """Epoch ms of a --from/--to value."""
    if text == "now":
        return now_ms
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return now_ms - int(float(relative[1]) * _UNITS[relative[2]] * 1000)
    if text.isdigit():
        return int(text)
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time (ISO 8601, epoch ms, now, or 15m / 2h / 1d ago)"
        ) from None


def _error(message: str) -> int:
    print(f"logflume audit: {message}", file=sys.stderr)
    return 1


def run(args) -> int:
    if args.serve:
        from logflume.commands.audit.serve import serve

        try:
            window_ms = -parse_time(args.from_time, 0)
        except ValueError as e:
            return _error(str(e))
        return serve(args, window_ms)
    from confluent_kafka import KafkaException

    from common.audit_kafka import AuditReadError, read_audit, recount

    now_ms = int(time.time() * 1000)
    try:
        start, end = parse_time(args.from_time, now_ms), parse_time(args.to_time, now_ms)
    except ValueError as e:
        return _error(str(e))
    if start >= end:
        return _error("--from must be before --to")
    hosts = set(args.host) if args.host else None
    topics = set(args.topic) if args.topic else None
    try:
        conf = client_config.client_config(args, **{"socket.timeout.ms": args.timeout_ms})
        timeout = args.timeout_ms / 1000
        published, marks = read_audit(conf, args.audit_topic, timeout)
        covered = coverage(published, marks)
        records = [
            r
            for r in published
            if start <= r.bucket.minute < end
            and (hosts is None or r.bucket.host in hosts)
            and (topics is None or r.bucket.topic in topics)
        ]
        if args.recount:
            counted = topics or {r.bucket.topic for r in records if r.tier == AGENT}
            records += recount(conf, sorted(counted), start, end, hosts, timeout)
        compared = compared_tiers(records, args.recount)
    except (client_config.CommandConfigError, KafkaException, AuditReadError) as e:
        return _error(client_config.describe_error(e))
    verdicts = reconcile(totals(records), compared, now_ms, args.grace, covered)
    extras = extra_totals(records)
    for v in verdicts:
        v.extra = extras.get(v.bucket, {})
    if args.format == "json":
        import orjson

        doc = {
            "from": start,
            "to": end,
            "compared": sorted(compared),
            "buckets": [v.to_json() for v in verdicts],
            "summary": summary(verdicts),
        }
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_table(verdicts, compared)
    return PROBLEM_EXIT if any(v.problem for v in verdicts) else 0


def summary(verdicts) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in verdicts:
        out[v.status] = out.get(v.status, 0) + 1
    return out


def print_table(verdicts, compared: set[str]) -> None:
    shown = {AGENT, *compared} | (
        {AGENT_SOURCE} if any(AGENT_SOURCE in v.tiers for v in verdicts) else set()
    )
    tiers = [t for t in TIERS if t in shown]
    rows = [["MINUTE", "HOST", "TOPIC", *(t.upper() for t in tiers), "VERDICT"]]
    for v in verdicts:
        counts = [_cell(v, t) for t in tiers]
        rows.append(
            [minute_text(v.bucket.minute), v.bucket.host or "-", v.bucket.topic, *counts, v.text()]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    parts = ", ".join(f"{n} {status}" for status, n in sorted(summary(verdicts).items()))
    print(f"{len(verdicts)} buckets" + (f": {parts}" if parts else ""))


def _cell(v, tier: str) -> str:
    """A tier's count, and beside it what did not go on when there was any: the rows
    a Spark job could not parse, the lines an agent's source filtered out or a parser
    could not parse (kept and shipped)."""
    if tier not in v.tiers:
        return "-"
    extra = v.extra.get(tier, {})
    notes = [f"{extra[k]} {k}" for k in ("rejected", "filtered", "unparsable") if extra.get(k)]
    return f"{v.tiers[tier].count}" + (f" ({', '.join(notes)})" if notes else "")
