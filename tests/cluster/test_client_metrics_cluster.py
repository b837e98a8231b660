"""Client-metrics subscriptions (KIP-714) in a ZooKeeper cluster: one altered through
a broker lands in /config/client-metrics/<name> with a change notification, and
every other broker follows it (lists it, answers clients with it, lists the
telemetry APIs while one exists). Real ZooKeeper, two broker processes."""

import uuid

import orjson

from broker.protocol import ApiKey
from tests.broker.server.wire import WireClient
from tests.cluster.util import wait_until

TELEMETRY_APIS = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}


def _alter(port: int, name: str, changes: list[tuple[str, int, str | None]]) -> None:
    configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in changes]
    body = {
        "resources": [{"resource_type": 16, "resource_name": name, "configs": configs}],
        "validate_only": False,
    }
    with WireClient(port) as c:
        answer = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert answer["responses"][0]["error_code"] == 0, answer


def _view(port: int) -> tuple[list[str], bool, list[str]]:
    """(subscription names, telemetry APIs listed, metrics a new client is asked for)."""
    with WireClient(port) as c:
        names = c.request(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, {})
        versions = c.request(ApiKey.API_VERSIONS, 2, {})
        sub = c.request(
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": uuid.UUID(int=0)}
        )
    listed = TELEMETRY_APIS <= {k["api_key"] for k in versions["api_keys"]}
    return [r["name"] for r in names["client_metrics_resources"]], listed, sub["requested_metrics"]


def test_a_subscription_altered_on_one_broker_is_followed_by_the_other(cluster_factory):
    cluster = cluster_factory(count=2)
    first, second = (cluster.brokers[i].port for i in range(2))
    assert _view(second) == ([], False, [])

    _alter(
        first, "team/a", [("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "1000")]
    )
    znode = orjson.loads(cluster.zk.client.get("/config/client-metrics/team%2Fa")[0])
    assert znode == {
        "version": 1,
        "config": {"interval.ms": "1000", "metrics": "org.apache.kafka.producer."},
    }
    changes = cluster.zk.client.get_children("/config/changes")
    paths = [
        orjson.loads(cluster.zk.client.get(f"/config/changes/{n}")[0])["entity_path"]
        for n in changes
    ]
    assert "client-metrics/team%2Fa" in paths
    expected = (["team/a"], True, ["org.apache.kafka.producer."])
    wait_until(lambda: _view(second) == expected, what="the second broker to follow")

    _alter(first, "team/a", [("metrics", 1, None), ("interval.ms", 1, None)])
    wait_until(lambda: _view(second) == ([], False, []), what="the removal to reach it")
