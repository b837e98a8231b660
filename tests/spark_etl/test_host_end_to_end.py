"""The seam between the agent and the Spark jobs: every line keeps its host.

Two agents (`logflume agent run` subprocesses) tail nginx access logs with the nginx
interceptor and ship them with the kafka sink's defaults into one 3-partition topic
of a broker subprocess: one marks its lines with the source's `add_host: true` (a
`host` event header, which must become a Kafka record header), the other with
`add_fields {host: true, target: record}` (a `host` field of the JSON value) and
HOST set in its environment (`${HOST}`'s override). The offline job (real Spark,
local mode) then gives hourly rows per host equal to the lines each agent read."""

import collections
import socket
from datetime import UTC, datetime

from spark_etl import loggen
from spark_etl.jobs.offline import run_offline
from testkit.agent import AgentProcess
from testkit.kafka import create_topic, watermarks
from testkit.procs import wait_until

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
PARTITIONS = 3
PIPELINE = """
agents:
  web:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      nginx:
        type: tail
        paths: ["{log}"]
        start_at: beginning
        channels: [c]
        {marking}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: access, bootstrap_servers: "{bootstrap}"}}
"""
HEADER = "add_host: true\n        interceptors: [{type: nginx}]"
FIELD = "interceptors: [{type: nginx}, {type: add_fields, host: true, target: record}]"


def write_log(path, count: int, seed: int) -> collections.Counter:
    """nginx lines over two hours; their count per hour start."""
    items = list(loggen.generate(T0, T0.replace(hour=12), count, seed=seed))
    path.write_text("".join(a.line() + "\n" for a in items))
    return collections.Counter(a.time.replace(minute=0, second=0) for a in items)


def start_agent(tmp_path, name: str, marking: str, bootstrap: str, count: int, seed: int):
    home = tmp_path / name
    home.mkdir()
    hours = write_log(home / "access.log", count, seed)
    text = PIPELINE.format(log=home / "access.log", marking=marking, bootstrap=bootstrap)
    return AgentProcess(home, text, name="web").start(), hours


def test_the_host_header_and_the_host_field_reach_the_hourly_rows(
    spark, broker, tmp_path, monkeypatch
):
    create_topic(broker.bootstrap, "access", PARTITIONS)
    monkeypatch.delenv("HOST", raising=False)
    by_header, header_hours = start_agent(tmp_path, "a", HEADER, broker.bootstrap, 600, 1)
    monkeypatch.setenv("HOST", "web-b.example")
    by_field, field_hours = start_agent(tmp_path, "b", FIELD, broker.bootstrap, 400, 2)

    def delivered() -> int:
        return sum(watermarks(broker.bootstrap, "access", p)[1] for p in range(PARTITIONS))

    try:
        wait_until(lambda: delivered() >= 1000, 60, what=lambda: f"1000 records, {delivered()}")
    finally:
        by_header.stop()
        by_field.stop()
    assert delivered() == 1000

    out = tmp_path / "out"
    report = run_offline(
        spark, bootstrap=broker.bootstrap, topic="access", output=str(out),
        checkpoint=str(tmp_path / "ckpt"), say=lambda _: None,
    )  # fmt: skip
    assert (report.rows, report.rejected) == (1000, 0)
    rows = spark.read.parquet(f"{out}/hourly").collect()
    got = {(r.host, r.hour_start.astimezone(UTC)): r.requests for r in rows}
    this_host = socket.gethostname()
    want = {(this_host, hour): n for hour, n in header_hours.items()}
    want.update({("web-b.example", hour): n for hour, n in field_hours.items()})
    assert got == want
