"""A single node's cluster view (broker/cluster/single_node.py) over a real replica
manager: it is the only broker, leads everything, and applies topic writes at once."""

import asyncio

from broker.cluster.metadata_store import LocalMetadataStore
from broker.cluster.replica_manager import ReplicaManager, default_log_config
from broker.cluster.single_node import SingleNode
from broker.cluster.topic_admin import TopicAdmin
from broker.config import BrokerConfig
from broker.log.manager import LogManager
from broker.protocol.errors import ErrorCode


def _single_node(tmp_path, rack=None) -> tuple[SingleNode, TopicAdmin]:
    config = BrokerConfig({"log.dirs": str(tmp_path), "broker.id": "7"})
    logs = LogManager(tmp_path, default_log_config(config))
    replicas = ReplicaManager(config, LocalMetadataStore(tmp_path), logs)
    node = SingleNode(7, rack, tmp_path, replicas, lambda: {"PLAINTEXT": ("h", 9092)})
    replicas.cluster = node
    replicas.load()
    return node, TopicAdmin(config, replicas)


def test_it_is_the_only_broker_and_leads_what_it_creates(tmp_path):
    node, admin = _single_node(tmp_path, rack="r1")
    assert list(node.brokers) == [7] and node.brokers[7].rack == "r1"
    meta = admin.create_topic("t", 2)
    assert meta.assignments == [[7], [7]] and set(node.topics) == {"t"}
    view = node.partition_view("t", 1)
    assert (view.leader, view.replicas, view.isr, view.offline) == (7, [7], [7], [])
    assert node.leader_of("t", 1) == node.active_controller_id() == 7


def test_topic_writes_apply_at_once(tmp_path):
    node, admin = _single_node(tmp_path)
    replicas = node.replicas
    admin.create_topic("t", 1)
    asyncio.run(admin.alter_topic(admin.with_partitions("t", 3, None)))
    assert replicas.topic("t").partitions == 3 and replicas.get_partition("t", 2) is not None
    admin.delete_topic("t")
    assert "t" not in node.topics and replicas.get_partition("t", 0) is None


def test_elections_are_never_needed(tmp_path):
    node, admin = _single_node(tmp_path)
    admin.create_topic("t", 1)
    answers = asyncio.run(node.elect_leaders([("t", 0), ("t", 5)], unclean=False))
    assert answers == {
        ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
