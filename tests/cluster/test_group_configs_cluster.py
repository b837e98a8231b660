"""Dynamic group configs (config resource type GROUP) in a ZooKeeper cluster: one
altered through a broker lands in /config/groups/<group id> with a change
notification, every other broker describes it, and a broker started later reads it.
Real ZooKeeper, broker processes."""

import orjson

from broker.protocol import ApiKey
from tests.broker.server.wire import WireClient
from tests.cluster.util import wait_until

GROUP = 32


def _alter(port: int, group: str, changes: list[tuple[str, int, str | None]]) -> None:
    configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in changes]
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": configs}],
        "validate_only": False,
    }
    with WireClient(port) as c:
        answer = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert answer["responses"][0]["error_code"] == 0, answer


def _own(port: int, group: str) -> dict[str, str]:
    """The group's own configs (source GROUP_CONFIG) as this broker describes them."""
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    with WireClient(port) as c:
        result = c.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]
    return {e["name"]: e["value"] for e in result["configs"] if e["config_source"] == 8}


def test_a_group_config_altered_on_one_broker_is_followed_by_the_others(cluster_factory):
    cluster = cluster_factory(count=2)
    first, second = (cluster.brokers[i].port for i in range(2))
    _alter(first, "team/g", [("share.auto.offset.reset", 0, "earliest")])
    znode = orjson.loads(cluster.zk.client.get("/config/groups/team%2Fg")[0])
    assert znode == {"version": 1, "config": {"share.auto.offset.reset": "earliest"}}
    paths = [
        orjson.loads(cluster.zk.client.get(f"/config/changes/{n}")[0])["entity_path"]
        for n in cluster.zk.client.get_children("/config/changes")
    ]
    assert "groups/team%2Fg" in paths
    expected = {"share.auto.offset.reset": "earliest"}
    wait_until(lambda: _own(second, "team/g") == expected, what="the second broker to follow")

    third = cluster.add_broker()
    wait_until(lambda: _own(third.port, "team/g") == expected, what="a new broker to read it")

    _alter(second, "team/g", [("share.auto.offset.reset", 1, None)])
    wait_until(lambda: _own(first, "team/g") == {}, what="the removal to reach the first")
