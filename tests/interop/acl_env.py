"""The broker of the ACL tests: one broker with the authorizer on, a mutual-TLS
listener whose client certificates name the principals (User:admin, a super user;
User:agent, who writes `web`; User:spark, who reads `we*` with groups `spark-*`;
User:operator and User:nobody, without ACLs at the start) and a PLAINTEXT one
(User:ANONYMOUS); and the helpers that talk to it as one of them."""

import ssl
import types

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey
from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess
from tests.broker.server.wire import WireClient

USERS = ("admin", "agent", "spark", "operator", "nobody")


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    root = tmp_path_factory.mktemp("acl")
    d = root / "certs"
    ca = certs.new_ca()
    ca_file = certs.write_ca(d, ca)
    broker_pem = certs.write_keystore(
        d, "broker", certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    )
    for user in USERS:
        certs.write_keystore(d, user, certs.issue(ca, user))
    plain, mutual = free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},MTLS://127.0.0.1:{mutual}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
    }
    broker = BrokerProcess(root / "data", port=plain, settings=settings).start()
    wait_for_port(mutual, proc=broker.proc)
    env = types.SimpleNamespace(broker=broker, dir=d, ca=str(ca_file), plain=plain, mutual=mutual)
    admin = AdminClient(conf(env, "admin"))
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("web", "other")]).values():
        f.result(10)
    allow = AclPermissionType.ALLOW
    bindings = [
        AclBinding(ResourceType.TOPIC, "web", ResourcePatternType.LITERAL, "User:agent", "*",
                   AclOperation.WRITE, allow),
        AclBinding(ResourceType.TOPIC, "we", ResourcePatternType.PREFIXED, "User:spark", "*",
                   AclOperation.READ, allow),
        AclBinding(ResourceType.GROUP, "spark-", ResourcePatternType.PREFIXED, "User:spark",
                   "*", AclOperation.READ, allow),
    ]  # fmt: skip
    for f in admin.create_acls(bindings).values():
        f.result(10)
    yield env
    broker.stop()


def conf(env, user: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{env.mutual}",
        "security.protocol": "SSL",
        "ssl.ca.location": env.ca,
        "ssl.certificate.location": str(env.dir / f"{user}.crt"),
        "ssl.key.location": str(env.dir / f"{user}.key"),
    }


def wire(env, user: str) -> WireClient:
    context = ssl.create_default_context(cafile=env.ca)
    context.load_cert_chain(env.dir / f"{user}.crt", env.dir / f"{user}.key")
    client = WireClient(env.mutual)
    client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
    return client


def end_offset(env, topic: str) -> int:
    with wire(env, "admin") as c:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        }
        return c.request(ApiKey.LIST_OFFSETS, 4, body)["topics"][0]["partitions"][0]["offset"]


def produce_errors(env, user: str, topic: str, n: int = 3) -> list:
    errors = []
    producer = Producer({**conf(env, user), "message.timeout.ms": 5000, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, b"m-%d" % i, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(15) == 0
    return errors


def grant(env, *bindings: AclBinding) -> None:
    admin = AdminClient(conf(env, "admin"))
    for f in admin.create_acls(list(bindings)).values():
        f.result(10)
