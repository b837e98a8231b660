import uuid

import pytest

from testkit.procs import BrokerCluster, zookeeper_process
from tests.cluster.util import ZkView, wait_until

# Short timeouts so failures are detected within seconds (production uses Kafka's).
FAST = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 0,
    "leader.imbalance.check.interval.seconds": 2,
    "controlled.shutdown.timeout.ms": 10000,
    "log.cleaner.enable": "false",
}


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """One ZooKeeper server per test module."""
    zk = zookeeper_process(tmp_path_factory.mktemp("zookeeper"))
    yield zk
    zk.stop()


@pytest.fixture
def cluster_factory(zookeeper, tmp_path):
    """`cluster_factory(count=3, settings={...}, per_broker=None)`: brokers in a fresh
    ZooKeeper chroot (`per_broker(i)`: settings of broker i only)."""
    made = []

    def make(count=3, settings=None, per_broker=None):
        chroot = f"{zookeeper.connect}/c{uuid.uuid4().hex[:8]}"
        cluster = BrokerCluster(
            tmp_path / f"cluster{len(made)}",
            chroot,
            count,
            {**FAST, **(settings or {})},
            per_broker,
        )
        made.append(cluster)
        cluster.zk = ZkView(chroot)
        cluster.start()
        wait_until(lambda: len(cluster.zk.live()) == count, what="every broker to register")
        # Each broker learns the live set from its own watch: wait until all of them
        # know all brokers (CreateTopics checks the replication factor against it).
        cluster.wait_joined()
        return cluster

    yield make
    for c in made:
        c.stop()
        c.zk.close()
