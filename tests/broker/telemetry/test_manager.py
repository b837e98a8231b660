"""GetTelemetrySubscriptions and PushTelemetry rules (ClientMetricsManager) over an
in-memory subscription store and a hand-driven clock: throttling, subscription
changes, terminating pushes, limits, bad payloads, expiry."""

import asyncio

import pytest

from broker.protocol import ErrorCode
from broker.telemetry.manager import ZERO, ClientMetricsManager
from broker.telemetry.subscriptions import ClientMetricsConfigError
from common.compression import Codec, compress
from tests.broker.telemetry.otlp import gauge, payload

CLIENT = {
    "client_id": "sink-1",
    "client_software_name": "librdkafka",
    "client_software_version": "2.16.0",
    "client_source_address": "127.0.0.1",
    "client_source_port": "5000",
}
PRODUCER = "org.apache.kafka.producer."


class MemoryStore:
    def __init__(self):
        self.on_change = None
        self.stored = {}

    async def load(self):
        for name, props in self.stored.items():
            self.on_change(name, props)

    async def write(self, name, props):
        self.stored[name] = props
        self.on_change(name, props)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def manager(clock, max_bytes=1 << 20, **subs) -> ClientMetricsManager:
    m = ClientMetricsManager(MemoryStore(), max_bytes, clock)
    for name, props in subs.items():
        alter(m, name, props)
    return m


def alter(m, name, props):
    changes = [{"name": k, "config_operation": 0, "value": v} for k, v in props.items()]
    asyncio.run(m.alter(name, changes, incremental=True, validate_only=False))


def push(m, sub, instance, data=b"", terminating=False, codec=Codec.NONE):
    body = {
        "client_instance_id": instance,
        "subscription_id": sub["subscription_id"],
        "terminating": terminating,
        "compression_type": int(codec),
        "metrics": compress(codec, data) if data else b"",
    }
    return m.push(body, CLIENT)


def exported(m) -> set[str]:
    return {s.name for f in m.collect() for s in f.samples if s.name.startswith("org_")}


def test_nothing_is_advertised_or_asked_without_a_subscription(clock):
    m = manager(clock)
    assert not m.advertised()
    answer = m.filter_api_versions({"api_keys": [{"api_key": k} for k in (0, 71, 72, 74)]})
    assert [k["api_key"] for k in answer["api_keys"]] == [0, 74]
    sub = m.get_subscriptions(ZERO, CLIENT)
    assert sub["error_code"] == 0 and sub["requested_metrics"] == []
    assert sub["client_instance_id"] != ZERO and sub["push_interval_ms"] == 300000


def test_a_new_client_gets_an_id_and_its_subscription(clock):
    m = manager(clock, producers={"metrics": PRODUCER, "interval.ms": "1000"})
    assert m.advertised()
    sub = m.get_subscriptions(ZERO, CLIENT)
    assert sub["requested_metrics"] == [PRODUCER] and sub["push_interval_ms"] == 1000
    assert sub["accepted_compression_types"] == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
    assert sub["telemetry_max_bytes"] == 1 << 20 and sub["delta_temporality"] is False
    again = m.get_subscriptions(ZERO, CLIENT)
    assert again["client_instance_id"] != sub["client_instance_id"]


def test_pushes_are_throttled_to_the_interval(clock):
    m = manager(clock, producers={"metrics": PRODUCER, "interval.ms": "1000"})
    sub = m.get_subscriptions(ZERO, CLIENT)
    me = sub["client_instance_id"]
    clock.now += 0.2  # the first push after a get may come early (jitter)
    assert push(m, sub, me, payload(gauge(PRODUCER + "a", 1))) == ErrorCode.NONE
    clock.now += 0.5
    assert push(m, sub, me) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert m.get_subscriptions(me, CLIENT)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.now += 0.5
    assert push(m, sub, me) == ErrorCode.NONE
    assert exported(m) == {"org_apache_kafka_producer_a"}


def test_a_changed_subscription_is_unknown_then_fetched_at_once(clock):
    m = manager(clock, producers={"metrics": PRODUCER, "interval.ms": "1000"})
    sub = m.get_subscriptions(ZERO, CLIENT)
    me = sub["client_instance_id"]
    assert push(m, sub, me) == ErrorCode.NONE
    alter(m, "all", {"metrics": "*", "interval.ms": "500"})
    clock.now += 1
    assert push(m, sub, me) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 0.01
    new = m.get_subscriptions(me, CLIENT)  # not throttled: the subscriptions changed
    assert new["error_code"] == 0 and new["requested_metrics"] == ["*"]
    assert new["push_interval_ms"] == 500 and new["subscription_id"] != sub["subscription_id"]
    assert push(m, new, me) == ErrorCode.NONE


def test_limits_and_bad_payloads_are_kafkas_errors(clock):
    m = manager(clock, max_bytes=100, producers={"metrics": PRODUCER, "interval.ms": "100"})
    sub = m.get_subscriptions(ZERO, CLIENT)
    me = sub["client_instance_id"]
    big = payload(*(gauge(PRODUCER + f"metric{i}", i) for i in range(20)))
    assert push(m, sub, me, big) == ErrorCode.TELEMETRY_TOO_LARGE
    clock.now += 1
    assert push(m, sub, me, b"\xff\xfe\xfd not protobuf") == ErrorCode.INVALID_RECORD
    clock.now += 1
    bad_codec = {"client_instance_id": me, "subscription_id": sub["subscription_id"],
                 "terminating": False, "compression_type": 9, "metrics": b"x"}  # fmt: skip
    assert m.push(bad_codec, CLIENT) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    clock.now += 1
    assert push(m, sub, me, b"\x00garbage", codec=Codec.NONE) == ErrorCode.INVALID_RECORD
    clock.now += 1
    corrupt = bad_codec | {"compression_type": int(Codec.ZSTD), "metrics": b"not zstd"}
    assert m.push(corrupt, CLIENT) == ErrorCode.INVALID_RECORD
    assert push(m, sub, ZERO) == ErrorCode.INVALID_REQUEST
    clock.now += 1
    small = payload(gauge(PRODUCER + "a", 1))
    for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD):
        clock.now += 1
        assert push(m, sub, me, small, codec=codec) == ErrorCode.NONE, codec


def test_a_terminating_push_is_taken_early_and_is_the_last(clock):
    m = manager(clock, producers={"metrics": PRODUCER, "interval.ms": "1000"})
    sub = m.get_subscriptions(ZERO, CLIENT)
    me = sub["client_instance_id"]
    assert push(m, sub, me, payload(gauge(PRODUCER + "a", 1))) == ErrorCode.NONE
    clock.now += 0.1
    assert push(m, sub, me, payload(gauge(PRODUCER + "a", 2)), terminating=True) == 0
    clock.now += 5
    assert push(m, sub, me) == ErrorCode.INVALID_REQUEST
    clock.now += 0.5
    assert exported(m) == set()  # gone one interval after the terminating push


def test_a_client_that_stops_pushing_disappears_after_three_intervals(clock):
    m = manager(clock, producers={"metrics": PRODUCER, "interval.ms": "1000"})
    sub = m.get_subscriptions(ZERO, CLIENT)
    me = sub["client_instance_id"]
    assert push(m, sub, me, payload(gauge(PRODUCER + "a", 1))) == ErrorCode.NONE
    clock.now += 2.9
    assert exported(m) == {"org_apache_kafka_producer_a"}
    clock.now += 0.2
    assert exported(m) == set()


def test_an_instance_unknown_here_is_taken_up_with_the_same_subscription(clock):
    subs = {"metrics": PRODUCER, "interval.ms": "1000"}
    first, other = manager(clock, producers=subs), manager(clock, producers=subs)
    sub = first.get_subscriptions(ZERO, CLIENT)
    me = sub["client_instance_id"]
    assert push(other, sub, me, payload(gauge(PRODUCER + "a", 1))) == ErrorCode.NONE
    assert exported(other) == {"org_apache_kafka_producer_a"}


def test_subscriptions_are_described_listed_and_removed(clock):
    m = manager(clock, b={"metrics": "*"}, a={"interval.ms": "1000"})
    assert m.names() == ["a", "b"] and m.describe("b") == {"metrics": "*"}
    assert m.describe("missing") == {}
    changes = [{"name": "metrics", "config_operation": 1, "value": None}]
    asyncio.run(m.alter("b", changes, incremental=True, validate_only=False))
    assert m.names() == ["a"]
    too_fast = [{"name": "interval.ms", "config_operation": 0, "value": "5"}]
    with pytest.raises(ClientMetricsConfigError):
        asyncio.run(m.alter("a", too_fast, incremental=True, validate_only=True))
    valid = [{"name": "interval.ms", "config_operation": 0, "value": "500"}]
    asyncio.run(m.alter("a", valid, incremental=True, validate_only=True))
    assert m.describe("a") == {"interval.ms": "1000"}  # validate_only writes nothing


def test_a_stored_subscription_kafka_would_refuse_is_ignored(clock):
    store = MemoryStore()
    store.stored = {"bad": {"interval.ms": "1"}, "good": {"metrics": "*"}}
    m = ClientMetricsManager(store, 1 << 20, clock)
    asyncio.run(m.start())
    assert m.names() == ["good"]


def test_instances_are_bounded_the_oldest_forgotten_first(clock, monkeypatch):
    monkeypatch.setattr("broker.telemetry.manager.MAX_INSTANCES", 3)
    m = manager(clock, producers={"metrics": PRODUCER})
    ids = [m.get_subscriptions(ZERO, CLIENT)["client_instance_id"] for _ in range(4)]
    assert list(m.instances) == ids[1:]
