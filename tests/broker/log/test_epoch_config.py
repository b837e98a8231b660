import pytest

from broker.log import TOPIC_CONFIG_NAMES, LeaderEpochCache, LogConfig
from broker.log.checkpoint import CheckpointError, read_offsets, write_offsets
from broker.log.config import is_kafka_version


def test_leader_epoch_cache(tmp_path):
    leo = [100]
    cache = LeaderEpochCache(tmp_path, lambda: leo[0])
    assert cache.end_offset_for(0) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch, later offset: no change
    cache.assign(3, 20)
    cache.assign(4, 50)
    assert cache.entries == [(1, 0), (3, 20), (4, 50)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 20\n4 50\n"
    assert cache.end_offset_for(4) == (4, 100)
    assert cache.end_offset_for(3) == (3, 50)
    assert cache.end_offset_for(2) == (1, 20)  # unknown epoch: the largest below it
    assert cache.end_offset_for(0) == (0, 0)  # below the first epoch
    assert cache.end_offset_for(5) == (-1, -1)
    assert cache.end_offset_for(-1) == (-1, -1)
    cache.assign(2, 30)  # an older epoch at a later offset rewrites history after it
    assert cache.entries == [(1, 0), (2, 30)]
    cache.assign(3, 40)
    cache.assign(4, 60)
    cache.truncate_from_end(45)
    assert cache.entries == [(1, 0), (2, 30), (3, 40)]
    cache.truncate_from_start(35)
    assert cache.entries == [(2, 35), (3, 40)]
    again = LeaderEpochCache(tmp_path, lambda: 0)
    assert again.entries == [(2, 35), (3, 40)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n5\n1 2\n")
    assert LeaderEpochCache(tmp_path, lambda: 0).entries == []
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_offset_checkpoint_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("b", 1): 7, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert read_offsets(path) == {("a", 0): 42, ("b", 1): 7}
    assert read_offsets(tmp_path / "missing") == {}
    for bad in ("", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n"):
        path.write_text(bad)
        with pytest.raises(CheckpointError):
            read_offsets(path)


def test_log_config_props():
    cfg = LogConfig.from_props(
        {"retention.ms": "-1", "cleanup.policy": "delete,compact", "segment.bytes": "1048576"}
    )
    assert (cfg.retention_ms, cfg.cleanup_policy, cfg.segment_bytes) == (
        -1,
        "compact,delete",
        1 << 20,
    )
    assert cfg.compact and cfg.delete
    assert LogConfig.from_props(cfg.to_props()) == cfg
    assert set(cfg.to_props()) == set(TOPIC_CONFIG_NAMES) == set(LogConfig.TOPIC_CONFIG_NAMES)
    assert LogConfig().to_props()["max.message.bytes"] == "1048588"
    derived = LogConfig.from_props({"flush.messages": "1"}, base=cfg)
    assert derived.flush_messages == 1 and derived.retention_ms == -1
    for key, value in [
        ("retention.ms", "soon"),
        ("segment.bytes", "3"),
        ("cleanup.policy", "keep"),
        ("message.timestamp.type", "Now"),
        ("unclean.leader.election.enable", "yes"),
        ("message.format.version", "0.10.0-IV2"),
        ("message.downconversion.enable", "no"),
        ("no.such.config", "1"),
    ]:
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            LogConfig.from_props({key: value})


def test_message_format_version_is_kept_as_given_and_checked_as_kafka_checks_it():
    """Deprecated and without effect since Kafka 3.0, yet Kafka 3.9 validates it as a
    version (MetadataVersion) and keeps what was given; default 3.0-IV1."""
    defaults = LogConfig().to_props()
    assert defaults["message.format.version"] == "3.0-IV1"
    assert defaults["message.downconversion.enable"] == "true"
    for good in ("0.8.2", "0.10.0", "0.10.0-IV1", "0.10.0.1", "0.11.0", "1.0", "2.8.1", "3.9"):
        assert is_kafka_version(good), good
        assert (
            LogConfig.from_props({"message.format.version": good}).to_props()[
                "message.format.version"
            ]
            == good
        )
    for bad in ("", "0.10", "0.8.0-IV0", "3.0-IV2", "3.0-IV01", "4.1", "2.8-IVx", "latest"):
        assert not is_kafka_version(bad), bad
    off = LogConfig.from_props({"message.downconversion.enable": "false"})
    assert off.message_downconversion_enable is False
