"""A cluster whose brokers replicate over SASL_SSL with SCRAM-SHA-512: clients on
PLAINTEXT and SASL_SSL, replica fetchers authenticating with the broker user of the
listener's ScramLoginModule entry. SCRAM users live in ZooKeeper (/config/users):
one added or deleted through broker 0 is known to broker 2 within seconds. Real
ZooKeeper, three broker processes, one cluster start."""

import orjson
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from common import certs
from common.ports import free_port
from testkit.scrape import scrape
from tests.cluster.util import create_topic, replicate_through_a_leader_kill, wait_until

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)
SHA512 = ScramMechanism.SCRAM_SHA_512


def _upsert(admin: AdminClient, user: str, password: str) -> None:
    info = ScramCredentialInfo(SHA512, 4096)
    fs = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())]
    )
    fs[user].result(10)


def _authenticates(port: int, ca: str, user: str, password: str) -> bool | None:
    """True: a produce went through; False: refused as bad credentials."""
    errors = []
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": ca,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": errors.append,
            "message.timeout.ms": 5000,
        }
    )
    delivered = []
    p.produce("users-check", b"x", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(6)
    if delivered and delivered[0] is None:
        return True
    return False if any(e.code() == KafkaError._AUTHENTICATION for e in errors) else None


def test_replication_over_sasl_ssl_and_users_in_zookeeper(cluster_factory, tmp_path):
    d = tmp_path / "certs"
    ca = certs.new_ca()
    ca_file = str(certs.write_ca(d, ca))
    settings = {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(
            certs.write_keystore(
                d, "broker", certs.issue(ca, "broker", hosts=["127.0.0.1"], server=True)
            )
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca_file,
    }
    sasl_ports, metrics_ports = {}, {}

    def per_broker(i):
        sasl_ports[i], metrics_ports[i] = free_port(), free_port()
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SASL_SSL://127.0.0.1:{sasl_ports[i]}",
            "metrics.listen": f"127.0.0.1:{metrics_ports[i]}",
        }

    cluster = cluster_factory(settings=settings, per_broker=per_broker)
    admin0 = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    # The brokers' own user, as Kafka's docs have it created before replication works.
    _upsert(admin0, "broker", "broker-secret")
    stored = orjson.loads(cluster.zk.client.get("/config/users/broker")[0])
    assert stored["version"] == 1
    assert stored["config"]["SCRAM-SHA-512"].startswith("salt=")
    assert stored["config"]["SCRAM-SHA-512"].endswith(",iterations=4096")

    # A user added through broker 0 authenticates on broker 2 ...
    _upsert(admin0, "alice", "alice-secret")
    wait_until(
        lambda: _authenticates(sasl_ports[2], ca_file, "alice", "alice-secret"),
        timeout=10,
        what="alice known to broker 2",
    )
    # ... and once deleted through broker 0, no longer.
    deletion = UserScramCredentialDeletion("alice", SHA512)
    admin0.alter_user_scram_credentials([deletion])["alice"].result(10)
    wait_until(
        lambda: _authenticates(sasl_ports[2], ca_file, "alice", "alice-secret") is False,
        timeout=10,
        what="alice refused by broker 2",
    )
    assert cluster.zk.client.exists("/config/users/alice") is None

    topic = "over-sasl"
    create_topic(cluster, topic)  # waits for a full ISR: the followers fetch over SASL_SSL
    leader = cluster.zk.state(topic)["leader"]
    scraped = scrape(metrics_ports[leader])
    logins = scraped.sum(
        "logflume_broker_successful_authentication_total",
        listener="SASL_SSL",
        mechanism="SCRAM-SHA-512",
    )
    assert logins >= (3 if leader == 2 else 2)  # both followers' fetchers (+ alice on 2)
    # SCRAM takes two SaslAuthenticate requests per login, counted like every request
    assert scraped.sum("logflume_broker_requests_total", api="SaslAuthenticate") >= 2 * logins
    replicate_through_a_leader_kill(cluster, topic)
