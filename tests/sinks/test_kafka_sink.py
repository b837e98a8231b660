"""The broker sink against a real broker (idempotent producer, the default):
dead-letter topic for oversize records, the gauges that explain a stalled sink."""

import os
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from testkit.agent import AgentProcess, read_topic
from testkit.procs import wait_until

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c]}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: broker, channel: c, topic: lines, bootstrap_servers: "{bootstrap}",
          dead_letter_max_bytes: 1000, linger_ms: 50}}
"""


def test_oversize_record_goes_to_the_dead_letter_topic_alone(tmp_path, broker_factory):
    broker = broker_factory(settings={"message.max.bytes": 20000})
    logs = tmp_path / "logs"
    logs.mkdir()
    big = os.urandom(25_000).hex().encode()  # 50 kB that lz4 cannot shrink below 20 kB
    lines = [b"small %d" % i for i in range(10)] + [big] + [b"small %d" % i for i in range(10, 20)]
    (logs / "app.log").write_bytes(b"".join(line + b"\n" for line in lines))
    agent = AgentProcess(tmp_path, PIPELINE.format(logs=logs, bootstrap=broker.bootstrap)).start()
    try:
        good = read_topic(broker.bootstrap, "lines", lambda m: len(m) >= 20, 60)
        dead = read_topic(broker.bootstrap, "lines.dlq", lambda m: len(m) >= 1, 60)
        assert sorted(m.value() for m in good) == sorted(line for line in lines if len(line) < 100)
        (record,) = dead
        headers = dict(record.headers())
        assert headers["x-error"] == b"MSG_SIZE_TOO_LARGE"
        assert headers["x-topic"] == b"lines" and headers["x-size"] == b"50000"
        assert record.value() == big[:1000]
        for _ in range(50):
            if agent.metric("logflume_agent_broker_dead_lettered_total", component="k") == 1:
                break
            time.sleep(0.1)
        assert agent.metric("logflume_agent_broker_dead_lettered_total", component="k") == 1
    finally:
        agent.stop()


STALL = """
agents:
  a:
    shutdown_grace: 2s
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c],
             persist_interval: 200ms}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: stall, bootstrap_servers: "{bootstrap}",
          linger_ms: 5, producer: {{statistics.interval.ms: "300"}}}}
"""


def samples(agent: AgentProcess, name: str, **labels: str) -> list[tuple[dict, float]]:
    """(labels, value) of every sample `name` of the agent's /metrics carrying `labels`."""
    url = f"http://127.0.0.1:{agent.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    ]


def value(agent: AgentProcess, name: str, **labels: str) -> float | None:
    found = samples(agent, name, **labels)
    return found[0][1] if found else None


def test_gauges_that_explain_a_stalled_sink(tmp_path, broker_factory):
    """Delivering: the producer queue is empty, the broker up, nothing undelivered.
    Broker stopped: the oldest undelivered event ages, the broker reads down, the
    queue holds the new lines. Broker back: all of it recovers."""
    broker = broker_factory()
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "app.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(10)))
    started = time.time()
    text = STALL.format(logs=logs, bootstrap=broker.bootstrap)
    agent = AgentProcess(tmp_path, text).start()
    saved = "logflume_agent_tail_position_saved_timestamp_seconds"
    age = "logflume_agent_oldest_undelivered_event_age_seconds"
    up = "logflume_agent_kafka_broker_up"
    queue = "logflume_agent_kafka_queue_messages"
    try:
        assert len(read_topic(broker.bootstrap, "stall", lambda m: len(m) >= 10, 60)) == 10
        (labels,) = [
            lab for lab, _ in wait_until(lambda: samples(agent, up, component="k"), what=up)
        ]
        wait_until(lambda: value(agent, up, **labels) == 1, what="broker up")
        wait_until(lambda: value(agent, queue, component="k") == 0, what="empty queue")
        assert value(agent, age, component="k") == 0
        assert value(agent, "logflume_agent_kafka_queue_bytes", component="k") == 0
        assert value(agent, "logflume_agent_kafka_broker_rtt_seconds", **labels) >= 0
        assert started <= value(agent, saved, component="logs") <= time.time()

        broker.stop()
        with open(log, "ab") as fh:
            fh.write(b"".join(b"late %d\n" % i for i in range(5)))
        wait_until(lambda: value(agent, age, component="k") >= 2, what="an aging event")
        wait_until(lambda: value(agent, up, **labels) == 0, what="broker down")
        wait_until(lambda: value(agent, queue, component="k") >= 1, what="queued lines")

        broker.start()
        got = read_topic(broker.bootstrap, "stall", lambda m: len(m) >= 15, 60)
        assert {m.value() for m in got} >= {b"late %d" % i for i in range(5)}
        wait_until(lambda: value(agent, age, component="k") == 0, what="nothing undelivered")
        wait_until(lambda: value(agent, up, **labels) == 1, what="broker up again")
    finally:
        agent.stop()
