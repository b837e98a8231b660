"""TLS listeners with real clients: one broker with three listeners,
PLAINTEXT, SSL (server-verified) and MTLS (SSL with ssl.client.auth=required, set as
Kafka's per-listener override), certificates from `common.certs` (what `logflume
certs` writes). confluent-kafka, kafka-python, aiokafka and kcat produce and consume
over TLS; Metadata and FindCoordinator name the port of the listener asked; clients
that must be refused are, without harm to the broker."""

import asyncio
import os
import ssl
import subprocess
import types

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey
from common import certs
from common.aio import within
from common.hostport import free_port
from testkit.procs import BrokerProcess, wait_for_port, wait_until
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


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


def _end_offset(tls, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{tls.plain}", "group.id": "offsets"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_confluent_kafka_produces_and_consumes_in_a_group(tls, mutual):
    topic = f"ck-{'m' if mutual else 's'}"
    conf = _rdkafka(tls, mutual)
    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    for i in range(1000):
        producer.produce(topic, b"v-%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        wait_until(
            lambda: (
                values.extend(m.value() for m in consumer.consume(500, 0.2) if not m.error())
                or len(values) >= 1000
            ),
            timeout=20,
            what="1000 records over TLS",
        )
        brokers = consumer.list_topics(timeout=5).brokers
    finally:
        consumer.close()
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
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

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
    producer = KafkaProducer(**conf, acks="all")
    for i in range(300):
        producer.send(topic, b"kp-%d" % i)
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=3000)
    consumer.assign([KTP(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"kp-%d" % i for i in range(300)]


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_aiokafka_over_tls(tls, mutual):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP
    from aiokafka.helpers import create_ssl_context

    topic = f"aio-{'m' if mutual else 's'}"
    _create(tls, topic)
    files = {"certfile": str(tls.dir / "web1.crt"), "keyfile": str(tls.dir / "web1.key")}
    bootstrap = f"127.0.0.1:{tls.mutual if mutual else tls.secure}"

    async def main():
        context = create_ssl_context(cafile=tls.ca, **(files if mutual else {}))
        conf = {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_context": context}
        producer = AIOKafkaProducer(**conf, acks="all")
        await producer.start()
        try:
            for i in range(200):
                await producer.send(topic, b"aio-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, enable_auto_commit=False, group_id=None)
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0)])
            await consumer.seek_to_beginning(ATP(topic, 0))
            values = []
            while len(values) < 200:
                got = await within(consumer.getmany(timeout_ms=500), 10)
                values += [m.value for msgs in got.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(main()) == [b"aio-%d" % i for i in range(200)]


@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
def test_kcat_over_tls(tls, mutual):
    conf = _rdkafka(tls, mutual)
    args = ["-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    topic = f"kcat-{'m' if mutual else 's'}"
    lines = "".join(f"line-{i}\n" for i in range(500))
    subprocess.run(["kcat", *args, "-P", "-t", topic], input=lines.encode(), check=True, timeout=30)
    out = subprocess.run(
        ["kcat", *args, "-C", "-t", topic, "-e", "-o", "beginning", "-q"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    assert out.splitlines() == [f"line-{i}" for i in range(500)]


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
    assert _end_offset(tls, topic) == 0
    log = tls.broker.log_text()
    assert "TLS handshake with" in log and "Traceback" not in log
    assert "certificate has expired" in log  # the reason is told, once per connection
    assert tls.broker.proc.poll() is None
    assert _produce_raw(tls, None, tls.plain, topic) == "answered"
    assert _produce_raw(tls, mutual_client("web1"), tls.mutual, topic) == "answered"
    assert _end_offset(tls, topic) == 2


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
