"""ACLs in a cluster (real ZooKeeper, three broker processes): brokers replicate over
mutual TLS as `User:CN=broker,O=logflume`, a super user, so replication works with the
authorizer on; an ACL created through broker 0 is stored in Kafka's znodes and
enforced by broker 2 within seconds; two brokers adding ACLs to one resource at once
lose nothing. Admin requests go over PLAINTEXT as User:ANONYMOUS, also a super user
here; the restricted client comes with its own certificate over SSL."""

import ssl
import threading
import time

import orjson

from broker.protocol import ApiKey, ErrorCode
from common import certs
from common.ports import free_port
from tests.broker.server.wire import WireClient
from tests.cluster.util import create_topic, mutual_tls_settings, producer, wait_until

AGENT = "User:CN=agent,O=logflume"


def _create_acl(port: int, principal: str, operation: int, topic: str = "acl-t") -> dict:
    creation = {
        "resource_type": 2,  # TOPIC
        "resource_name": topic,
        "resource_pattern_type": 3,  # LITERAL
        "principal": principal,
        "host": "*",
        "operation": operation,
        "permission_type": 3,  # ALLOW
    }
    with WireClient(port) as c:
        return c.request(ApiKey.CREATE_ACLS, 3, {"creations": [creation]})


def test_acls_replicate_and_are_enforced_everywhere(cluster_factory, tmp_path):
    d = tmp_path / "certs"
    ca = certs.new_ca()
    certs.write_keystore(d, "agent", certs.issue(ca, "agent"))
    ssl_ports = {}

    def per_broker(i):
        ssl_ports[i] = free_port()
        return {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{ssl_ports[i]}"}

    settings = mutual_tls_settings(d, ca) | {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:CN=broker,O=logflume;User:ANONYMOUS",
    }
    cluster = cluster_factory(settings=settings, per_broker=per_broker)
    create_topic(cluster, "acl-t")  # waits for a full ISR: followers are authorized
    p = producer(cluster, acks="all")
    for i in range(200):
        p.produce("acl-t", b"%d" % i)
    assert p.flush(20) == 0

    context = ssl.create_default_context(cafile=str(d / "ca.crt"))
    context.load_cert_chain(d / "agent.crt", d / "agent.key")

    def agent_sees_topic() -> bool:
        with WireClient(ssl_ports[2]) as c:
            c.sock = context.wrap_socket(c.sock, server_hostname="127.0.0.1")
            r = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "acl-t", "topic_id": None}]})
        code = r["topics"][0]["error_code"]
        assert code in (ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return code == ErrorCode.NONE

    assert not agent_sees_topic()
    created_at = time.monotonic()
    r = _create_acl(cluster.brokers[0].port, AGENT, 4)  # WRITE implies DESCRIBE
    assert r["results"][0]["error_code"] == ErrorCode.NONE
    wait_until(agent_sees_topic, timeout=5, what="broker 2 to apply the ACL")
    assert time.monotonic() - created_at < 5
    stored = orjson.loads(cluster.zk.client.get("/kafka-acl/Topic/acl-t")[0])
    assert stored == {
        "version": 1,
        "acls": [
            {"principal": AGENT, "permissionType": "Allow", "operation": "Write", "host": "*"}
        ],
    }
    assert cluster.zk.client.get_children("/kafka-acl-changes")

    # Two brokers add to one resource at once: compare-and-set keeps both.
    results = []
    threads = [
        threading.Thread(
            target=lambda i=i: results.append(
                _create_acl(cluster.brokers[i].port, f"User:u{i}", 3)["results"][0]["error_code"]
            )
        )
        for i in (0, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [ErrorCode.NONE, ErrorCode.NONE]
    stored = orjson.loads(cluster.zk.client.get("/kafka-acl/Topic/acl-t")[0])
    assert {a["principal"] for a in stored["acls"]} == {AGENT, "User:u0", "User:u1"}
