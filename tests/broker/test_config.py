"""broker/config.py: server.properties syntax, layered settings and defaults, synonyms,
errors that name the key, listener forms."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cluster.replica_manager import default_log_config
from broker.config import BrokerConfig, ConfigError, read_properties
from broker.listeners import parse_addresses

KAFKA_SERVER_PROPERTIES = Path(__file__).parent / "kafka-3.9-server.properties"


def test_properties_syntax_is_javas(tmp_path):
    f = tmp_path / "p.properties"
    f.write_bytes(
        b"# comment\n! also\na=1\nb : two\nc three\nd = x \\\n   y\n\nempty=\n"
        b"a\\=b=c\nname=caf\\u00e9\nlatin1=\xe9t\xe9\n  indented.key = v\n"
    )
    assert read_properties(f) == {
        "a": "1",
        "b": "two",
        "c": "three",
        "d": "x y",
        "empty": "",
        "a=b": "c",
        "name": "caf\u00e9",
        "latin1": "\u00e9t\u00e9",
        "indented.key": "v",
    }


def test_kafkas_stock_server_properties_loads_with_its_unused_keys_listed():
    cfg = BrokerConfig.load(KAFKA_SERVER_PROPERTIES)
    assert cfg.unused == [
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "socket.receive.buffer.bytes",
        "socket.send.buffer.bytes",
    ]
    assert cfg.data_dir == Path("/tmp/kafka-logs")
    assert cfg["zookeeper.connect"] == "localhost:2181"
    assert cfg["group.initial.rebalance.delay.ms"] == 0


@pytest.mark.parametrize(
    "typo, suggestion",
    [
        ("num.partiton", "num.partitions"),
        ("log.retention.hour", "log.retention.hours"),
        ("num.network.thread", "num.network.threads"),  # a Kafka key we do not use
    ],
)
def test_a_typo_is_an_error_with_the_nearest_key(tmp_path, typo, suggestion):
    with pytest.raises(
        ConfigError, match=f"{typo}: unknown broker config key .did you mean {suggestion}"
    ):
        BrokerConfig.load(None, [f"{typo}=1"], tmp_path)


def test_a_bad_unicode_escape_names_the_file(tmp_path):
    f = tmp_path / "bad.properties"
    f.write_text("name=\\u00zz\n")
    with pytest.raises(ConfigError, match="bad.properties"):
        BrokerConfig.load(f, [], tmp_path)


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
    (listener,) = cfg.listeners.listeners
    assert (listener.name, listener.host, listener.port) == ("PLAINTEXT", "0.0.0.0", 9999)
    assert cfg.listeners.advertised_address("PLAINTEXT") == ("127.0.0.1", 9999)
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
        ("metrics.listen=9100", "metrics.listen"),
        ("authorizer.class.name=com.example.MyAuthorizer", "authorizer.class.name"),
    ],
)
def test_config_errors_name_the_key(tmp_path, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.load(None, [override], tmp_path)


def test_authorizer_settings(tmp_path):
    assert BrokerConfig.load(None, [], tmp_path)["authorizer.class.name"] == ""
    for name in (
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ):
        cfg = BrokerConfig.load(
            None,
            [f"authorizer.class.name={name}", "super.users=User:a;User:b"],
            tmp_path,
        )
        assert cfg["authorizer.class.name"] == name and cfg["super.users"] == "User:a;User:b"
        assert cfg["allow.everyone.if.no.acl.found"] is False


KRAFT_PROPERTIES = """\
# A combined broker and controller, as Kafka 4 (KRaft only) configures one
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
log.dirs=/tmp/kraft-combined-logs
"""


def test_a_kraft_server_properties_is_refused_naming_the_file_and_keys(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(KRAFT_PROPERTIES)
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.load(f)
    assert str(refused.value) == (
        f"{f}: process.roles: this broker runs in ZooKeeper mode, not KRaft: remove it (every "
        "node here is a broker; ZooKeeper elects the controller) (other KRaft keys: node.id, "
        "controller.quorum.bootstrap.servers, controller.listener.names)"
    )


@pytest.mark.parametrize(
    "key, instead",
    [
        ("process.roles=broker", "remove it"),
        ("node.id=2", "use broker.id instead"),
        ("controller.quorum.voters=1@h:9093", "zookeeper.connect"),
        ("controller.quorum.bootstrap.servers=h:9093", "zookeeper.connect"),
        ("controller.quorum.election.timeout.ms=1000", "zookeeper.connect"),
        ("controller.listener.names=CONTROLLER", "remove it, and the controller's listener"),
    ],
)
def test_each_kraft_key_says_what_to_use_instead(tmp_path, key, instead):
    name = key.split("=")[0]
    f = tmp_path / "one.properties"
    f.write_text(f"broker.id=2\n{key}\n")
    where = re.escape(f"{f}: {name}: this broker runs in ZooKeeper mode")
    with pytest.raises(ConfigError, match=f"^{where}"):
        BrokerConfig.load(f, [], tmp_path)
    with pytest.raises(ConfigError, match=f"^{re.escape(name)}: .*{re.escape(instead)}"):
        BrokerConfig.load(None, [key], tmp_path)


def test_logflume_broker_exits_on_a_kraft_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(KRAFT_PROPERTIES)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "logflume",
            "broker",
            "--config",
            str(f),
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"logflume broker: configuration error: {f}: process.roles: ")


def test_config_requires_data_dir():
    with pytest.raises(ConfigError, match="log.dirs"):
        BrokerConfig.load()


def test_listener_forms():
    def one(text):
        return parse_addresses(text, "listeners")

    assert one("PLAINTEXT://broker1:9093") == {"PLAINTEXT": ("broker1", 9093)}
    assert one("127.0.0.1:0") == {"PLAINTEXT": ("127.0.0.1", 0)}
    assert one("[::1]:9092") == {"PLAINTEXT": ("::1", 9092)}
    assert one("plaintext://:1,Ssl://h:2") == {"PLAINTEXT": ("0.0.0.0", 1), "SSL": ("h", 2)}


@pytest.mark.parametrize(
    "setting, message",
    [
        ("log.message.format.version=0.10", "log.message.format.version: '0.10' is not a valid"),
        ("log.message.timestamp.type=Now", "log.message.timestamp.type: 'Now' is not one of"),
        ("log.message.downconversion.enable=no", "log.message.downconversion.enable: 'no'"),
    ],
)
def test_a_bad_topic_default_names_the_broker_key(tmp_path, setting, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, [setting], tmp_path)


def test_deprecated_message_format_version_is_taken_as_kafka_takes_it(tmp_path):
    cfg = BrokerConfig.load(None, ["log.message.format.version=2.8"], tmp_path)
    assert cfg.topic_defaults()["message.format.version"] == "2.8"
    assert cfg.topic_default_source("message.format.version") == "log.message.format.version"
    assert "log.message.format.version" not in cfg.unused
