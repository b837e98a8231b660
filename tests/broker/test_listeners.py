"""Listener settings: several named listeners, the security protocol map and Kafka's
inter-broker rules, each error naming its key."""

import pytest

from broker.config import BrokerConfig, ConfigError


def _config(tmp_path, **settings):
    return BrokerConfig({"log.dirs": str(tmp_path), **settings})


def test_two_listeners_with_their_protocols_and_advertised_addresses(tmp_path):
    cfg = _config(
        tmp_path,
        listeners="PLAINTEXT://0.0.0.0:9092,ssl://127.0.0.1:9093,INTERNAL://127.0.0.1:9094",
        **{
            "advertised.listeners": "SSL://broker1.example:19093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
            "inter.broker.listener.name": "internal",
        },
    )
    setup = cfg.listeners
    assert [(lst.name, lst.protocol) for lst in setup.listeners] == [
        ("PLAINTEXT", "PLAINTEXT"),
        ("SSL", "SSL"),
        ("INTERNAL", "SSL"),
    ]
    assert setup.advertised_address("PLAINTEXT") == ("127.0.0.1", 9092)  # 0.0.0.0 -> loopback
    assert setup.advertised_address("SSL") == ("broker1.example", 19093)
    assert setup.advertised_address("INTERNAL", bound_port=5555) == ("127.0.0.1", 5555)
    assert setup.inter_broker == "INTERNAL"


def test_inter_broker_listener_follows_the_security_protocol(tmp_path):
    cfg = _config(
        tmp_path,
        listeners="SSL://127.0.0.1:9093",
        **{"security.inter.broker.protocol": "SSL"},
    )
    assert cfg.listeners.inter_broker == "SSL"
    assert _config(tmp_path).listeners.inter_broker == "PLAINTEXT"


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, r"listeners: listener name PLAINTEXT"),
        ({"listeners": "PLAINTEXT://h:1,SSL://h:1"}, r"listeners: port 1"),
        ({"listeners": "PLAINTEXT://h:1,OTHER://h:2"}, r"listener\.security\.protocol\.map.*OTHER"),
        (
            {"listeners": "PLAINTEXT://h:1", "advertised.listeners": "SSL://h:2"},
            r"advertised\.listeners: SSL",
        ),
        (
            {"listeners": "PLAINTEXT://h:1,SASL_SSL://h:2"},
            r"sasl\.enabled\.mechanisms: GSSAPI \(Kafka's default\) is not served",
        ),
        (
            {"listeners": "PLAINTEXT://h:1", "listener.security.protocol.map": "PLAINTEXT:TLS"},
            r"listener\.security\.protocol\.map.*unknown security protocol",
        ),
        (
            {
                "listeners": "PLAINTEXT://h:1,SSL://h:2",
                "inter.broker.listener.name": "SSL",
                "security.inter.broker.protocol": "SSL",
            },
            r"Only one of inter\.broker\.listener\.name and security\.inter\.broker\.protocol",
        ),
        ({"listeners": "SSL://h:2"}, r"security\.inter\.broker\.protocol.*PLAINTEXT"),
        (
            {"listeners": "PLAINTEXT://h:1", "inter.broker.listener.name": "SSL"},
            r"inter\.broker\.listener\.name.*SSL",
        ),
        (
            {"listeners": "PLAINTEXT://h:1", "listener.name.ssl.ssl.client.auth": "required"},
            r"listener\.name\.ssl\.ssl\.client\.auth: there is no listener named SSL",
        ),
    ],
)
def test_listener_errors_name_the_key(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **settings)


def test_per_listener_ssl_overrides_and_unserved_keys(tmp_path):
    cfg = _config(
        tmp_path,
        listeners="PLAINTEXT://h:1,SSL://h:2,INTERNAL://h:3",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
            "ssl.client.auth": "requested",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.internal.ssl.keystore.location": "/k.pem",
            "ssl.keystore.password": "unused-by-pem",
            "listener.name.internal.sasl.login.refresh.window.factor": "0.8",
        },
    )
    assert cfg.ssl_settings("SSL")["ssl.client.auth"] == "requested"
    internal = cfg.ssl_settings("INTERNAL")
    assert internal["ssl.client.auth"] == "required"
    assert internal["ssl.keystore.location"] == "/k.pem"
    assert internal["ssl.truststore.type"] == "JKS"  # Kafka's default
    assert cfg.unused == [
        "listener.name.internal.sasl.login.refresh.window.factor",
        "ssl.keystore.password",
    ]


PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


def _plain_logins(*listeners: str) -> dict[str, str]:
    """PLAIN on each of these SASL listeners, with its JAAS entry."""
    entries = {f"listener.name.{name}.plain.sasl.jaas.config": PLAIN_JAAS for name in listeners}
    return {"sasl.enabled.mechanisms": "PLAIN", **entries}


def test_broker_wide_client_auth_applies_to_ssl_listeners_only(tmp_path):
    """KIP-684: a SASL_SSL listener takes ssl.client.auth only from its own
    listener.name.<l>.ssl.client.auth (default none); an SSL listener from its own or
    else the broker-wide key."""
    cfg = _config(
        tmp_path,
        listeners=(
            "SSL://h:1,MTLS://h:2,SASL_SSL://h:3,SASL_MTLS://h:4,SASL_PLAINTEXT://h:5,"
            "SASL_OPEN://h:6"
        ),
        **{
            "listener.security.protocol.map": (
                "SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,SASL_MTLS:SASL_SSL,"
                "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_OPEN:SASL_SSL"
            ),
            "security.inter.broker.protocol": "SSL",
            **_plain_logins("sasl_ssl", "sasl_mtls", "sasl_plaintext", "sasl_open"),
            "ssl.client.auth": "required",
            "listener.name.mtls.ssl.client.auth": "requested",
            "listener.name.sasl_mtls.ssl.client.auth": "requested",
            "listener.name.sasl_open.ssl.client.auth": "none",
        },
    )
    auth = {
        name: cfg.ssl_settings(name)["ssl.client.auth"]
        for name in ("SSL", "MTLS", "SASL_SSL", "SASL_MTLS", "SASL_OPEN")
    }
    assert auth == {
        "SSL": "required",
        "MTLS": "requested",
        "SASL_SSL": "none",
        "SASL_MTLS": "requested",
        "SASL_OPEN": "none",
    }
    assert cfg.client_auth_not_applied() == ["SASL_SSL"]  # SASL_OPEN set its own


def test_no_warning_when_client_auth_is_left_at_none(tmp_path):
    cfg = _config(
        tmp_path,
        listeners="SSL://h:1,SASL_SSL://h:3",
        **{
            "security.inter.broker.protocol": "SSL",
            **_plain_logins("sasl_ssl"),
        },
    )
    assert cfg.ssl_settings("SASL_SSL")["ssl.client.auth"] == "none"
    assert cfg.client_auth_not_applied() == []


def test_registration_round_trip_and_brokers_per_listener():
    """/brokers/ids/<id> as Kafka writes it, and Metadata's broker list for a client of
    one listener: each broker's endpoint of that listener, a broker without it left
    out."""
    from types import SimpleNamespace

    from broker.cluster import zk
    from broker.server.handlers.metadata import live_brokers

    protocols = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    both = zk.BrokerInfo(1, {"PLAINTEXT": ("h1", 9092), "SSL": ("h1", 9093)}, "r1")
    raw = zk.encode_broker(both, protocols)
    assert zk.decode_broker(1, raw) == both
    tls_only = zk.encode_broker(zk.BrokerInfo(2, {"SSL": ("h2", 9093)}), protocols)
    assert b'"host":null' in tls_only and b'"port":-1' in tls_only
    core = SimpleNamespace(
        broker_id=0,
        config={"broker.rack": None},
        advertised=lambda listener: ("h0", {"PLAINTEXT": 9092, "SSL": 9093}[listener]),
        cluster=SimpleNamespace(fenced=False, brokers={1: both, 2: zk.decode_broker(2, tls_only)}),
    )
    plain = [(b["node_id"], b["host"], b["port"]) for b in live_brokers(core, "PLAINTEXT")]
    assert plain == [(0, "h0", 9092), (1, "h1", 9092)]
    secure = [(b["node_id"], b["port"]) for b in live_brokers(core, "SSL")]
    assert secure == [(0, 9093), (1, 9093), (2, 9093)]


def test_describe_configs_hides_key_material(tmp_path):
    from types import SimpleNamespace

    from broker.server.handlers.configs import _broker_entries

    cfg = _config(
        tmp_path,
        listeners="PLAINTEXT://h:1,SSL://h:2",
        **{"ssl.keystore.key": "-----BEGIN PRIVATE KEY----- secret -----END PRIVATE KEY-----"},
    )
    entries = {
        e["name"]: e for e in _broker_entries(SimpleNamespace(config=cfg, broker_id=0), "0", {})
    }
    key = entries["ssl.keystore.key"]
    assert key["value"] is None and key["is_sensitive"] and key["synonyms"][0]["value"] is None
    assert entries["listeners"]["value"] == "PLAINTEXT://h:1,SSL://h:2"


JAAS_PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a-s";'
)


def test_sasl_listener_settings(tmp_path):
    cfg = _config(
        tmp_path,
        listeners="PLAINTEXT://h:1,SASL_SSL://h:2,INTERNAL://h:3",
        **{
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS_PLAIN,
            "listener.name.internal.sasl.enabled.mechanisms": "scram-sha-256",
        },
    )
    assert cfg.listeners.by_name("SASL_SSL").tls and cfg.listeners.by_name("SASL_SSL").sasl
    assert not cfg.listeners.by_name("INTERNAL").tls
    assert cfg.sasl["SASL_SSL"].mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert cfg.sasl["SASL_SSL"].plain_users == {"admin": "admin-secret", "alice": "a-s"}
    assert cfg.sasl["INTERNAL"].mechanisms == ("SCRAM-SHA-256",)
    assert "PLAINTEXT" not in cfg.sasl
    assert cfg.unused == []


@pytest.mark.parametrize(
    "settings, message",
    [
        ({}, r"sasl\.enabled\.mechanisms: GSSAPI \(Kafka's default\) is not served"),
        ({"sasl.enabled.mechanisms": "OAUTHBEARER"}, r"OAUTHBEARER is not served"),
        (
            {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI"},
            r"listener\.name\.sasl_plaintext\.sasl\.enabled\.mechanisms: GSSAPI is not",
        ),
        ({"sasl.enabled.mechanisms": "PLAIN"}, r"plain\.sasl\.jaas\.config: needed for PLAIN"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'X required a="1"',
            },
            r"listener\.name\.sasl_plaintext\.plain\.sasl\.jaas\.config: .*end with ';'",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'X required a="1";',
            },
            r"plain\.sasl\.jaas\.config: expected .*PlainLoginModule",
        ),
    ],
)
def test_sasl_errors_name_the_key(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, listeners="PLAINTEXT://h:1,SASL_PLAINTEXT://h:2", **settings)


def test_inter_broker_sasl_needs_the_brokers_own_credentials(tmp_path):
    base = {
        "listeners": "PLAINTEXT://h:1,SASL_SSL://h:2",
        "inter.broker.listener.name": "SASL_SSL",
        "zookeeper.connect": "127.0.0.1:2181",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol: GSSAPI"):
        _config(tmp_path, **base)
    base["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
    with pytest.raises(ConfigError, match=r"scram-sha-512\.sasl\.jaas\.config: needs username"):
        _config(tmp_path, **base)
    key = "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"
    base[key] = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="broker-secret";'
    )
    cfg = _config(tmp_path, **base)
    assert cfg.sasl["SASL_SSL"].jaas["SCRAM-SHA-512"].options["username"] == "broker"
    from types import SimpleNamespace

    from broker.server.handlers.configs import _broker_entries

    core = SimpleNamespace(config=cfg, broker_id=0)
    entries = {e["name"]: e for e in _broker_entries(core, "0", {})}
    assert entries["sasl.jaas.config"]["value"] is None  # never the JAAS text
    assert "broker-secret" not in repr(entries)
