"""The consumer protocol's broker settings: Kafka's names and defaults, refused with
the key named when they cannot work."""

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.groups.config import CoordinatorConfig


def test_defaults_and_overrides(tmp_path):
    cfg = CoordinatorConfig.from_broker_config(BrokerConfig({"log.dirs": str(tmp_path)}))
    assert cfg.consumer_session_timeout_ms == 45000
    assert cfg.consumer_heartbeat_interval_ms == 5000
    assert cfg.consumer_assignors == ("uniform", "range")
    mine = BrokerConfig({"log.dirs": str(tmp_path), "group.consumer.assignors": "range"})
    assert CoordinatorConfig.from_broker_config(mine).consumer_assignors == ("range",)
    assert cfg.consumer_migration_policy == "bidirectional"
    policy = BrokerConfig({"log.dirs": str(tmp_path), "group.consumer.migration.policy": "UPGRADE"})
    assert CoordinatorConfig.from_broker_config(policy).consumer_migration_policy == "upgrade"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group.consumer.assignors": "sticky"}, "unknown assignor 'sticky'"),
        ({"group.consumer.assignors": " , "}, "at least one assignor"),
        ({"group.consumer.heartbeat.interval.ms": "50000"}, "must be less than"),
        ({"group.consumer.session.timeout.ms": "0"}, "must be > 0"),
        ({"group.consumer.migration.policy": "sideways"}, "is not one of bidirectional"),
    ],
)
def test_bad_settings_name_the_key(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message) as e:
        BrokerConfig({"log.dirs": str(tmp_path), **settings})
    assert "group.consumer." in str(e.value)
