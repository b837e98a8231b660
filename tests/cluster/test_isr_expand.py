"""Pure unit test of the leader's ISR expansion rule (broker/cluster/isr.py): a
caught-up follower joins the ISR, a broker in controlled shutdown does not (KIP-841),
though it keeps fetching until it stops, nor does a replica a reassignment removes;
one it moved away leaves the ISR."""

import types

from broker.cluster.isr import IsrManager
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.zk import Moving


class Config(dict):
    broker_id = 0


def manager(leaving: set[int], removing: tuple[int, ...] = ()):
    cache = MetadataCache()
    cache.record_moving("t", {0: Moving(adding=(0,), removing=removing)} if removing else {})
    node = types.SimpleNamespace(leaving=leaving, cache=cache)
    isr = IsrManager(node, Config({"replica.lag.time.max.ms": 10_000}))
    submitted = []
    isr._submit = lambda partition, new_isr: submitted.append(new_isr)
    return isr, submitted


def partition():
    return types.SimpleNamespace(
        key=("t", 0),
        is_leader=True,
        isr={0},
        isr_list=lambda: [0],
        can_join_isr=lambda replica_id: True,
    )


def test_a_caught_up_follower_joins_the_isr():
    isr, submitted = manager(leaving=set())
    isr.maybe_expand(partition(), 1)
    assert submitted == [[0, 1]]


def test_a_broker_in_controlled_shutdown_does_not_join_the_isr():
    isr, submitted = manager(leaving={1})
    isr.maybe_expand(partition(), 1)
    assert submitted == []


def test_a_replica_being_removed_does_not_join_the_isr_again():
    isr, submitted = manager(leaving=set(), removing=(1,))
    isr.maybe_expand(partition(), 1)
    assert submitted == []
    isr.maybe_expand(partition(), 2)
    assert submitted == [[0, 2]]


def test_a_replica_moved_away_leaves_the_isr_at_once():
    isr, submitted = manager(leaving=set())
    led = types.SimpleNamespace(
        key=("t", 0),
        is_leader=True,
        isr={0, 1, 2},
        replicas=[0, 1],  # a reassignment moved the replica off broker 2
        isr_list=lambda: [0, 1, 2],
        lagging_followers=lambda now_ms, lag_ms: set(),
    )
    isr.node.replicas = types.SimpleNamespace(partitions={led.key: led})
    isr.check_shrink(0)
    assert submitted == [[0, 1]]
