"""`logflume console` against a 3-broker cluster (real ZooKeeper), in headless
Chromium: every broker listed, the controller the cluster reports, and a replicated
topic's partitions with 3 replicas, all in the ISR. Before the page, the console's
groups' read: its groups' coordinators spread over the brokers, it sends each
coordinator one OffsetFetch and one DescribeGroups (the brokers' request metrics)."""

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common.ports import free_port
from console.kafka import KafkaView
from tests.console.browser import (
    ConsoleProcess,
    save_screenshot,
    severe_browser_logs,
    text_of,
    wait_for_text,
)
from tests.console.records import commit, requests_by_api

TOPIC = "console-replicated"
GROUPS = [f"console-group-{i}" for i in range(9)]


def groups_read_once_per_coordinator(cluster, admin, metrics_ports) -> None:
    for group in GROUPS:
        commit(cluster.bootstrap, group, TOPIC, 1)
    described = admin.describe_consumer_groups(GROUPS, request_timeout=15)
    coordinators = {g: f.result(timeout=20).coordinator.id for g, f in described.items()}
    assert len(set(coordinators.values())) >= 2, coordinators  # spread, or no test
    view = KafkaView({"bootstrap.servers": cluster.bootstrap}, "nginx-stats", timeout=20.0)
    try:
        view.groups({})  # the coordinators found, once
        before = [requests_by_api(port) for port in metrics_ports]
        groups = view.groups({(TOPIC, 0): 5})
        after = [requests_by_api(port) for port in metrics_ports]
    finally:
        view.close()
    assert sorted(g["group"] for g in groups) == GROUPS
    assert all(g["partitions"][0]["committed"] == 1 for g in groups)
    for broker_id, (b, a) in enumerate(zip(before, after, strict=True)):
        sent = 1 if broker_id in coordinators.values() else 0
        for api in ("OffsetFetch", "DescribeGroups"):
            assert a.get(api, 0) - b.get(api, 0) == sent, (broker_id, api, coordinators)


def test_console_shows_a_three_broker_cluster(cluster_factory, tmp_path, driver):
    metrics_ports = [free_port() for _ in range(3)]
    cluster = cluster_factory(
        3, per_broker=lambda i: {"metrics.listen": f"127.0.0.1:{metrics_ports[i]}"}
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics(
        [NewTopic(TOPIC, num_partitions=2, replication_factor=3)], operation_timeout=15
    ).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(TOPIC, value=b"r%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    controller = admin.describe_cluster(request_timeout=10).result(timeout=15).controller.id
    groups_read_once_per_coordinator(cluster, admin, metrics_ports)

    console = ConsoleProcess(tmp_path, "--bootstrap-server", cluster.bootstrap).start()
    try:
        driver.get(console.url)
        wait_for_text(driver, "#controller", f"broker {controller}")
        wait_for_text(driver, "#brokers tbody", lambda t: t.count("127.0.0.1") == 3)
        for broker_id in (0, 1, 2):
            assert text_of(driver, f'[data-broker="{broker_id}"] .broker-id') == str(broker_id)
        role = f'[data-broker="{controller}"] td:last-child'
        assert text_of(driver, role) == "controller"
        wait_for_text(driver, f'tr.topic-row[data-topic="{TOPIC}"] .topic-name', TOPIC)
        for partition in (0, 1):
            row = f'tr[data-topic="{TOPIC}"][data-partition="{partition}"]'
            wait_for_text(driver, f"{row} .isr", lambda t: sorted(t.split(",")) == ["0", "1", "2"])
            assert sorted(text_of(driver, f"{row} .replicas").split(",")) == ["0", "1", "2"]
            assert text_of(driver, f"{row} .leader") in ("0", "1", "2")
        # sizes without --broker-metrics: a dash, and the page says why
        assert text_of(driver, f'tr[data-topic="{TOPIC}"][data-partition="0"] .size') == "—"
        assert "--broker-metrics" in text_of(driver, "#sizes-note")
        save_screenshot(driver, tmp_path, "console-cluster.png")
        assert severe_browser_logs(driver) == []
    finally:
        console.stop()
    assert console.proc.returncode == 0, console.log_text()
