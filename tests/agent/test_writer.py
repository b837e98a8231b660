"""pipelines.yaml written back from compiled specs (agent/writer.py): compiling the
text again gives equal specs."""

from pathlib import Path

import yaml

from agent.api import Duration, Size
from agent.config import compile_text
from agent.writer import document, yaml_value

REPO = Path(__file__).resolve().parents[2]

PIPELINE = """
agents:
  web:
    metrics: {listen: 127.0.0.1:9999}
    shutdown_grace: 1.5s
    sources:
      logs:
        type: tail
        paths: ["LOGS/*.log"]
        start_at: beginning
        channels: [a, b]
        interceptors: [{type: nginx}, {type: add_fields, fields: {env: prod, n: 3}}]
        selector: {type: multiplexing, header: path, mapping: {x: [a]}, default: [b]}
      udp: {type: udp, listen: 0.0.0.0:8285, channels: [a]}
    channels:
      a: {type: memory, capacity: 1000, byte_capacity: 64MiB}
      b: {type: memory}
    sinks:
      k:
        type: broker
        channel: a
        topic: "nginx-{host}"
        key: "{host}"
        dead_letter_topic: dead
        retry_backoff: 250ms
        tls: {ca: CA, verify: false}
        sasl: {mechanism: PLAIN, username: u, password: "p: #1"}
        producer: {statistics.interval.ms: "300"}
      out: {type: console, channel: b}
  other:
    sources:
      udp: {type: udp, listen: 127.0.0.1:8286, channels: [m]}
    channels:
      m: {type: memory}
    sinks:
      out: {type: console, channel: m}
"""


def compiled(text: str):
    agents, errors = compile_text(text)
    assert errors == []
    return agents


def test_the_written_document_compiles_to_the_same_specs(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    agents = compiled(PIPELINE.replace("LOGS", str(tmp_path)).replace("CA", str(ca)))
    text = yaml.safe_dump(document(agents), sort_keys=False)
    assert compiled(text) == agents


def test_the_demo_pipeline_is_written_back_with_its_own_keys_only():
    agents = compiled((REPO / "pipelines.yaml").read_text())
    written = document(agents)
    assert compiled(yaml.safe_dump(written)) == agents
    sink = written["agents"]["web"]["sinks"]["netcat-kafka"]
    assert sink == {
        "type": "kafka",
        "channel": "netcat",
        "topic": "netcat",
        "format": "raw",
    }  # bootstrap_servers: 127.0.0.1:9092 is the default


def test_sizes_and_durations_keep_a_unit_when_one_fits_exactly():
    assert yaml_value(Size(64 << 20)) == "64MiB"
    assert yaml_value(Size(1500)) == 1500
    assert yaml_value(Duration(0.25)) == "250ms"
    assert yaml_value(Duration(90)) == "90s"
    assert yaml_value(Duration(0.0005)) == 0.0005
