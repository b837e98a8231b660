"""broker/config.py: server.properties syntax, layered settings and defaults, synonyms,
errors that name the key, listener forms."""

import pytest

from broker.cluster.replica_manager import default_log_config
from broker.config import BrokerConfig, ConfigError, parse_listener, parse_properties


def test_properties_syntax():
    text = "# comment\n! also\na=1\nb : two\nc three\nd = x \\\n   y\n\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "three", "d": "x y", "empty": ""}


def test_config_layers_and_defaults(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=4\nlog.retention.hours=1\nauto.create.topics.enable=FALSE\n")
    cfg = BrokerConfig.load(f, ["num.partitions=6", "broker.id=3"], tmp_path / "d", "0.0.0.0:9999")
    assert cfg["num.partitions"] == 6
    assert cfg.broker_id == 3
    assert cfg["auto.create.topics.enable"] is False
    assert cfg["min.insync.replicas"] == 1
    assert cfg["offsets.topic.num.partitions"] == 50
    assert cfg["connections.max.idle.ms"] == 600000
    assert cfg.listen == ("0.0.0.0", 9999)
    assert cfg.advertised_address == ("127.0.0.1", 9999)
    log_cfg = default_log_config(cfg)
    assert log_cfg.retention_ms == 3_600_000
    assert log_cfg.segment_bytes == 1 << 30
    assert log_cfg.max_message_bytes == 1048588


def test_config_synonyms_precedence(tmp_path):
    cfg = BrokerConfig.load(
        None, ["log.retention.minutes=5", "log.retention.ms=1234", "log.roll.hours=2"], tmp_path
    )
    log_cfg = default_log_config(cfg)
    assert log_cfg.retention_ms == 1234
    assert log_cfg.segment_ms == 2 * 3_600_000
    assert cfg.topic_default_source("retention.ms") == "log.retention.ms"
    assert cfg.topic_default_source("segment.bytes") is None


@pytest.mark.parametrize(
    "override, key",
    [
        ("no.such.key=1", "no.such.key"),
        ("num.partitions=many", "num.partitions"),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable"),
        ("num.partitions=0", "num.partitions"),
        ("listeners=SSL://h:1", "listener"),
        ("advertised.listeners=nohostport", "listener"),
    ],
)
def test_config_errors_name_the_key(tmp_path, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.load(None, [override], tmp_path)


def test_config_requires_data_dir():
    with pytest.raises(ConfigError, match="log.dirs"):
        BrokerConfig.load()


def test_listener_forms():
    assert parse_listener("PLAINTEXT://broker1:9093") == ("broker1", 9093)
    assert parse_listener("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listener("[::1]:9092") == ("::1", 9092)
