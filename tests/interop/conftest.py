"""The client matrix runs every client against one broker and against a ZooKeeper
cluster of three (replication factor 3, min.insync.replicas 2): `target` is either,
with `.bootstrap` and `.replication` (the replication factor a client should ask for)."""

import types

import pytest

from testkit.procs import BrokerCluster, BrokerProcess, zookeeper_process
from tests.interop.acl_env import acl  # noqa: F401 - the ACL tests' broker, one per module

CLUSTER = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module", params=["one broker", "three brokers"])
def target(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("target")
    if request.param == "one broker":
        broker = BrokerProcess(root / "data").start()
        yield types.SimpleNamespace(bootstrap=broker.bootstrap, replication=1)
        broker.stop()
        return
    zookeeper = zookeeper_process(root / "zookeeper")
    cluster = BrokerCluster(root / "cluster", zookeeper.connect + "/matrix", 3, CLUSTER).start()
    try:
        cluster.wait_joined()
        yield types.SimpleNamespace(bootstrap=cluster.bootstrap, replication=3)
    finally:
        cluster.stop()
        zookeeper.stop()
