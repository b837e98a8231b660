"""The web host's transforms across the seam to Spark: an agent process tails an nginx
log through the parser, `anonymize_ip` (truncate) and `strip_query` into a real
broker, and the offline job aggregates what arrived. The job's hourly figures equal
a Python computation from the generated requests with the addresses truncated and
the query strings cut (so unique clients count /24 networks), no stored row holds a
query string or a full address, and the job's audit tier equals a recount of the
topic, as does the agent's."""

import dataclasses
import socket
from datetime import UTC, datetime

import pytest

from agent.interceptors.anonymize_ip import truncate
from common.audit import AGENT, SPARK_OFFLINE
from spark_etl import loggen
from spark_etl.jobs.offline import run_offline
from testkit.agent import AgentProcess
from testkit.procs import BrokerProcess, wait_until
from tests.spark_etl import expected

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      access:
        type: tail
        paths: ["{log}"]
        start_at: beginning
        add_host: true
        channels: [c]
        interceptors:
          - {{type: nginx}}
          - {{type: anonymize_ip, mode: truncate}}
          - {{type: strip_query, fields: [path, referrer]}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: access, bootstrap_servers: "{bootstrap}", linger_ms: 5}}
"""
UNPARSABLE = ["upstream timed out (110: Connection timed out)", "-- MARK --"]


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("transforms") / "broker").start()
    yield b
    b.stop()


def as_shipped(a: loggen.Access, host: str) -> loggen.Access:
    """The request as the transforms promise to ship it."""

    def cut(text: str | None) -> str | None:
        return None if text is None else text.split("?")[0].split("#")[0]

    client = truncate(a.client)
    assert client is not None
    return dataclasses.replace(
        a, client=client, path=cut(a.path), referrer=cut(a.referrer), host=host
    )


def test_anonymised_and_stripped_records_aggregate_in_the_offline_job(spark, bk, tmp_path):
    start = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    generated = loggen.generate(start, start.replace(hour=12), 1200, seed=5)
    # 200 addresses in 4 networks: truncated to /24, 4 clients an hour at most
    requests = [
        dataclasses.replace(a, client=f"198.51.{i % 4}.{i % 200 + 1}")
        for i, a in enumerate(generated)
    ]
    assert any("?" in a.path for a in requests)
    log = tmp_path / "access.log"
    lines = [a.line() for a in requests]
    lines[100:100] = UNPARSABLE  # shipped as they are; the job rejects them
    log.write_text("".join(line + "\n" for line in lines))
    text = PIPELINE.format(log=log, bootstrap=bk.bootstrap)
    agent = AgentProcess(tmp_path, text).start()
    try:
        wait_until(
            lambda: (
                agent.metric("logflume_agent_sink_events_out_total", component="k") == len(lines)
            ),
            120,
            f"the agent shipped all {len(lines)} lines",
        )
    finally:
        agent.stop()

    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    report = run_offline(
        spark, bootstrap=bk.bootstrap, topic="access", output=out, checkpoint=ckpt,
        say=lambda _: None,
    )  # fmt: skip
    assert (report.rows, report.rejected) == (len(lines), len(UNPARSABLE))

    host = socket.gethostname()
    shipped = [(as_shipped(a, host), True) for a in requests]
    want = expected.hourly(shipped)
    assert want != expected.hourly([(dataclasses.replace(a, host=host), True) for a in requests])
    expected.assert_hourly_matches(spark.read.parquet(f"{out}/hourly").collect(), want)

    parsed = spark.read.parquet(f"{out}/parsed").select("client", "path", "referrer").collect()
    assert len(parsed) == len(requests)
    assert all(r.client.endswith(".0") for r in parsed)
    assert not any("?" in r.path or "?" in (r.referrer or "") for r in parsed)
    assert expected.assert_audit_equals_recount(bk.bootstrap, "access", SPARK_OFFLINE) == len(lines)
    assert expected.assert_audit_equals_recount(
        bk.bootstrap, "access", AGENT, progress_mark=False
    ) == len(lines)
