"""Client telemetry (KIP-714) on a real broker process: confluent-kafka (librdkafka,
`enable.metrics.push` true by default) pushes its metrics once a client-metrics
subscription exists and they appear on the broker's /metrics; without one the APIs
are not listed and nothing is pushed; malformed pushes are answered with Kafka's
errors on a connection that stays open; subscriptions survive a restart."""

import uuid

import pytest
from confluent_kafka import Producer

from broker.protocol import ApiKey, ErrorCode
from common.compression import Codec, compress
from common.ports import free_port
from testkit.procs import BrokerProcess, wait_until
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient
from tests.broker.telemetry.otlp import gauge, payload

PRODUCER_METRICS = "org.apache.kafka.producer."
ZERO = uuid.UUID(int=0)
TELEMETRY_APIS = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}


@pytest.fixture
def broker(tmp_path):
    metrics_port = free_port()
    settings = {"metrics.listen": f"127.0.0.1:{metrics_port}", "telemetry.max.bytes": "2000"}
    b = BrokerProcess(tmp_path / "data", settings=settings).start()
    b.metrics_port = metrics_port
    yield b
    b.stop()


def subscribe(port: int, name: str, **props: str) -> None:
    configs = [
        {"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in props.items()
    ]
    body = {
        "resources": [{"resource_type": 16, "resource_name": name, "configs": configs}],
        "validate_only": False,
    }
    with WireClient(port) as c:
        answer = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert answer["responses"][0]["error_code"] == ErrorCode.NONE, answer


def listed(port: int) -> set[int]:
    with WireClient(port) as c:
        body = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})  # fmt: skip
    return {k["api_key"] for k in body["api_keys"]}


def client_series(metrics_port: int, client_id: str) -> dict[str, float]:
    text = scrape(metrics_port).text
    out = {}
    for line in text.splitlines():
        if line.startswith("org_apache_kafka_") and f'client_id="{client_id}"' in line:
            name, _, value = line.rpartition(" ")
            out[name.split("{")[0]] = float(value)
    return out


def test_without_a_subscription_nothing_is_listed_or_pushed(broker):
    assert not TELEMETRY_APIS & listed(broker.port)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quiet"})
    producer.produce("quiet", b"line")
    assert producer.flush(30) == 0
    producer.poll(1.0)  # time to ask for a subscription, were the APIs listed
    producer.close()
    m = scrape(broker.metrics_port)
    assert m.get("logflume_broker_requests_total", api="GetTelemetrySubscriptions") is None
    assert m.get("logflume_broker_client_metrics_instances") == 0
    assert "org_apache_kafka_" not in m.text


def test_a_subscribed_producer_shows_on_metrics_until_it_closes(broker):
    subscribe(broker.port, "producers", metrics=PRODUCER_METRICS, interval_ms="1000")
    assert TELEMETRY_APIS <= listed(broker.port)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "pushy"})
    for i in range(50):
        producer.produce("pushy", b"line %d" % i)
    assert producer.flush(30) == 0

    def pushed():
        producer.poll(0.1)
        return client_series(broker.metrics_port, "pushy")

    series = wait_until(pushed, what="the producer's pushed metrics")
    assert "org_apache_kafka_producer_record_queue_time_max" in series
    assert all(name.startswith("org_apache_kafka_producer_") for name in series)
    text = scrape(broker.metrics_port).text
    assert 'client_software_name="confluent-kafka-python"' in text
    assert 'node_id="0"' in text  # a data point's own attribute
    producer.close()  # a terminating push, then no more
    wait_until(
        lambda: not client_series(broker.metrics_port, "pushy"),
        what="the closed producer's series to expire",
    )
    m = scrape(broker.metrics_port)
    assert m.get("logflume_broker_requests_total", api="PushTelemetry") >= 2


def push_body(sub: dict, instance, **over) -> dict:
    return {
        "client_instance_id": instance,
        "subscription_id": sub["subscription_id"],
        "terminating": False,
        "compression_type": 0,
        "metrics": payload(gauge(PRODUCER_METRICS + "x", 1)),
    } | over


def push_when_due(c: WireClient, body: dict) -> int:
    """The answer to `body` once the push interval allows it (THROTTLING_QUOTA_EXCEEDED
    before)."""

    def answered():
        code = c.request(ApiKey.PUSH_TELEMETRY, 0, body)["error_code"]
        return None if code == ErrorCode.THROTTLING_QUOTA_EXCEEDED else (code,)

    (code,) = wait_until(answered, what="a push past the interval", every=0.05)
    return code


def test_malformed_pushes_are_answered_with_kafkas_errors_and_close_nothing(broker):
    subscribe(broker.port, "fast", metrics="*", interval_ms="100", match="client_id=fast-.*")
    subscribe(broker.port, "slow", metrics="*", interval_ms="60000", match="client_id=slow")
    with WireClient(broker.port) as c:
        c.client_id = "fast-1"
        sub = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})
        assert sub["error_code"] == 0 and sub["push_interval_ms"] == 100
        assert sub["requested_metrics"] == ["*"] and sub["telemetry_max_bytes"] == 2000
        me = sub["client_instance_id"]
        cases = [
            (push_body(sub, me, metrics=b"\xff\xfe not protobuf"), ErrorCode.INVALID_RECORD),
            (
                push_body(sub, me, compression_type=int(Codec.ZSTD), metrics=b"not zstd"),
                ErrorCode.INVALID_RECORD,
            ),
            (push_body(sub, me, metrics=bytes(2001)), ErrorCode.TELEMETRY_TOO_LARGE),
            (push_body(sub, me, compression_type=7), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
            (
                push_body(sub, me, subscription_id=sub["subscription_id"] + 1),
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
            ),  # fmt: skip
            (push_body(sub, ZERO), ErrorCode.INVALID_REQUEST),
        ]
        for body, code in cases:
            assert push_when_due(c, body) == code, body
        zstd = payload(gauge(PRODUCER_METRICS + "good", 7))
        good = push_body(
            sub, me, compression_type=int(Codec.ZSTD), metrics=compress(Codec.ZSTD, zstd)
        )
        assert push_when_due(c, good) == ErrorCode.NONE
        assert push_when_due(c, good | {"terminating": True}) == ErrorCode.NONE
        assert push_when_due(c, good) == ErrorCode.INVALID_REQUEST  # after the last push
        assert c.request(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0  # still open

        c.client_id = "slow"
        slow = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})
        assert slow["push_interval_ms"] == 60000
        mine = slow["client_instance_id"]
        assert c.request(ApiKey.PUSH_TELEMETRY, 0, push_body(slow, mine))["error_code"] == 0
        early = c.request(ApiKey.PUSH_TELEMETRY, 0, push_body(slow, mine))
        assert early["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        again = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": mine})
        assert again["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    m = scrape(broker.metrics_port)
    assert m.get("logflume_broker_invalid_requests_total") == 0


def test_subscriptions_survive_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        subscribe(b.port, "kept", metrics=PRODUCER_METRICS, interval_ms="2000")
        b.stop()
        b.start()
        assert TELEMETRY_APIS <= listed(b.port)
        with WireClient(b.port) as c:
            names = c.request(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, {})
            sub = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})
        assert names["client_metrics_resources"] == [{"name": "kept"}]
        assert sub["requested_metrics"] == [PRODUCER_METRICS] and sub["push_interval_ms"] == 2000
    finally:
        b.stop()


def test_a_sasl_listener_lists_the_apis_before_login_as_after(tmp_path):
    from testkit.secured import start_secured_broker

    secured = start_secured_broker(tmp_path, {"alice": "alice-secret"})
    try:
        plain = int(secured.plain.rsplit(":", 1)[1])
        sasl = int(secured.sasl_plaintext.rsplit(":", 1)[1])
        assert not TELEMETRY_APIS & listed(sasl)  # answered before any login
        subscribe(plain, "all", metrics="*")
        assert TELEMETRY_APIS <= listed(sasl)
    finally:
        secured.stop()
