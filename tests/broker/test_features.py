"""Feature levels (broker/features.py): what ApiVersions reports at each version,
the config's levels, and ZooKeeper's /feature znode in Kafka's format."""

import orjson
import pytest

from broker.config import BrokerConfig, ConfigError
from broker.features import SUPPORTED, FinalizedFeatures


def config(tmp_path, *settings: str) -> BrokerConfig:
    return BrokerConfig.load(None, list(settings), tmp_path, "PLAINTEXT://127.0.0.1:9092")


def test_transaction_version_is_finalized_at_2_by_default_and_can_be_pinned(tmp_path):
    assert [(f.name, f.min_level, f.max_level) for f in SUPPORTED] == [
        ("group.version", 0, 1),
        ("share.version", 0, 1),
        ("transaction.version", 0, 2),
    ]
    assert FinalizedFeatures.from_config(config(tmp_path)).transaction_version == 2
    pinned = FinalizedFeatures.from_config(config(tmp_path, "transaction.version=1"))
    assert (pinned.transaction_version, pinned.epoch) == (1, 0)


@pytest.mark.parametrize("level", ["3", "-1"])
def test_an_unsupported_level_is_refused_with_the_range(tmp_path, level):
    with pytest.raises(ConfigError, match=r"transaction.version: supported levels are 0-2"):
        config(tmp_path, f"transaction.version={level}")


def test_the_znode_is_kafkas_version_2_and_a_broker_follows_it():
    mine = FinalizedFeatures({"transaction.version": 2})
    assert orjson.loads(mine.znode()) == {
        "version": 2,
        "status": 1,
        "features": {"transaction.version": {"max_version_level": 2}},
    }
    other = FinalizedFeatures({"transaction.version": 2})
    other.adopt_znode(
        b'{"version":1,"status":1,"features":{"transaction.version":'
        b'{"min_version_level":1,"max_version_level":1},"unknown.version":{"max_version_level":3}}}',
        7,
    )
    # group.version is not listed: finalized at 0
    assert (other.levels, other.epoch) == (
        {"transaction.version": 1, "group.version": 0, "share.version": 0},
        7,
    )
    # a feature the znode does not list is finalized at 0 (Kafka's ZK brokers' default)
    none = FinalizedFeatures({"transaction.version": 2})
    none.adopt_znode(b'{"version":2,"status":1,"features":{}}', 0)
    assert none.transaction_version == 0
    assert none.api_versions_fields(4)["finalized_features"] == []


@pytest.mark.parametrize(
    "data", [b"not json", b'{"features":{"transaction.version":{}}}', b'{"features":[1]}']
)
def test_an_unreadable_znode_keeps_the_configured_levels(data):
    features = FinalizedFeatures({"transaction.version": 2})
    features.adopt_znode(data, 3)
    assert (features.transaction_version, features.epoch) == (2, -1)


def test_a_level_the_broker_does_not_support_is_not_taken():
    features = FinalizedFeatures({"transaction.version": 2}, epoch=0)
    features.adopt_znode(b'{"features":{"transaction.version":{"max_version_level":9}}}', 4)
    assert features.transaction_version == 2
