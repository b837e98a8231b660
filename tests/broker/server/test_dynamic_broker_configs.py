"""Dynamic broker configs (KIP-226) on one broker process, through confluent-kafka's
AdminClient: per-broker ("0") and cluster-default ("") changes described with their
source and synonyms, applied live (message.max.bytes, the segment size topics
inherit, the replication throttles' rates), kept across a restart, read-only keys
refused with Kafka's message, and passwords refused without password.encoder.secret."""

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from broker.protocol import ApiKey, ErrorCode
from common.ports import free_port
from testkit.kafka import create_topic, produce
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient

TIMEOUT = 30


def _incremental(admin, name: str, ops: list[tuple[str, str, str | None]], validate=False):
    entries = [
        ConfigEntry(k, v or "", incremental_operation=AlterConfigOpType[op]) for op, k, v in ops
    ]
    resource = ConfigResource("BROKER", name, incremental_configs=entries)
    fs = admin.incremental_alter_configs([resource], validate_only=validate, request_timeout=10)
    fs[resource].result(TIMEOUT)


def _described(admin, name: str = "0") -> dict:
    resource = ConfigResource("BROKER", name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def _wire_describe(port: int, name: str = "") -> list[dict]:
    """DescribeConfigs over the wire codec: the resource "" (librdkafka refuses an
    empty name), and every synonym (confluent-kafka keys them by name, so a key set
    at two levels shows once)."""
    body = {
        "resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
    }
    with WireClient(port) as c:
        (result,) = c.request(ApiKey.DESCRIBE_CONFIGS, 1, body)["results"]
    assert result["error_code"] == 0, result
    return result["configs"]


def _synonyms(port: int, key: str) -> list[tuple]:
    (entry,) = [c for c in _wire_describe(port, "0") if c["name"] == key]
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def _alter_default(port: int, ops: list[tuple[int, str, str | None]], version: int = 0) -> dict:
    configs = [{"name": k, "config_operation": op, "value": v} for op, k, v in ops]
    body = {
        "resources": [{"resource_type": 4, "resource_name": "", "configs": configs}],
        "validate_only": False,
    }
    with WireClient(port) as c:
        return c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body)["responses"][0]


def _produce_error(bootstrap: str, topic: str, size: int) -> KafkaError | None:
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000})
    p.produce(topic, b"x" * size, on_delivery=lambda err, msg: errors.append(err))
    p.flush(TIMEOUT)
    return errors[0]


def test_per_broker_and_default_configs_apply_live_and_survive_a_restart(broker_factory):
    broker = broker_factory({"log.segment.bytes": 1_000_000})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(broker.bootstrap, "inherits")
    assert _produce_error(broker.bootstrap, "inherits", 200_000) is None

    _incremental(admin, "0", [("SET", "message.max.bytes", "100000")])
    mmb = _described(admin)["message.max.bytes"]
    assert (mmb.value, mmb.source, mmb.is_read_only) == (
        "100000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    assert _synonyms(broker.port, "message.max.bytes") == [
        ("message.max.bytes", "100000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG.value),
    ]
    err = _produce_error(broker.bootstrap, "inherits", 200_000)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE

    # the cluster-wide default: below the per-broker value, above the static one
    answer = _alter_default(broker.port, [(0, "log.segment.bytes", "4096"),
                                          (0, "message.max.bytes", "50000")])  # fmt: skip
    assert answer["error_code"] == 0, answer
    default = {c["name"]: c for c in _wire_describe(broker.port)}
    assert sorted(default) == ["log.segment.bytes", "message.max.bytes"]
    assert default["log.segment.bytes"]["config_source"] == 3
    described = _described(admin)
    seg = described["log.segment.bytes"]
    assert (seg.value, seg.source) == ("4096", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert _synonyms(broker.port, "log.segment.bytes") == [
        ("log.segment.bytes", "4096", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("log.segment.bytes", "1000000", ConfigSource.STATIC_BROKER_CONFIG.value),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG.value),
    ]
    assert [s[2] for s in _synonyms(broker.port, "message.max.bytes")] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        ConfigSource.DEFAULT_CONFIG.value,
    ]
    # the topic without its own segment.bytes inherits the new default: it rolls at 4 KiB
    topic = ConfigResource("TOPIC", "inherits")
    entry = admin.describe_configs([topic])[topic].result(TIMEOUT)["segment.bytes"]
    assert (entry.value, entry.source) == (
        "4096",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    for _ in range(3):  # one batch each, every one past 4 KiB: a roll before each
        produce(broker.bootstrap, "inherits", [b"y" * 5000])
    segments = sorted((broker.data_dir / "inherits-0").glob("*.log"))
    assert len(segments) >= 4

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = _described(admin)
    assert described["message.max.bytes"].value == "100000"
    assert described["log.segment.bytes"].value == "4096"
    err = _produce_error(broker.bootstrap, "inherits", 200_000)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    stored = orjson.loads((broker.data_dir / "meta" / "broker-configs.json").read_bytes())
    assert stored["brokers"]["0"] == {"message.max.bytes": "100000"}

    # DELETE: back to the cluster default, then to the static value
    _incremental(admin, "0", [("DELETE", "message.max.bytes", None)])
    assert _described(admin)["message.max.bytes"].value == "50000"
    answer = _alter_default(broker.port, [(1, "message.max.bytes", None)])
    assert answer["error_code"] == 0, answer
    mmb = _described(admin)["message.max.bytes"]
    assert (mmb.value, mmb.source) == ("1048588", ConfigSource.DEFAULT_CONFIG.value)
    assert _produce_error(broker.bootstrap, "inherits", 200_000) is None


REFUSALS = {
    "read-only": (
        "0",
        [("SET", "broker.id", "7")],
        "Cannot update these configs dynamically: Set(broker.id)",
    ),
    "read-only hours": (
        "0",
        [("SET", "log.retention.hours", "1")],
        "Cannot update these configs dynamically: Set(log.retention.hours)",
    ),
    "bare ssl key": (
        "0",
        [("SET", "ssl.keystore.location", "/tmp/x.pem")],
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)",
    ),
    "bad value": (
        "0",
        [("SET", "message.max.bytes", "big")],
        "Invalid value big for configuration message.max.bytes: Not a number of type INT",
    ),
    "password without a secret": (
        "0",
        [("SET", "listener.name.plaintext.ssl.key.password", "s3cret")],
        "Password encoder secret not configured",
    ),
    "append to a non-list": (
        "0",
        [("APPEND", "message.max.bytes", "1")],
        "Config value append is not allowed for config key: message.max.bytes",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_changes_kafka_refuses_are_refused_with_its_message(module_broker, name):
    resource, ops, message = REFUSALS[name]
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    with pytest.raises(KafkaException) as e:
        _incremental(admin, resource, ops)
    err = e.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == (
        f"Invalid config value for resource ConfigResource(type=BROKER, name='{resource}'): "
        f"{message}"
    )
    assert _described(admin)["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_validate_only_stores_nothing_and_other_ids_are_refused(module_broker):
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    _incremental(admin, "0", [("SET", "log.retention.ms", "1000")], validate=True)
    assert _described(admin)["log.retention.ms"].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value
    body = {
        "resources": [{"resource_type": 4, "resource_name": "5", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "1000"}]}],
        "validate_only": False,
    }  # fmt: skip
    with WireClient(module_broker.port) as c:
        (answer,) = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"]
    assert answer["error_code"] == ErrorCode.INVALID_REQUEST
    assert answer["error_message"] == "Unexpected broker id, expected 0, but received 5"
    # cluster-level only per broker: a listener's key at the default level
    answer = _alter_default(
        module_broker.port, [(0, "listener.name.plaintext.ssl.keystore.location", "/x")]
    )
    assert answer["error_code"] == ErrorCode.INVALID_CONFIG
    assert "Cannot update these configs at default cluster level" in answer["error_message"]


def test_keys_without_effect_here_are_stored_and_named_in_the_log(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _incremental(
        admin,
        "0",
        [("SET", "num.io.threads", "16"), ("SET", "leader.replication.throttled.rate", "1024")],
    )
    described = _described(admin)
    rate = described["leader.replication.throttled.rate"]
    assert (rate.value, rate.source) == ("1024", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert described["num.io.threads"].value == "16"
    assert "have no effect on this broker: ['num.io.threads']" in broker.log_text()


def test_replication_throttle_rates_follow_the_broker_then_the_default(broker_factory):
    """The bounds the broker enforces (its `replication_throttled_rate_limit` metric):
    this broker's dynamic value, else the cluster-wide default, else none."""
    port = free_port()
    broker = broker_factory({"metrics.listen": f"127.0.0.1:{port}"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def limits() -> tuple:
        samples = scrape(port)
        return tuple(
            samples.get("logflume_broker_replication_throttled_rate_limit", side=side)
            for side in ("leader", "follower")
        )

    assert limits() == (None, None)
    answer = _alter_default(broker.port, [(0, "follower.replication.throttled.rate", "5000")])
    assert answer["error_code"] == ErrorCode.NONE
    _incremental(admin, "0", [("SET", "leader.replication.throttled.rate", "1024")])
    assert limits() == (1024, 5000)
    _incremental(admin, "0", [("SET", "follower.replication.throttled.rate", "7")])
    assert limits() == (1024, 7)
    _incremental(
        admin,
        "0",
        [
            ("DELETE", "leader.replication.throttled.rate", None),
            ("DELETE", "follower.replication.throttled.rate", None),
        ],
    )
    assert limits() == (None, 5000)
    _alter_default(broker.port, [(1, "follower.replication.throttled.rate", None)])
    assert limits() == (None, None)
    assert "have no effect on this broker" not in broker.log_text()


def test_legacy_alter_configs_replaces_the_brokers_whole_set(broker):
    """AlterConfigs (librdkafka's test 0081 sets sasl.kerberos.min.time.before.relogin
    on a broker): the given keys become the resource's entire dynamic set."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _incremental(admin, "0", [("SET", "log.retention.ms", "3600000")])
    resource = ConfigResource(
        "BROKER", "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    described = _described(admin)
    entry = described["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source, entry.is_read_only) == (
        "58000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    assert described["log.retention.ms"].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value
