"""ClusterNode after a lost or fenced ZooKeeper session (no ZooKeeper: the session
is stubbed).

On LOST a broker steps down everywhere. When it connects again it must re-read its
partitions' states: kazoo's data watches only report znodes that changed, so a state
that still names this broker in the same epoch (every session expired, and the new
controller found all brokers live again, so it moved nothing) would otherwise leave
the partition with no serving leader for good. Found while writing the network-partition
tests (tests/cluster/test_netsplit.py, scenario: ZooKeeper unreachable for all brokers).
"""

import asyncio
import time
from types import SimpleNamespace

from broker.cluster import zk
from broker.cluster.node import ClusterNode
from broker.cluster.partition import Partition
from broker.cluster.replica_manager import ReplicaManager
from broker.cluster.zk import PartitionState
from broker.config import BrokerConfig
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.quotas.replication import ReplicationQuotas
from broker.server.handlers.metadata import live_brokers
from common.aio import within


def _node(tmp_path):
    config = BrokerConfig(
        {"log.dirs": str(tmp_path), "zookeeper.connect": "127.0.0.1:9/x", "broker.id": "0"}
    )
    replicas = ReplicaManager(config, store=None, log_manager=None)
    node = ClusterNode(
        config,
        store=None,
        replicas=replicas,
        metrics=None,
        endpoints=lambda: {},
        follower_quota=ReplicationQuotas(config).follower,
    )
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    part = Partition("t", 0, plog, 0, [0, 1, 2], min_insync_replicas=2)
    part.leader, part.isr = -1, set()
    replicas.partitions[part.key] = part
    node.topics["t"] = object()
    return node, part


def _zookeeper_has(node, state: PartitionState) -> None:
    async def call(op, path, *args, **kwargs):
        assert (op, path) == ("get", zk.state_path("t", 0))
        return zk.encode_state(state), SimpleNamespace(version=state.version)

    node.zk.call = call


def test_leader_stepped_down_on_lost_session_leads_again_if_zookeeper_still_names_it(tmp_path):
    node, part = _node(tmp_path)
    state = PartitionState(0, 3, (0, 1, 2), 1, version=7)
    node.on_state("t", 0, state)
    assert part.is_leader and part.leader_epoch == 3
    node._on_session("LOST")
    assert not part.is_leader
    _zookeeper_has(node, state)  # unchanged: the watch will not fire again
    asyncio.run(node.reread_states())
    assert part.is_leader and part.leader_epoch == 3 and part.isr == {0, 1, 2}


def test_reread_after_lost_session_follows_the_leader_elected_meanwhile(tmp_path):
    node, part = _node(tmp_path)
    node.on_state("t", 0, PartitionState(0, 3, (0, 1, 2), 1, version=7))
    node._on_session("LOST")

    async def go():
        _zookeeper_has(node, PartitionState(1, 4, (1, 2), 2, version=9))
        await node.reread_states()
        try:
            assert part.leader == 1 and part.leader_epoch == 4 and not part.is_leader
            assert ("t", 0) in node.fetchers.fetchers[1].partitions
        finally:
            await node.fetchers.stop()

    asyncio.run(go())


def test_reread_never_goes_back_to_an_older_epoch(tmp_path):
    node, part = _node(tmp_path)
    node.on_state("t", 0, PartitionState(0, 5, (0, 1), 1, version=9))
    node._on_session("LOST")
    _zookeeper_has(node, PartitionState(0, 4, (0, 1, 2), 1, version=3))  # a stale read
    asyncio.run(node.reread_states())
    assert not part.is_leader and part.leader_epoch == 5


# -- fencing: the session lease ran out (broker.cluster.lease) --------------------------


def _fence(node) -> None:
    """Let the lease run out as if ZooKeeper had not answered for a whole session."""
    node.lease.lease.expires_at = 0.0
    node.lease.poll()


def test_a_fenced_broker_leads_nothing_follows_nothing_and_says_so(tmp_path):
    node, part = _node(tmp_path)
    told = []
    node.fence_listeners.append(told.append)
    node.cache.brokers = {b: zk.BrokerInfo(b, {"PLAINTEXT": (f"h{b}", 9092)}) for b in (0, 1, 2)}
    node.on_state("t", 0, PartitionState(0, 3, (0, 1, 2), 1, version=7))
    assert part.is_leader and node.leader_of("t", 0) == 0
    _fence(node)
    assert node.fenced and told == [True]
    assert not part.is_leader and part.leader == -1 and part.leader_epoch == 3
    assert node.leader_of("t", 0) == -1
    core = SimpleNamespace(
        broker_id=0,
        config=node.config,
        advertised=lambda listener: ("h0", 9092),
        cluster=node,
    )
    assert [b["node_id"] for b in live_brokers(core, "PLAINTEXT")] == [1, 2]
    assert node.active_controller_id() == -1


async def test_states_heard_while_fenced_apply_once_zookeeper_answers_again(tmp_path):
    node, part = _node(tmp_path)
    told = []
    node.fence_listeners.append(told.append)
    node.on_state("t", 0, PartitionState(1, 3, (0, 1, 2), 1, version=7))
    assert ("t", 0) in node.fetchers.fetchers[1].partitions
    _fence(node)
    assert ("t", 0) not in node.fetchers.fetchers[1].partitions
    state = PartitionState(0, 4, (0, 1), 2, version=8)
    node.on_state("t", 0, state)  # heard, but a fenced broker does not act on it
    assert not part.is_leader and part.leader_epoch == 3
    _zookeeper_has(node, state)
    assert node.lease.lease.renew(sent_at=time.monotonic(), now=time.monotonic())
    node.lease.on_renewed()
    try:
        await within(_until(lambda: told == [True, False]), 5)
        assert part.is_leader and part.leader_epoch == 4 and part.isr == {0, 1}
    finally:
        await node.fetchers.stop()


async def _until(condition) -> None:
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
