"""Dynamic broker configs (KIP-226) in a ZooKeeper cluster: a change through one
broker lands in Kafka's znodes (/config/brokers/<default> or /<id>) with a change
notification, every broker applies it and describes it with its source; passwords
are stored encrypted; a listener's keystore is rotated without a restart (new
connections get the new certificate, an open one keeps working). Real ZooKeeper,
broker processes, confluent-kafka, kcat."""

import shutil
import ssl
import subprocess

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
from cryptography import x509

from broker.password_encoder import PasswordEncoder
from broker.protocol import ApiKey
from broker.protocol.client import BlockingClient, Security
from common import certs
from common.ports import free_port, wait_for_port
from tests.broker.server.wire import WireClient
from tests.cluster.util import create_topic, wait_until

SECRET = "encoder-secret-for-tests"
TIMEOUT = 30


def _set(bootstrap: str, broker: str, pairs: dict[str, str], op: str = "SET") -> None:
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType[op]) for k, v in pairs.items()
    ]
    resource = ConfigResource("BROKER", broker, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource], request_timeout=15)[resource].result(TIMEOUT)


def _entry(bootstrap: str, broker: str, key: str):
    resource = ConfigResource("BROKER", broker)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_configs([resource])[resource].result(TIMEOUT)[key]


def _znode(cluster, path: str) -> dict:
    return orjson.loads(cluster.zk.client.get(path)[0])


def _notified(cluster) -> list[str]:
    changes = cluster.zk.client.get_children("/config/changes")
    return [_znode(cluster, f"/config/changes/{n}")["entity_path"] for n in changes]


def _large_produce_error(bootstrap: str, topic: str) -> KafkaError | None:
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000, "acks": "all"})
    p.produce(topic, b"x" * 200_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(TIMEOUT)
    return errors[0]


def test_default_and_per_broker_configs_across_the_cluster(cluster_factory):
    cluster = cluster_factory(settings={"password.encoder.secret": SECRET})
    b = {i: cluster.brokers[i].bootstrap for i in range(3)}
    create_topic(cluster, "dyn")
    assert _large_produce_error(cluster.bootstrap, "dyn") is None

    # the cluster-wide default, through broker 0 (resource "": over the wire codec)
    body = {
        "resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "message.max.bytes", "config_operation": 0, "value": "50000"}]}],
        "validate_only": False,
    }  # fmt: skip
    with WireClient(cluster.brokers[0].port) as c:
        (answer,) = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"]
    assert answer["error_code"] == 0, answer
    assert _znode(cluster, "/config/brokers/<default>") == {
        "version": 1,
        "config": {"message.max.bytes": "50000"},
    }
    assert "brokers/<default>" in _notified(cluster)
    for i in (1, 2):  # seen by the others, with its source
        wait_until(
            lambda i=i: _entry(b[i], str(i), "message.max.bytes").value == "50000",
            what=f"broker {i} to apply the default",
        )
        entry = _entry(b[i], str(i), "message.max.bytes")
        assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    err = _large_produce_error(cluster.bootstrap, "dyn")  # whichever broker leads
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE

    # broker 1's own segment size: its replica rolls at 4 KiB, broker 2's does not
    _set(b[1], "1", {"log.segment.bytes": "4096"})
    assert _znode(cluster, "/config/brokers/1")["config"] == {"log.segment.bytes": "4096"}
    assert "brokers/1" in _notified(cluster)
    seg = _entry(b[1], "1", "log.segment.bytes")
    assert (seg.value, seg.source) == ("4096", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert _entry(b[2], "2", "log.segment.bytes").source == ConfigSource.DEFAULT_CONFIG.value
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for _ in range(3):
        p.produce("dyn", b"y" * 5000)
        p.flush(TIMEOUT)
    logs = {i: cluster.brokers[i].data_dir / "dyn-0" for i in (1, 2)}
    wait_until(lambda: len(list(logs[1].glob("*.log"))) >= 4, what="broker 1 to roll")
    assert len(list(logs[2].glob("*.log"))) == 1

    # another broker's id is not this broker's to change
    with pytest.raises(KafkaException) as e:
        _set(b[1], "1", {"broker.id": "9"})
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Cannot update these configs dynamically: Set(broker.id)" in e.value.args[0].str()

    # a password: encrypted in ZooKeeper, null when described
    _set(b[2], "2", {"listener.name.plaintext.ssl.key.password": "clear-pass-42"})
    raw = cluster.zk.client.get("/config/brokers/2")[0]
    assert b"clear-pass-42" not in raw
    stored = orjson.loads(raw)["config"]["listener.name.plaintext.ssl.key.password"]
    assert "encryptedPassword:" in stored and "keyFactoryAlgorithm:PBKDF2WithHmacSHA512" in stored
    assert PasswordEncoder(SECRET).decode(stored) == "clear-pass-42"
    entry = _entry(b[2], "2", "listener.name.plaintext.ssl.key.password")
    assert entry.value is None and entry.is_sensitive

    # a restart reads both levels back from ZooKeeper
    cluster.brokers[1].restart()
    cluster.wait_joined()
    assert _entry(b[1], "1", "log.segment.bytes").value == "4096"
    entry = _entry(b[1], "1", "message.max.bytes")
    assert (entry.value, entry.source) == (
        "50000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )


def _serial_served(port: int) -> int:
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    return x509.load_pem_x509_certificate(pem.encode()).serial_number


def test_a_listener_keystore_is_rotated_without_a_restart(cluster_factory, tmp_path):
    d = tmp_path / "certs"
    ca, ca2 = certs.new_ca(), certs.new_ca("rotated CA")
    ca_file, ca2_file = certs.write_ca(d, ca), certs.write_ca(d, ca2, "ca2")
    both = d / "both.crt"
    both.write_bytes(ca.cert_pem() + ca2.cert_pem())
    hosts = ["localhost", "127.0.0.1"]
    first = certs.issue(ca, "localhost", hosts=hosts, server=True)
    ssl_port = free_port()
    cluster = cluster_factory(
        count=1,
        settings={
            "password.encoder.secret": SECRET,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.write_keystore(d, "first", first)),
        },
        per_broker=lambda i: {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{ssl_port}"
        },
    )
    plain = cluster.brokers[0].bootstrap
    secure = f"127.0.0.1:{ssl_port}"
    wait_for_port(ssl_port)
    assert _serial_served(ssl_port) == first.cert.serial_number
    create_topic(cluster, "tls-rot", rf=1, config={"min.insync.replicas": "1"})
    # open before the rotation: a client trusting both CAs, and a raw connection
    old_client = Producer(
        {"bootstrap.servers": secure, "security.protocol": "SSL", "ssl.ca.location": str(both)}
    )
    old_client.produce("tls-rot", b"before")
    assert old_client.flush(TIMEOUT) == 0
    context = ssl.create_default_context(cafile=str(ca_file))
    held = BlockingClient("127.0.0.1", ssl_port, TIMEOUT, security=Security(tls=context))

    # another subject DN is refused, as Kafka refuses it
    other = certs.write_keystore(
        d, "other", certs.issue(ca2, "elsewhere", hosts=hosts, server=True)
    )
    with pytest.raises(KafkaException) as e:
        _set(plain, "0", {"listener.name.ssl.ssl.keystore.location": str(other)})
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Keystore DistinguishedName does not match" in e.value.args[0].str()

    # the new certificate, from another CA, its key encrypted: location and password
    second = certs.issue(ca2, "localhost", hosts=hosts, server=True)
    rotated = d / "rotated.pem"
    certs.write_private(rotated, second.key_pem(b"rot8-pass") + second.cert_pem())
    _set(plain, "0", {
        "listener.name.ssl.ssl.keystore.location": str(rotated),
        "listener.name.ssl.ssl.key.password": "rot8-pass",
    })  # fmt: skip
    assert _serial_served(ssl_port) == second.cert.serial_number
    raw = cluster.zk.client.get("/config/brokers/0")[0]
    assert b"rot8-pass" not in raw and b"encryptedPassword" in raw

    # a new client trusting only the new CA connects and produces
    fresh = Producer(
        {"bootstrap.servers": secure, "security.protocol": "SSL", "ssl.ca.location": str(ca2_file)}
    )
    fresh.produce("tls-rot", b"after")
    assert fresh.flush(TIMEOUT) == 0
    if shutil.which("kcat"):
        out = subprocess.run(
            ["kcat", "-b", secure, "-X", "security.protocol=SSL",
             "-X", f"ssl.ca.location={ca2_file}", "-L", "-t", "tls-rot"],
            capture_output=True, check=True, timeout=30,
        ).stdout.decode()  # fmt: skip
        assert 'topic "tls-rot" with 1 partitions' in out
    # the connections open before the rotation keep working, on the old certificate
    assert held.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    served = x509.load_der_x509_certificate(held.sock.getpeercert(binary_form=True))
    assert served.serial_number == first.cert.serial_number
    held.close()
    old_client.produce("tls-rot", b"still")
    assert old_client.flush(TIMEOUT) == 0

    # a restart decodes the password from ZooKeeper and serves the rotated keystore
    cluster.brokers[0].restart()
    wait_for_port(ssl_port)
    assert _serial_served(ssl_port) == second.cert.serial_number

    # the keystore rewritten in place: naming it again reloads it (Kafka's reload of
    # files whose config did not change)
    third = certs.issue(ca2, "localhost", hosts=hosts, server=True)
    certs.write_private(rotated, third.key_pem(b"rot8-pass") + third.cert_pem())
    assert _serial_served(ssl_port) == second.cert.serial_number
    _set(plain, "0", {
        "listener.name.ssl.ssl.keystore.location": str(rotated),
        "listener.name.ssl.ssl.key.password": "rot8-pass",
    })  # fmt: skip
    assert _serial_served(ssl_port) == third.cert.serial_number
