"""Broker metrics after a known workload: a real broker process with metrics.listen,
real clients (confluent-kafka, raw frames), scraped and parsed with prometheus_client."""

import json
import struct
import urllib.request

import pytest
from confluent_kafka import Producer

import logflume
from broker.protocol import ApiKey
from common.ports import free_port
from testkit.kafka import consume_and_commit
from testkit.procs import BrokerProcess, wait_until
from testkit.scrape import scrape
from tests.broker.server.test_bad_input import still_serving
from tests.broker.server.wire import WireClient, fetch_body

TOPIC = "metered"
GROUP = "meter-group"


@pytest.fixture
def broker(tmp_path):
    metrics_port = free_port()
    settings = {"metrics.listen": f"127.0.0.1:{metrics_port}"}
    b = BrokerProcess(tmp_path / "data", settings=settings).start()
    b.metrics_port = metrics_port
    yield b
    b.stop()


def produce(bootstrap: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        p.produce(TOPIC, b"line %d" % i)
    assert p.flush(30) == 0


def test_counts_match_the_workload(broker):
    produce(broker.bootstrap, 500)
    consume_and_commit(broker.bootstrap, TOPIC, GROUP, 500)
    m = scrape(broker.metrics_port)
    topic = {"topic": TOPIC}
    assert m.get("logflume_broker_messages_in_total", **topic) == 500
    bytes_in = m.get("logflume_broker_bytes_in_total", **topic)
    # Batches are stored as produced: the log holds exactly what came in, and the one
    # consumer read it all (at least once).
    assert bytes_in > 500 * len(b"line 0")
    part = {"topic": TOPIC, "partition": "0"}
    assert m.get("logflume_broker_log_size_bytes", **part) == bytes_in
    assert m.get("logflume_broker_bytes_out_total", **topic) >= bytes_in
    assert m.get("logflume_broker_messages_out_total", **topic) == 500
    assert m.get("logflume_broker_log_end_offset", **part) == 500
    assert m.get("logflume_broker_high_watermark", **part) == 500
    assert m.get("logflume_broker_last_stable_offset", **part) == 500  # no transactions
    assert m.get("logflume_broker_log_segments", **part) == 1
    group = {"group": GROUP, **part}
    assert m.get("logflume_broker_group_committed_offset", **group) == 500
    assert m.get("logflume_broker_group_lag", **group) == 0
    assert m.get("logflume_broker_group_rebalances_total") >= 1
    produced = m.get("logflume_broker_requests_total", api="Produce")
    assert produced >= 1
    assert m.get("logflume_broker_request_duration_seconds_count", api="Produce") == produced
    # by version, as Kafka's RequestsPerSec: librdkafka 2.16 produces with v10 (KIP-951)
    by_version = {"api": "Produce", "version": "10"}
    assert m.get("logflume_broker_requests_by_version_total", **by_version) == produced
    assert m.get("logflume_broker_requests_total", api="Fetch") >= 1
    assert m.get("logflume_broker_active_controller") == 1
    assert m.get("logflume_broker_under_replicated_partitions") == 0
    assert m.get("logflume_broker_offline_partitions") == 0
    # the installed distribution's version, which `logflume --version` prints too
    assert m.get("logflume_build_info", component="broker", version=logflume.__version__) == 1
    capacity = m.get("logflume_broker_log_dir_capacity_bytes")
    assert 0 < m.get("logflume_broker_log_dir_available_bytes") <= capacity
    assert m.get("process_cpu_seconds_total") > 0

    produce(broker.bootstrap, 100)  # nobody reads these yet: the group lags by 100
    m = scrape(broker.metrics_port)
    assert m.get("logflume_broker_messages_in_total", **topic) == 600
    assert m.get("logflume_broker_group_lag", **group) == 100


def test_errors_and_bad_requests_are_counted(broker):
    with WireClient(broker.port) as c:
        r = c.request(ApiKey.FETCH, 11, fetch_body("no-such-topic", 0))
        assert r["responses"][0]["partitions"][0]["error_code"] != 0
    m = scrape(broker.metrics_port)
    assert (
        m.get(
            "logflume_broker_request_errors_total",
            api="Fetch",
            error="UNKNOWN_TOPIC_OR_PARTITION",
        )
        == 1
    )
    assert m.get("logflume_broker_invalid_requests_total") == 0
    with WireClient(broker.port) as c:
        c.send_raw(struct.pack(">i", 0x7FFFFFF0))  # larger than socket.request.max.bytes
        assert c.is_closed_by_peer()
    still_serving(broker.port)
    m = scrape(broker.metrics_port)
    assert m.get("logflume_broker_invalid_requests_total") == 1
    wait_until(
        lambda: scrape(broker.metrics_port).get("logflume_broker_connections") == 0,
        what="every test connection to be closed",
    )
    assert m.get("logflume_broker_connections_created_total") >= 3


def test_health(broker):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/health") as r:
        assert r.status == 200
        body = json.loads(r.read())
    assert body["status"] == "ok"
    assert body["broker_id"] == 0
    assert body["fenced"] is False


def test_a_scrape_collects_each_components_metrics_without_a_core():
    """BrokerMetrics keeps the event counters; the state comes from the collectors the
    composition root adds (here the purgatories')."""
    from prometheus_client import generate_latest

    from broker.metrics import BrokerMetrics
    from broker.server.purgatory import Purgatory, purgatory_metrics

    metrics = BrokerMetrics()
    metrics.isr_changed(3, 2)
    purgatories = (Purgatory("produce"), Purgatory("fetch"))
    metrics.add_collector(lambda: purgatory_metrics(purgatories))
    text = generate_latest(metrics.registry).decode()
    assert "logflume_broker_isr_shrinks_total 1.0" in text
    assert 'logflume_broker_purgatory_size{purgatory="fetch"} 0.0' in text
