"""The dynamic group configs' checks and values (broker/groups/group_config.py),
without a broker: Kafka's ISO-8601 durations, share.auto.offset.reset, the order and
messages of GroupConfig.validate, the alter operations, a group's effective config."""

from __future__ import annotations

import asyncio

import pytest

from broker.config import BrokerConfig
from broker.groups import group_config as gc
from broker.protocol import ErrorCode


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("PT1H30M", 5_400_000),
        ("P2D", 172_800_000),
        ("P1DT0.5S", 86_400_500),
        ("pt15m", 900_000),
        ("PT-1.5S", -1500),
        ("-PT1M", -60_000),
    ],
)
def test_iso_durations_as_java_reads_them(text, ms):
    assert gc.parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1H1D", "P1H", "PT1.H"])
def test_what_java_does_not_read_as_a_duration(text):
    with pytest.raises(ValueError):
        gc.parse_duration_ms(text)


@pytest.mark.parametrize(
    ("value", "now", "timestamp"),
    [
        ("earliest", 10_000_000, gc.EARLIEST_TIMESTAMP),
        ("latest", 10_000_000, gc.LATEST_TIMESTAMP),
        ("by_duration:PT1H", 10_000_000, 10_000_000 - 3_600_000),
        ("by_duration:PT0S", 10_000_000, 10_000_000),
    ],
)
def test_where_a_share_partition_starts(value, now, timestamp):
    assert gc.reset_timestamp(value, now) == timestamp


@pytest.mark.parametrize("value", ["by_duration", "by_duration:", "by_duration:-PT1H", "first"])
def test_reset_strategies_kafka_refuses(value):
    with pytest.raises(ValueError):
        gc.parse_reset(value)


def config(**extra) -> BrokerConfig:
    return BrokerConfig({"log.dirs": "/tmp/unused", **{k: str(v) for k, v in extra.items()}})


def test_a_groups_values_come_from_its_overrides_then_the_broker():
    values = gc.check({"share.heartbeat.interval.ms": " 6000 "}, config())
    assert values["share.heartbeat.interval.ms"] == 6000
    assert values["consumer.session.timeout.ms"] == 45000  # group.consumer.session.timeout.ms
    assert values["share.auto.offset.reset"] == "latest"  # no broker key: the default


def test_the_first_of_kafkas_checks_that_fails_is_answered():
    with pytest.raises(gc.GroupConfigError) as e:
        gc.check({"nope": "1", "consumer.session.timeout.ms": "x"}, config())
    assert (e.value.code, str(e.value)) == (
        ErrorCode.INVALID_CONFIG,
        "Unknown group config name: nope",
    )
    with pytest.raises(gc.GroupConfigError) as e:
        gc.check({"share.session.timeout.ms": "x", "consumer.session.timeout.ms": "y"}, config())
    assert "configuration consumer.session.timeout.ms" in str(e.value)  # Kafka's key order


def test_bounds_hold_the_groups_own_values_only():
    """A broker default outside Kafka's bounds (tests set them so) does not make every
    group's alter fail; a group's own value is held to them."""
    cfg = config(**{"group.consumer.session.timeout.ms": 10000})
    gc.check({"share.auto.offset.reset": "earliest"}, cfg)
    with pytest.raises(gc.GroupConfigError, match="greater than or equal to"):
        gc.check({"consumer.session.timeout.ms": "10000"}, cfg)


def test_alter_operations():
    current = {"share.auto.offset.reset": "earliest", "share.heartbeat.interval.ms": "6000"}
    changes = [
        {"name": "share.auto.offset.reset", "config_operation": gc.DELETE, "value": None},
        {"name": "share.session.timeout.ms", "config_operation": gc.SET, "value": "50000"},
    ]
    assert gc.apply_changes(current, changes, incremental=True) == {
        "share.heartbeat.interval.ms": "6000",
        "share.session.timeout.ms": "50000",
    }
    legacy = [{"name": "share.session.timeout.ms", "value": "50000"}]
    assert gc.apply_changes(current, legacy, incremental=False) == {
        "share.session.timeout.ms": "50000"
    }
    with pytest.raises(gc.GroupConfigError) as e:
        unknown = [{"name": "share.session.timeout.ms", "config_operation": 7, "value": "1"}]
        gc.apply_changes(current, unknown, incremental=True)
    assert e.value.code == ErrorCode.INVALID_REQUEST


class MemoryStore:
    """A stand-in for the group config stores: what was written, told back."""

    def __init__(self):
        self.on_change = None
        self.written: dict[str, dict] = {}

    async def load(self):
        pass

    async def write(self, name, props):
        self.written[name] = dict(props)
        self.on_change(name, props)


def test_the_effective_config_follows_the_store():
    store = MemoryStore()
    configs = gc.GroupConfigs(config(), store)
    assert configs.of("g") == gc.GroupConfig()
    change = {"name": "share.record.lock.duration.ms", "config_operation": gc.SET, "value": "20000"}
    asyncio.run(configs.alter("g", [change], incremental=True, validate_only=True))
    assert store.written == {}
    asyncio.run(configs.alter("g", [change], incremental=True, validate_only=False))
    assert configs.of("g").share_record_lock_duration_ms == 20000
    assert configs.of("other").share_record_lock_duration_ms == 30000
    store.on_change("g", {})  # every key deleted, by this broker or another
    assert configs.of("g") == gc.GroupConfig()
    store.on_change("g", {"share.record.lock.duration.ms": "1"})  # refused: ignored
    assert "g" not in configs.overrides
