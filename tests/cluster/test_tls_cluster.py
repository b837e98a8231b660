"""A cluster whose brokers replicate over TLS: clients on PLAINTEXT, replica fetchers on
the SSL listener (`inter.broker.listener.name=SSL`, mutual TLS with the brokers' own
certificates). Real ZooKeeper, three broker processes."""

import orjson

from common import certs
from common.hostport import free_port
from tests.cluster.util import consume_all, create_topic, producer, wait_until


def test_replication_over_tls_survives_a_leader_kill(cluster_factory, tmp_path):
    d = tmp_path / "certs"
    ca = certs.new_ca()
    tls = {
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(
            certs.write_keystore(
                d, "broker", certs.issue(ca, "broker", hosts=["127.0.0.1"], server=True)
            )
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.write_ca(d, ca)),
        "ssl.client.auth": "required",
    }
    cluster = cluster_factory(
        settings=tls,
        per_broker=lambda i: {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{free_port()}"
        },
    )
    registered = orjson.loads(cluster.zk.client.get("/brokers/ids/0")[0])
    assert [e.split("://")[0] for e in registered["endpoints"]] == ["PLAINTEXT", "SSL"]
    assert registered["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert registered["port"] == cluster.brokers[0].port

    topic = "over-tls"
    create_topic(cluster, topic)  # waits for a full ISR: the followers fetch over TLS
    p = producer(cluster, acks="all")
    for i in range(500):
        p.produce(topic, b"%d" % i)
    assert p.flush(20) == 0
    victim = cluster.zk.state(topic)["leader"]
    cluster.brokers[victim].kill()
    wait_until(lambda: cluster.zk.state(topic)["leader"] not in (-1, victim), what="a new leader")
    for i in range(500, 1000):
        p.produce(topic, b"%d" % i)
    assert p.flush(30) == 0
    # Back, it catches up over TLS; then a group can be made (__consumer_offsets has RF 3).
    cluster.brokers[victim].start()
    wait_until(lambda: len(cluster.zk.state(topic)["isr"]) == 3, what="the ISR full again")
    values = consume_all(cluster, topic, 1000, timeout=30)
    assert sorted(int(v) for v in values) == list(range(1000))
