"""TLS listeners with real clients: one broker with three listeners,
PLAINTEXT, SSL (server-verified) and MTLS (SSL with ssl.client.auth=required, set as
Kafka's per-listener override), certificates from `common.certs` (what `logflume
certs` writes). confluent-kafka, kafka-python, aiokafka and kcat produce and consume
over TLS; Metadata and FindCoordinator name the port of the listener asked; clients
that must be refused are, without harm to the broker."""

import os
import ssl
import types

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey
from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess, wait_until
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body
from tests.interop.secure_clients import (
    aiokafka_round_trip,
    confluent_round_trip,
    end_offset,
    kafka_python_round_trip,
    kcat_round_trip,
)


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls")
    d = root / "certs"
    ca = certs.new_ca()
    ca_file = certs.write_ca(d, ca)
    broker_pem = certs.write_keystore(
        d, "broker", certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    )
    certs.write_keystore(d, "web1", certs.issue(ca, "web1", org="acme", unit="ops"))
    certs.write_keystore(d, "expired", certs.issue(ca, "old", valid_days=-2))
    certs.write_keystore(d, "stranger", certs.issue(certs.new_ca("other CA"), "web1"))
    plain, secure, mutual, metrics = (free_port() for _ in range(4))
    settings = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure},MTLS://127.0.0.1:{mutual}"
        ),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file),
        "listener.name.mtls.ssl.client.auth": "required",
        "metrics.listen": f"127.0.0.1:{metrics}",
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 3,
    }
    broker = BrokerProcess(root / "data", port=plain, settings=settings).start()
    for port in (secure, mutual, metrics):
        wait_for_port(port, proc=broker.proc)
    yield types.SimpleNamespace(
        broker=broker,
        dir=d,
        ca=str(ca_file),
        plain=plain,
        secure=secure,
        mutual=mutual,
        metrics=metrics,
    )
    broker.stop()


def _rdkafka(tls, mutual: bool, cert: str = "web1") -> dict:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{tls.mutual if mutual else tls.secure}",
        "security.protocol": "SSL",
        "ssl.ca.location": tls.ca,
    }
    if mutual:
        conf["ssl.certificate.location"] = str(tls.dir / f"{cert}.crt")
        conf["ssl.key.location"] = str(tls.dir / f"{cert}.key")
    return conf


def _create(tls, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{tls.plain}"})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_confluent_kafka_produces_and_consumes_in_a_group(tls, mutual):
    topic = f"ck-{'m' if mutual else 's'}"
    conf = _rdkafka(tls, mutual)
    values, brokers = confluent_round_trip(
        conf, topic, 1000, "1000 records over TLS", list_brokers=True
    )
    assert sorted(values) == sorted(b"v-%d" % i for i in range(1000))
    port = tls.mutual if mutual else tls.secure
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", port)]


def test_metadata_and_coordinator_name_the_listener_asked(tls):
    context = ssl.create_default_context(cafile=tls.ca)
    for port in (tls.plain, tls.secure):
        with WireClient(port) as client:
            if port != tls.plain:
                client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
            meta = client.request(ApiKey.METADATA, 1, {"topics": []})
            found = client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
            cluster = client.request(
                ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}
            )
        assert [(b["host"], b["port"]) for b in meta["brokers"]] == [("127.0.0.1", port)]
        assert (found["host"], found["port"]) == ("127.0.0.1", port)
        assert [b["port"] for b in cluster["brokers"]] == [port]


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_kafka_python_over_tls(tls, mutual):
    topic = f"kp-{'m' if mutual else 's'}"
    _create(tls, topic)
    conf = {
        "bootstrap_servers": f"127.0.0.1:{tls.mutual if mutual else tls.secure}",
        "security_protocol": "SSL",
        "ssl_cafile": tls.ca,
    }
    if mutual:
        conf |= {
            "ssl_certfile": str(tls.dir / "web1.crt"),
            "ssl_keyfile": str(tls.dir / "web1.key"),
        }
    assert kafka_python_round_trip(conf, topic, 300) == [b"kp-%d" % i for i in range(300)]


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_aiokafka_over_tls(tls, mutual):
    from aiokafka.helpers import create_ssl_context

    topic = f"aio-{'m' if mutual else 's'}"
    _create(tls, topic)
    files = {"certfile": str(tls.dir / "web1.crt"), "keyfile": str(tls.dir / "web1.key")}
    conf = {
        "bootstrap_servers": f"127.0.0.1:{tls.mutual if mutual else tls.secure}",
        "security_protocol": "SSL",
        "ssl_context": create_ssl_context(cafile=tls.ca, **(files if mutual else {})),
    }
    assert aiokafka_round_trip(conf, topic, 200) == [b"aio-%d" % i for i in range(200)]


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_kcat_over_tls(tls, mutual):
    lines = kcat_round_trip(_rdkafka(tls, mutual), f"kcat-{'m' if mutual else 's'}", 500)
    assert lines == [f"line-{i}" for i in range(500)]


def _produce_raw(tls, context: ssl.SSLContext | None, port: int, topic: str) -> str:
    """One Produce over a raw (TLS) socket; how it ended, for the assertion message."""
    try:
        with WireClient(port, timeout=5) as client:
            if context is not None:
                client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
            client.request(ApiKey.PRODUCE, 3, produce_body(topic, batch(b"must not land")))
            return "answered"
    except (ssl.SSLError, ConnectionError, TimeoutError, OSError) as e:
        return f"refused: {e!r}"


def test_refused_clients_write_nothing_and_the_broker_keeps_serving(tls):
    topic = "refused"
    _create(tls, topic)
    before = scrape(tls.metrics).get("logflume_broker_tls_handshake_failures_total")

    def mutual_client(name: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=tls.ca)
        ctx.load_cert_chain(str(tls.dir / f"{name}.pem"))
        return ctx

    outcomes = {
        "plaintext on SSL": _produce_raw(tls, None, tls.secure, topic),
        "no cert on MTLS": _produce_raw(
            tls, ssl.create_default_context(cafile=tls.ca), tls.mutual, topic
        ),
        "untrusted cert": _produce_raw(tls, mutual_client("stranger"), tls.mutual, topic),
        "expired cert": _produce_raw(tls, mutual_client("expired"), tls.mutual, topic),
    }
    assert all(o.startswith("refused") for o in outcomes.values()), outcomes
    wait_until(
        lambda: (
            scrape(tls.metrics).get("logflume_broker_tls_handshake_failures_total") >= before + 4
        ),
        timeout=10,
        what="four handshake failures counted",
    )
    assert end_offset(tls.plain, topic) == 0
    log = tls.broker.log_text()
    assert "TLS handshake with" in log and "Traceback" not in log
    assert "certificate has expired" in log  # the reason is told, once per connection
    assert tls.broker.proc.poll() is None
    assert _produce_raw(tls, None, tls.plain, topic) == "answered"
    assert _produce_raw(tls, mutual_client("web1"), tls.mutual, topic) == "answered"
    assert end_offset(tls.plain, topic) == 2


def test_a_large_fetch_over_tls_returns_the_bytes_plaintext_returns(tls):
    topic = "big"
    _create(tls, topic)
    producer = Producer(
        {"bootstrap.servers": f"127.0.0.1:{tls.plain}", "linger.ms": 20, "batch.size": 1 << 20}
    )
    for _ in range(400):
        producer.produce(topic, os.urandom(10_000))
    assert producer.flush(15) == 0
    body = fetch_body(topic, 0, max_bytes=8 << 20)
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = 8 << 20
    answers = []
    context = ssl.create_default_context(cafile=tls.ca)
    for port in (tls.plain, tls.secure):
        with WireClient(port, timeout=10) as client:
            if port == tls.secure:
                client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
            answer = client.request(ApiKey.FETCH, 11, body)
        answers.append(bytes(answer["responses"][0]["partitions"][0]["records"]))
    assert len(answers[0]) > 4_000_000
    assert answers[0] == answers[1]


def test_uvloop_serves_tls_and_refuses_plaintext(tls, tmp_path):
    """uvloop may hand a connection's first bytes to its protocol before a TLS layer
    put on it later could see them: the TLS listener must work with it too."""
    plain, secure = free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.dir / "broker.pem"),
    }
    broker = BrokerProcess(tmp_path / "uv", settings=settings, args=["--event-loop", "uvloop"])
    broker.start()
    try:
        wait_for_port(secure, proc=broker.proc)
        conf = {"bootstrap.servers": f"127.0.0.1:{secure}", "security.protocol": "SSL"}
        conf["ssl.ca.location"] = tls.ca
        for attempt in range(3):  # each a new connection and handshake
            producer = Producer(conf)
            producer.produce("uv", b"%d" % attempt)
            assert producer.flush(10) == 0
        with WireClient(plain) as client:
            client.request(ApiKey.METADATA, 1, {"topics": []})
        assert _produce_raw(tls, None, secure, "uv").startswith("refused")
        assert "uvloop loop" in broker.log_text()
    finally:
        broker.stop()
