"""The broker sink against a real broker (idempotent producer, the default):
dead-letter topic for oversize records."""

import os
import time

from testkit.agent import AgentProcess, read_topic

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
