"""`logflume console` against a real single-node broker and a real agent, rendered in
headless Chromium: the page must show the broker and controller, the topic with its
size (from the broker's /metrics), the group's lag, the agent's components and
health, a drawn chart of the per-minute rows, the audit grid (a missing line shown
and explained on a click), and the message browser's last record;
and the browser's console must have no error."""

import json
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import audit
from common.ports import free_port
from testkit.agent import AgentProcess
from testkit.procs import wait_until
from tests.console.browser import (
    ConsoleProcess,
    chart_drawn,
    save_screenshot,
    severe_browser_logs,
    text_of,
    wait_for_text,
)

TOPIC = "console-orders"
GROUP = "console-readers"
RECORDS, CONSUMED = 100, 70  # the group's lag: 30
AGENT = """\
agents:
  edge:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      lines: {{type: udp, listen: "127.0.0.1:{udp}", channels: [mem]}}
    channels:
      mem: {{type: memory, capacity: 5000}}
    sinks:
      out: {{type: kafka, channel: mem, topic: agent-lines, format: raw, bootstrap_servers: "{bootstrap}"}}
"""


def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(topics), operation_timeout=10).values():
        future.result(timeout=20)


def produce(bootstrap: str, topic: str, records) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(20) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    """Read `count` records as a member of `group` and commit offset `count`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    seen: list = []
    try:
        wait_until(
            lambda: seen.extend(consumer.consume(count, 0.5)) or len(seen) >= count,
            30,
            "the group to read its records",
        )
        consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
    finally:
        consumer.close()


def stats_rows() -> list[tuple[bytes, bytes]]:
    """Three minutes from two hosts; minute 1's web-a row is superseded (final 40)."""
    rows = []
    for minute, (a, b) in enumerate([(10, 5), (25, 15), (7, 3)]):
        for host, requests in (("web-a", a), ("web-b", b)):
            rows.append(
                {
                    "window_start": f"2026-11-26T18:0{minute}:00.000Z",
                    "window_end": f"2026-11-26T18:0{minute + 1}:00.000Z",
                    "host": host,
                    "requests": requests,
                    "status_2xx": requests,
                    "status_3xx": 0,
                    "status_4xx": 0,
                    "status_5xx": 0,
                    "bytes": 100 * requests,
                    "final": minute < 2,
                }
            )
    rows.append({**rows[2], "requests": 40, "status_2xx": 40})
    return [(r["host"].encode(), json.dumps(r).encode()) for r in rows]


def audit_records() -> list[tuple[bytes, bytes]]:
    """Two hosts' minutes as the agents and the offline job publish them: web-b's
    later minute is one line short at the offline job."""
    minute = audit.minute_of(int(time.time() * 1000)) - 10 * audit.MINUTE_MS
    offline = audit.SPARK_OFFLINE
    out = []
    for at in (minute - audit.MINUTE_MS, minute):
        for host in ("web-a", "web-b"):
            for tier in (audit.AGENT, offline):
                count = 9 if (tier, host, at) == (offline, "web-b", minute) else 10
                bucket = audit.Bucket(host, "nginx-access", at)
                rec = audit.AuditRecord(tier, bucket, "w", audit.Tally(count, count))
                out.append((rec.key(), rec.value()))
    mark = audit.Progress(offline, "nginx-access", "w", int(time.time() * 1000))
    return [*out, (mark.key(), mark.value())]


def test_console_single_node_in_a_browser(tmp_path, broker_factory, driver):
    metrics_port = free_port()
    broker = broker_factory(
        settings={
            "metrics.listen": f"127.0.0.1:{metrics_port}",
            "group.initial.rebalance.delay.ms": 0,
        }
    )
    create_topics(broker.bootstrap, NewTopic(TOPIC, 1, 1), NewTopic("nginx-stats", 1, 1))
    produce(broker.bootstrap, TOPIC, [(b"k%d" % i, b"order-%d" % i) for i in range(RECORDS)])
    consume_and_commit(broker.bootstrap, TOPIC, GROUP, CONSUMED)
    produce(broker.bootstrap, "nginx-stats", stats_rows())
    produce(broker.bootstrap, "logflume-audit", audit_records())
    agent = AgentProcess(
        tmp_path, AGENT.format(udp=free_port(), bootstrap=broker.bootstrap), name="edge"
    ).start()
    console = ConsoleProcess(
        tmp_path,
        "--bootstrap-server",
        broker.bootstrap,
        "--agents",
        f"127.0.0.1:{agent.metrics_port}",
        "--broker-metrics",
        f"127.0.0.1:{metrics_port}",
    ).start()
    try:
        driver.get(console.url)
        wait_for_text(driver, "#controller", "broker 0")
        assert text_of(driver, '[data-broker="0"] .broker-id') == "0"
        wait_for_text(driver, f'tr.topic-row[data-topic="{TOPIC}"] .topic-name', TOPIC)
        row = f'tr[data-topic="{TOPIC}"][data-partition="0"]'
        assert text_of(driver, f"{row} .leader") == "0"
        assert text_of(driver, f"{row} .isr") == "0"
        wait_for_text(driver, f"{row} .size", lambda t: t.endswith("KiB") or t.endswith(" B"))
        wait_for_text(driver, f'tr.group-row[data-group="{GROUP}"] .group-lag', "30")
        assert text_of(driver, f'tr[data-group="{GROUP}"][data-topic="{TOPIC}"] .lag') == "30"

        agent_box = f'[data-agent="http://127.0.0.1:{agent.metrics_port}"]'
        wait_for_text(driver, f"{agent_box} .agent-status", "ok")
        for component in ("source.lines", "sink.out"):
            assert (
                text_of(driver, f'{agent_box} [data-component="{component}"] .component-state')
                == "running"
            )
        assert (
            text_of(driver, f'{agent_box} [data-component="channel.mem"] .component-name') == "mem"
        )

        colored = chart_drawn(driver, 3)
        assert colored > 50
        # per minute, summed over hosts, the superseding row counted: 15, 55, 10
        wait_for_text(
            driver, "#chart-note", lambda t: t.startswith("3 minutes") and ": 10 requests" in t
        )
        assert console.api("stats")["data"]["points"][1]["requests"] == 55

        driver.find_element("id", "mb-n").clear()
        driver.find_element("id", "mb-n").send_keys("5")
        driver.execute_script(
            "const s = document.getElementById('mb-topic'); s.value = arguments[0];", TOPIC
        )
        driver.find_element("id", "mb-show").click()
        last = f'#mb-table tr[data-offset="{RECORDS - 1}"]'
        wait_for_text(driver, f"{last} .value", f"order-{RECORDS - 1}")
        assert text_of(driver, f"{last} .key") == f"k{RECORDS - 1}"
        assert len(driver.find_elements("css selector", "#mb-table tbody tr")) == 5

        missing = '#audit-grid tr[data-host="web-b"] td.status-missing'
        wait_for_text(driver, missing, "−")
        assert len(driver.find_elements("css selector", "#audit-grid td.status-complete")) == 3
        driver.find_element("css selector", missing).click()
        wait_for_text(
            driver,
            "#audit-detail",
            lambda t: "missing 1 (spark-offline)" in t and "spark-offline 9" in t,
        )

        save_screenshot(driver, tmp_path, "console-single-node.png")
        assert severe_browser_logs(driver) == []
    finally:
        console.stop()
        agent.stop()
    assert console.proc.returncode == 0, console.log_text()
    assert "console on http://127.0.0.1:" in console.log_text()
