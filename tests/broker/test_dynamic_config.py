"""The pure parts of dynamic broker configs: Kafka's checks and messages
(broker/dynamic_keys.py), the precedence of the layers and what a store's layer
does to the shared config (broker/dynamic_config.py, over a file store), and the
password encoder's format and round trip (broker/password_encoder.py)."""

import asyncio

import orjson
import pytest

from broker.config import BrokerConfig, ConfigError
from broker.config_ops import APPEND, DELETE, SET, SUBTRACT
from broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig, LocalBrokerConfigStore
from broker.dynamic_keys import (
    DynamicConfigError,
    apply_incremental,
    check_change,
    overlay,
    update_mode,
)
from broker.password_encoder import PasswordEncoder, PasswordEncoderError


@pytest.mark.parametrize(
    ("props", "per_broker", "message"),
    [
        ({"broker.id": "1"}, True, "Cannot update these configs dynamically: Set(broker.id)"),
        (
            {"zookeeper.connect": "x", "log.dirs": "/d"},
            True,
            "Cannot update these configs dynamically: Set(log.dirs, zookeeper.connect)",
        ),
        ({"listeners": "PLAINTEXT://:1"}, True, "Cannot update these configs dynamically"),
        ({"ssl.key.password": "p"}, True, "only per-listener using the listener prefix"),
        (
            {"listener.name.ssl.ssl.keystore.location": "/k.pem"},
            False,
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: Set(listener.name.ssl.ssl.keystore.location)",
        ),
        (
            {"listener.name.ssl.ssl.principal.mapping.rules": "DEFAULT"},
            True,
            "Configs cannot be updated dynamically for existing listener ListenerName(SSL)",
        ),
        (
            {"leader.replication.throttled.rate": "-1"},
            True,
            "Invalid value -1 for configuration leader.replication.throttled.rate: "
            "Value must be at least 0",
        ),
        (
            {"log.cleaner.backoff.ms": "soon"},
            False,
            "Invalid value soon for configuration log.cleaner.backoff.ms: "
            "Not a number of type LONG",
        ),
    ],
)
def test_changes_kafka_refuses(props, per_broker, message):
    with pytest.raises(DynamicConfigError) as e:
        check_change(props, per_broker)
    assert message in str(e.value)


def test_changes_kafka_accepts():
    check_change({"log.retention.ms": "1", "num.io.threads": "4"}, per_broker=False)
    check_change(
        {"listener.name.ssl.ssl.keystore.location": "/k.pem",
         "follower.replication.throttled.rate": "1024", "min.insync.replicas": "2"},
        per_broker=True,
    )  # fmt: skip
    assert update_mode("log.retention.ms") == "cluster-wide"
    assert update_mode("ssl.keystore.location") == "per-broker"
    assert update_mode("log.retention.hours") is None  # Kafka: the ms key only
    assert update_mode("listeners") is None  # listener reconfiguration not served


def test_incremental_operations_as_kafka():
    current = {"log.cleanup.policy": "delete", "message.max.bytes": "9"}
    ops = [
        {"name": "log.cleanup.policy", "config_operation": APPEND, "value": "compact"},
        {"name": "message.max.bytes", "config_operation": DELETE, "value": None},
        {"name": "log.retention.ms", "config_operation": SET, "value": "5"},
    ]
    assert apply_incremental(current, ops) == {
        "log.cleanup.policy": "delete,compact",
        "log.retention.ms": "5",
    }
    # SUBTRACT from an unset list key starts from its default
    ops = [{"name": "log.cleanup.policy", "config_operation": SUBTRACT, "value": "delete"}]
    assert apply_incremental({}, ops) == {"log.cleanup.policy": ""}
    with pytest.raises(DynamicConfigError, match="append is not allowed for config key"):
        apply_incremental(
            {}, [{"name": "log.retention.ms", "config_operation": APPEND, "value": "1"}]
        )


def test_overlay_drops_the_synonyms_below():
    props = {"log.roll.hours": "2", "log.retention.ms": "10"}
    overlay(props, {"log.roll.ms": "500", "log.retention.hours": "3"})
    assert props == {"log.roll.ms": "500", "log.retention.hours": "3"}


def _dynamic(tmp_path, **static) -> tuple[DynamicBrokerConfig, LocalBrokerConfigStore]:
    config = BrokerConfig({"log.dirs": str(tmp_path), **static})
    store = LocalBrokerConfigStore(tmp_path)
    return DynamicBrokerConfig(config, store, []), store


def test_precedence_per_broker_then_default_then_static(tmp_path):
    dyn, store = _dynamic(tmp_path, **{"message.max.bytes": "3000", "log.roll.hours": "5"})
    config = dyn.config
    asyncio.run(dyn.alter("", {"message.max.bytes": "2000", "log.roll.ms": "60000"}, False))
    assert config["message.max.bytes"] == 2000
    assert config.roll_ms() == 60000  # a dynamic log.roll.ms beats a static log.roll.hours
    asyncio.run(dyn.alter("0", {"message.max.bytes": "1000"}, False))
    assert config["message.max.bytes"] == 1000
    assert config.dynamic_default == {"message.max.bytes": "2000", "log.roll.ms": "60000"}
    asyncio.run(dyn.alter("0", {}, False))
    assert config["message.max.bytes"] == 2000
    asyncio.run(dyn.alter("", {}, False))
    assert (config["message.max.bytes"], config.roll_ms()) == (3000, 5 * 3_600_000)
    asyncio.run(dyn.alter("", {"message.max.bytes": "100"}, validate_only=True))
    assert config["message.max.bytes"] == 3000
    assert orjson.loads(store.path.read_bytes())["brokers"] == {}


def test_a_stored_layer_is_checked_key_by_key(tmp_path):
    dyn, store = _dynamic(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(
        orjson.dumps({"version": 1, "brokers": {
            DEFAULT_ENTITY: {"log.retention.ms": "1000", "broker.id": "5"},
            "0": {"listener.name.plaintext.ssl.key.password": "not-encoded"},
        }})
    )  # fmt: skip
    asyncio.run(dyn.start())
    assert dyn.config.dynamic_default == {"log.retention.ms": "1000"}  # broker.id dropped
    assert dyn.config.dynamic_broker == {}  # a password without an encoder: dropped
    assert dyn.config.retention_ms() == 1000
    with pytest.raises(DynamicConfigError, match="Invalid dynamic configuration"):
        asyncio.run(dyn.alter("", {"message.max.bytes": "0"}, False))


def test_passwords_are_stored_encrypted_and_only_per_broker(tmp_path):
    dyn, store = _dynamic(tmp_path, **{"password.encoder.secret": "s3"})
    key = "listener.name.plaintext.ssl.key.password"
    with pytest.raises(DynamicConfigError, match="at default cluster level"):
        asyncio.run(dyn.alter("", {"sasl.jaas.config": "x"}, False))
    asyncio.run(dyn.alter("0", {key: "pw-in-clear"}, False))
    raw = store.path.read_bytes()
    assert b"pw-in-clear" not in raw
    assert PasswordEncoder("s3").decode(orjson.loads(raw)["brokers"]["0"][key]) == "pw-in-clear"
    assert dyn.config.dynamic_broker == {key: "pw-in-clear"}
    # a restart with the secret rotated: the old one decodes, the new one re-encrypts
    config = BrokerConfig({"log.dirs": str(tmp_path), "password.encoder.secret": "new",
                           "password.encoder.old.secret": "s3"})  # fmt: skip
    again = DynamicBrokerConfig(config, LocalBrokerConfigStore(tmp_path), [])
    asyncio.run(again.start())
    assert config.dynamic_broker == {key: "pw-in-clear"}
    stored = orjson.loads(store.path.read_bytes())["brokers"]["0"][key]
    assert PasswordEncoder("new").decode(stored) == "pw-in-clear"


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
def test_password_encoder_round_trip_and_format(cipher):
    encoder = PasswordEncoder("secret", cipher=cipher, key_length=256, iterations=1000)
    encoded = encoder.encode("hunter2 ✓")
    fields = dict(item.split(":", 1) for item in encoded.split(","))
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512"
    assert (fields["cipherAlgorithm"], fields["keyLength"], fields["iterations"]) == (
        cipher,
        "256",
        "1000",
    )
    assert fields["passwordLength"] == "9" and "initializationVector" in fields
    assert "hunter2" not in encoded
    assert encoder.decode(encoded) == "hunter2 ✓"
    # the parameters travel with the value: another encoder with the secret decodes it
    assert PasswordEncoder("secret").decode(encoded) == "hunter2 ✓"
    with pytest.raises(PasswordEncoderError):
        PasswordEncoder("wrong").decode(encoded)
    with pytest.raises(PasswordEncoderError):
        encoder.decode("keyFactoryAlgorithm:PBKDF2WithHmacSHA512")


def test_password_encoder_settings_are_checked_at_start(tmp_path):
    for key, value in (
        ("password.encoder.cipher.algorithm", "DES/ECB/NoPadding"),
        ("password.encoder.key.length", "100"),
        ("password.encoder.iterations", "10"),
    ):
        with pytest.raises(ConfigError, match="password.encoder"):
            BrokerConfig({"log.dirs": str(tmp_path), key: value})
