"""`logflume audit --serve` against a real broker: totals published to the audit
topic (as the agents and the offline job publish them, with its progress mark) become Prometheus metrics
per host and topic, and a total published later changes them at the next round."""

import os
import signal
import subprocess
import sys
import time

from confluent_kafka import Producer

from common.audit import (
    AGENT,
    MINUTE_MS,
    SPARK_OFFLINE,
    AuditRecord,
    Bucket,
    Progress,
    Tally,
    minute_of,
)
from common.ports import free_port
from testkit.procs import wait_until
from testkit.scrape import scrape


def publish(bootstrap: str, records: list[AuditRecord], marks: list[Progress] = ()) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for rec in [*records, *marks]:
        producer.produce("logflume-audit", rec.value(), rec.key())
    assert producer.flush(30) == 0


def test_serve_exports_what_is_missing_per_host_and_topic(broker):
    minute = minute_of(int(time.time() * 1000)) - 10 * MINUTE_MS  # closed
    earlier = minute - MINUTE_MS  # the offline job's first minute: it covers both

    def rec(tier, host, count, at=minute, writer="w"):
        return AuditRecord(tier, Bucket(host, "nginx-access", at), writer, Tally(count, count))

    publish(
        broker.bootstrap,
        [
            rec(AGENT, "web-1", 10, earlier),
            rec(SPARK_OFFLINE, "web-1", 10, earlier),
            rec(AGENT, "web-1", 10),
            rec(SPARK_OFFLINE, "web-1", 10),
            rec(AGENT, "web-2", 7, writer="run1"),
            rec(AGENT, "web-2", 5, writer="run2"),  # a restarted agent: 12 in all
            rec(SPARK_OFFLINE, "web-2", 11),
        ],
        [Progress(SPARK_OFFLINE, "nginx-access", "job", int(time.time() * 1000))],
    )
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "logflume", "audit", "--serve", "--bootstrap-server",
         broker.bootstrap, "--listen", f"127.0.0.1:{port}", "--interval", "0.5"],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )  # fmt: skip
    try:

        def metric(name, host):
            try:
                return scrape(port).get(name, host=host, topic="nginx-access")
            except OSError:
                return None

        wait_until(lambda: metric("logflume_audit_lines_missing", "web-2") == 1, timeout=60)
        assert metric("logflume_audit_lines_missing", "web-1") == 0
        assert metric("logflume_audit_buckets_incomplete", "web-2") == 1
        samples = scrape(port)
        assert samples.get("logflume_audit_buckets", status="complete") == 2
        assert samples.get("logflume_audit_last_success_timestamp_seconds") > time.time() - 60
        publish(broker.bootstrap, [rec(SPARK_OFFLINE, "web-2", 13)])  # the batch re-run
        wait_until(lambda: metric("logflume_audit_lines_duplicated", "web-2") == 1, timeout=60)
        assert metric("logflume_audit_lines_missing", "web-2") == 0
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=60)
    assert serve.returncode == 0, err
