"""A cluster whose brokers replicate over TLS: clients on PLAINTEXT, replica fetchers on
the SSL listener (`inter.broker.listener.name=SSL`, mutual TLS with the brokers' own
certificates). Real ZooKeeper, three broker processes."""

import orjson

from common import certs
from common.ports import free_port
from tests.cluster.util import create_topic, mutual_tls_settings, replicate_through_a_leader_kill


def test_replication_over_tls_survives_a_leader_kill(cluster_factory, tmp_path):
    d = tmp_path / "certs"
    ca = certs.new_ca()
    cluster = cluster_factory(
        settings=mutual_tls_settings(d, ca),
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
    # The victim, back, catches up over TLS; then a group can be made
    # (__consumer_offsets has RF 3).
    replicate_through_a_leader_kill(cluster, topic)
