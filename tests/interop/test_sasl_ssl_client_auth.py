"""`ssl.client.auth` with SSL and SASL_SSL listeners side by side, the common
production layout, as Kafka 3.9 applies it (KIP-684): set broker-wide it asks the SSL
listener's clients for a certificate and not the SASL_SSL listener's, who log in with
SASL; `listener.name.<l>.ssl.client.auth` asks one SASL_SSL listener's clients for
one. One broker, confluent-kafka clients."""

import logging
import types

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess, wait_until
from tests.interop.secure_clients import confluent_round_trip, end_offset

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """PLAINTEXT (setup), SSL with the broker-wide ssl.client.auth=required, SASL_SSL
    without an override, and SASL_MTLS (SASL_SSL) with
    listener.name.sasl_mtls.ssl.client.auth=required."""
    root = tmp_path_factory.mktemp("client-auth")
    d = root / "certs"
    ca = certs.new_ca()
    ca_file = certs.write_ca(d, ca)
    broker_pem = certs.write_keystore(
        d, "broker", certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    )
    certs.write_keystore(d, "web1", certs.issue(ca, "web1"))
    plain, ssl_port, sasl_ssl, sasl_mtls = (free_port() for _ in range(4))
    settings = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},"
            f"SASL_SSL://127.0.0.1:{sasl_ssl},SASL_MTLS://127.0.0.1:{sasl_mtls}"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_MTLS:SASL_SSL"
        ),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_mtls.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file),
        "ssl.client.auth": "required",
        "listener.name.sasl_mtls.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 3,
    }
    proc = BrokerProcess(root / "data", port=plain, settings=settings).start()
    for port in (ssl_port, sasl_ssl, sasl_mtls):
        wait_for_port(port, proc=proc.proc)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    admin.create_topics([NewTopic("refused", 1, 1)])["refused"].result(10)
    yield types.SimpleNamespace(
        proc=proc,
        dir=d,
        ca=str(ca_file),
        plain=plain,
        ssl=ssl_port,
        sasl_ssl=sasl_ssl,
        sasl_mtls=sasl_mtls,
    )
    proc.stop()


def _conf(broker, port: int, sasl: bool, cert: bool) -> dict:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL" if sasl else "SSL",
        "ssl.ca.location": broker.ca,
    }
    if sasl:
        conf |= {"sasl.mechanism": "PLAIN", "sasl.username": "alice"}
        conf["sasl.password"] = "alice-secret"
    if cert:
        conf["ssl.certificate.location"] = str(broker.dir / "web1.crt")
        conf["ssl.key.location"] = str(broker.dir / "web1.key")
    return conf


class _Lines(logging.Handler):
    """The lines librdkafka logs, kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# How librdkafka logs a TLS connection the broker closed for want of a certificate:
# with TLS 1.3 the client's handshake ends before the server checks it, so usually
# the first read after it, else the handshake itself.
_REFUSALS = ("SSL connection closed by peer", "certificate required", "SSL handshake failed")


def _refused(conf: dict) -> str:
    """Produce one record with `conf` until librdkafka logs that the broker refused
    the TLS connection -> that line; the record is purged, never sent."""
    lines = _Lines()
    logger = logging.getLogger(f"rdkafka-{conf['bootstrap.servers']}")
    logger.setLevel(logging.INFO)  # librdkafka logs a disconnection at level 6, info
    logger.addHandler(lines)
    producer = Producer({**conf, "logger": logger})
    producer.produce("refused", b"must not land")

    def closed() -> str | None:
        producer.poll(0.1)
        return next((x for x in lines.lines if any(r in x for r in _REFUSALS)), None)

    try:
        return wait_until(closed, timeout=15, what=lambda: f"a refused connection: {lines.lines}")
    finally:
        producer.purge()
        producer.flush(1)
        logger.removeHandler(lines)


def test_sasl_ssl_client_without_certificate_produces_and_consumes(broker):
    conf = _conf(broker, broker.sasl_ssl, sasl=True, cert=False)
    values, _ = confluent_round_trip(conf, "sasl-no-cert", 200, "200 records over SASL_SSL")
    assert sorted(values) == sorted(b"v-%d" % i for i in range(200))
    log = broker.proc.log_text()
    assert "SASL_SSL listener SASL_SSL asks for no client certificate" in log
    assert "listener SASL_MTLS asks" not in log  # it has its own setting


def test_ssl_listener_still_requires_a_certificate(broker):
    _refused(_conf(broker, broker.ssl, sasl=False, cert=False))
    assert end_offset(broker.plain, "refused") == 0
    values, _ = confluent_round_trip(
        _conf(broker, broker.ssl, sasl=False, cert=True), "ssl-cert", 50, "50 records over SSL"
    )
    assert sorted(values) == sorted(b"v-%d" % i for i in range(50))


def test_listener_prefixed_client_auth_makes_sasl_ssl_require_a_certificate(broker):
    _refused(_conf(broker, broker.sasl_mtls, sasl=True, cert=False))
    assert end_offset(broker.plain, "refused") == 0
    values, _ = confluent_round_trip(
        _conf(broker, broker.sasl_mtls, sasl=True, cert=True),
        "sasl-cert",
        50,
        "50 records over SASL_SSL with a client certificate",
    )
    assert sorted(values) == sorted(b"v-%d" % i for i in range(50))
