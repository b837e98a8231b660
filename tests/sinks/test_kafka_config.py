"""The kafka sink's librdkafka settings from its config (sinks/kafka/config.py)."""

from sinks.kafka import KafkaSink
from sinks.kafka.config import client_settings, producer_settings
from sinks.kafka.security import SaslConfig, TlsConfig


def on_error(err):
    pass


def on_stats(text):
    pass


def settings(**options):
    config = KafkaSink.Config(topic="t", **options)
    return producer_settings(config, "client", "tid", on_error, on_stats)


def test_producer_settings_follow_the_keys():
    conf = settings(acks=1, enable_idempotence=False, batch_events=100_000)
    assert conf["acks"] == "1" and conf["enable.idempotence"] is False
    assert conf["queue.buffering.max.messages"] == 800_000  # 2 x 100000 x 4 batches
    assert conf["delivery.timeout.ms"] == 30_000
    assert conf["error_cb"] is on_error and conf["stats_cb"] is on_stats
    assert conf["statistics.interval.ms"] == 5000
    assert "transactional.id" not in conf


def test_exactly_once_makes_the_producer_transactional():
    conf = settings(delivery="exactly_once", transaction_timeout=90)
    assert conf["transactional.id"] == "tid"
    assert conf["transaction.timeout.ms"] == 90_000


def test_the_producer_block_has_the_last_word():
    conf = settings(producer={"statistics.interval.ms": "0", "linger.ms": "50"})
    assert conf["statistics.interval.ms"] == "0" and conf["linger.ms"] == "50"


def test_every_client_gets_the_connection_and_security_settings_only():
    config = KafkaSink.Config(
        topic="t",
        bootstrap_servers="b:9093",
        tls=TlsConfig(ca="/ca.pem"),
        sasl=SaslConfig("PLAIN", "u", "p"),
        producer={"ssl.endpoint.identification.algorithm": "none", "linger.ms": "50"},
    )
    conf = client_settings(config, "client")
    assert conf == {
        "bootstrap.servers": "b:9093",
        "client.id": "client",
        "enable.ssl.certificate.verification": True,
        "ssl.ca.location": "/ca.pem",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
        "security.protocol": "SASL_SSL",
        "ssl.endpoint.identification.algorithm": "none",
    }
