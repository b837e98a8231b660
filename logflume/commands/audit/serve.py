"""`logflume audit --serve`: the audit, kept current, as Prometheus metrics.

Every `--interval` seconds the audit topic is read on from where the last round
stopped (common/audit_kafka.AuditFollower), the window of the last `--from` is
reconciled as `logflume audit` does, and /metrics on `--listen` serves, per host
and topic:

    logflume_audit_lines_missing        lines the agents delivered that a tier lacks
    logflume_audit_lines_duplicated     lines a tier holds more than once
    logflume_audit_buckets_incomplete   minutes missing, duplicated or differing

summed over the closed minutes of the window (a minute ended more than --grace
ago), plus the number of minutes per verdict and when the last round succeeded.
deploy/monitoring/alerts.yml alerts on them. With --recount every round also
counts the topics themselves (the broker tier), which reads the window's records
each time: for small windows.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

from common.audit import Verdict, compared_tiers, reconcile, totals
from common.hostport import parse_hostport
from logflume import client_config

MISSING = "logflume_audit_lines_missing"
DUPLICATED = "logflume_audit_lines_duplicated"
INCOMPLETE = "logflume_audit_buckets_incomplete"


class AuditCollector:
    """The metrics of the last round, swapped in whole (a scrape never sees half a
    round). Rounds run on the main thread; scrapes on the HTTP server's."""

    def __init__(self):
        self.verdicts: list[Verdict] = []
        self.last_success = 0.0
        self.errors = 0

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        verdicts, labels = self.verdicts, ["host", "topic"]
        families = {
            MISSING: GaugeMetricFamily(
                MISSING, "Lines delivered by the agents that a tier lacks", labels=labels
            ),
            DUPLICATED: GaugeMetricFamily(
                DUPLICATED,
                "Lines a tier holds more often than the agents delivered them",
                labels=labels,
            ),
            INCOMPLETE: GaugeMetricFamily(
                INCOMPLETE,
                "Closed minutes missing, duplicated or with a differing checksum",
                labels=labels,
            ),
        }
        sums: dict[tuple[str, str], list[int]] = {}
        for v in verdicts:
            row = sums.setdefault((v.bucket.host, v.bucket.topic), [0, 0, 0])
            if v.status == "missing":
                row[0] -= v.difference
            elif v.status == "duplicated":
                row[1] += v.difference
            row[2] += v.problem
        for (host, topic), (missing, duplicated, incomplete) in sorted(sums.items()):
            families[MISSING].add_metric([host, topic], missing)
            families[DUPLICATED].add_metric([host, topic], duplicated)
            families[INCOMPLETE].add_metric([host, topic], incomplete)
        yield from families.values()
        statuses = GaugeMetricFamily(
            "logflume_audit_buckets", "Minutes of the window per verdict", labels=["status"]
        )
        counted: dict[str, int] = {}
        for v in verdicts:
            counted[v.status] = counted.get(v.status, 0) + 1
        for status, n in sorted(counted.items()):
            statuses.add_metric([status], n)
        yield statuses
        yield GaugeMetricFamily(
            "logflume_audit_last_success_timestamp_seconds",
            "When the last round of reconciling succeeded (Unix time)",
            value=self.last_success,
        )
        yield CounterMetricFamily(
            "logflume_audit_errors", "Rounds that failed (broker unreachable...)", value=self.errors
        )


def serve(args, window_ms: int) -> int:
    """Run until SIGTERM or SIGINT; `window_ms`: how far back minutes are reconciled."""
    from confluent_kafka import KafkaException
    from prometheus_client import start_http_server
    from prometheus_client.registry import CollectorRegistry

    from common.audit_kafka import AuditFollower, AuditReadError, recount

    try:
        host, port = parse_hostport(args.listen, "--listen")
        conf = client_config.client_config(args, **{"socket.timeout.ms": args.timeout_ms})
        follower = AuditFollower(conf, args.audit_topic, window_ms)
    except (ValueError, client_config.CommandConfigError, KafkaException) as e:
        print(f"logflume audit: {e}", file=sys.stderr)
        return 1
    collector = AuditCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    start_http_server(port, host, registry=registry)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"logflume audit: serving http://{host}:{port}/metrics", file=sys.stderr, flush=True)
    try:
        while not stop.is_set():
            try:
                follower.update(args.timeout_ms / 1000)
                now_ms = int(time.time() * 1000)
                records = [
                    r
                    for r in follower.records()
                    if (not args.host or r.bucket.host in args.host)
                    and (not args.topic or r.bucket.topic in args.topic)
                ]
                if args.recount:
                    topics = sorted({r.bucket.topic for r in records})
                    hosts = set(args.host) if args.host else None
                    records += recount(
                        conf, topics, now_ms - window_ms, now_ms, hosts, args.timeout_ms / 1000
                    )
                compared = compared_tiers(records, args.recount)
                verdicts = reconcile(
                    totals(records), compared, now_ms, args.grace, follower.coverage()
                )
                collector.verdicts, collector.last_success = verdicts, time.time()
            except (KafkaException, AuditReadError) as e:
                collector.errors += 1
                print(f"logflume audit: {client_config.describe_error(e)}", file=sys.stderr)
            stop.wait(args.interval)
    finally:
        follower.close()
    return 0
