"""Client quotas in a ZooKeeper cluster: a quota altered through one broker lands in
Kafka's znodes (a user's next to its SCRAM credentials), with a change
notification, and is enforced by the partition's leader on another broker; the
third broker describes it. Real ZooKeeper, three broker processes."""

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker.protocol import ApiKey
from common.ports import free_port
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient
from tests.cluster.util import create_topic, wait_until

TOPIC = "quota-cluster"


def _alter(port: int, components: list[dict], key: str, value: float | None) -> None:
    op = {"key": key, "value": value or 0.0, "remove": value is None}
    body = {"entries": [{"entity": components, "ops": [op]}], "validate_only": False}
    with WireClient(port) as c:
        answer = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, body)
    assert answer["entries"][0]["error_code"] == 0, answer


def _described(port: int) -> list:
    with WireClient(port) as c:
        answer = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    return sorted(
        [
            (
                tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]),
                {v["key"]: v["value"] for v in entry["values"]},
            )
            for entry in answer["entries"]
        ],
        key=repr,
    )


def _znode(cluster, path: str) -> dict:
    return orjson.loads(cluster.zk.client.get(path)[0])


def test_a_quota_altered_on_one_broker_is_enforced_by_the_leader_on_another(cluster_factory):
    metrics = {i: free_port() for i in range(3)}
    cluster = cluster_factory(per_broker=lambda i: {"metrics.listen": f"127.0.0.1:{metrics[i]}"})
    create_topic(cluster, TOPIC)
    leader = cluster.zk.state(TOPIC)["leader"]
    other, third = [i for i in range(3) if i != leader]
    port = cluster.brokers[other].port

    client = [{"entity_type": "client-id", "entity_name": "capped"}]
    _alter(port, client, "producer_byte_rate", 2048.0)
    assert _znode(cluster, "/config/clients/capped") == {
        "version": 1,
        "config": {"producer_byte_rate": "2048"},
    }
    changes = cluster.zk.client.get_children("/config/changes")
    paths = [_znode(cluster, f"/config/changes/{n}")["entity_path"] for n in changes]
    assert "clients/capped" in paths

    # a user's quota shares the znode with its SCRAM credential
    admin = AdminClient({"bootstrap.servers": cluster.brokers[other].bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    fs = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("alice", info, b"alice-secret")]
    )
    fs["alice"].result(10)
    alice = [{"entity_type": "user", "entity_name": "alice"}]
    _alter(port, alice, "consumer_byte_rate", 4096.0)
    _alter(port, [*alice, {"entity_type": "client-id", "entity_name": None}],
           "request_percentage", 25.0)  # fmt: skip
    config = _znode(cluster, "/config/users/alice")["config"]
    assert set(config) == {"SCRAM-SHA-512", "consumer_byte_rate"}
    assert _znode(cluster, "/config/users/alice/clients/<default>")["config"] == {
        "request_percentage": "25.0"
    }
    # deleting the credential keeps the quota; removing the quota too keeps the znode,
    # which has a child
    fs = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)]
    )
    fs["alice"].result(10)
    assert _znode(cluster, "/config/users/alice")["config"] == {"consumer_byte_rate": "4096"}
    _alter(port, alice, "consumer_byte_rate", None)
    assert _znode(cluster, "/config/users/alice")["config"] == {}

    expected = [
        ((("client-id", "capped"),), {"producer_byte_rate": 2048.0}),
        ((("user", "alice"), ("client-id", None)), {"request_percentage": 25.0}),
    ]
    third_port = cluster.brokers[third].port
    wait_until(lambda: _described(third_port) == expected, what="the third broker to see them")

    throttles = []
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "client.id": "capped",
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append((event.broker_id, event.throttle_time)),
        }
    )
    for _ in range(100):
        p.produce(TOPIC, b"z" * 1000)
        p.flush(30)
        if throttles:
            break
    assert p.flush(30) == 0
    assert [b for b, t in throttles if t > 0] and {b for b, _ in throttles} == {leader}
    seconds = scrape(metrics[leader]).sum(
        "logflume_broker_quota_throttle_time_seconds_total", type="produce", client_id="capped"
    )
    assert seconds > 0
