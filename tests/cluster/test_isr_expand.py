"""Pure unit test of the leader's ISR expansion rule (broker/cluster/isr.py): a
caught-up follower joins the ISR, a broker in controlled shutdown does not (KIP-841),
though it keeps fetching until it stops, nor does a replica a reassignment removes;
one it moved away leaves the ISR. The expansion's write: the follower is `joining`
until ZooKeeper's answer (or a re-read after an unknown outcome) settles it."""

import asyncio
import types

from kazoo.exceptions import BadVersionError, ConnectionLoss

from broker.cluster import zk
from broker.cluster.isr import IsrManager
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.partition import Partition
from broker.cluster.zk import Moving, PartitionState
from tests.broker.cluster.fakes import FakeLog


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


class FakeZk:
    """`call` answers a set with `outcome` (an exception to raise, or the new version)
    and a get with the state at `version`."""

    def __init__(self, outcome, version: int):
        self.outcome = outcome
        self.version = version
        self.calls: list[str] = []

    async def call(self, op, path, data=None, version=None):
        self.calls.append(op)
        if op == "set":
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return types.SimpleNamespace(version=self.outcome)
        return zk.encode_state(PartitionState(0, 3, (0,), 1, self.version)), types.SimpleNamespace(
            version=self.version
        )


def written(outcome, version_read: int):
    """Expand the ISR of a partition at state version 7 with the write answered by
    `outcome`; (partition, what the node was handed, zk calls)."""
    states = []
    node = types.SimpleNamespace(
        leaving=set(),
        cache=MetadataCache(),
        controller_epoch=1,
        zk=FakeZk(outcome, version_read),
        on_state=lambda topic, p, state: (
            states.append(state),
            part.update_isr(state.isr, state.version),
        ),
    )
    part = Partition("t", 0, FakeLog(), 0, [0, 1], leader_epoch=3)
    part.zk_version = 7
    part.update_follower_leo(1, 0)
    isr = IsrManager(node, Config({"replica.lag.time.max.ms": 10_000}))

    async def run():
        isr.maybe_expand(part, 1)
        assert part.joining == 1
        await asyncio.gather(*isr._tasks)

    asyncio.run(run())
    return part, states, node.zk.calls


def test_an_expansion_zookeeper_took_is_applied():
    part, states, calls = written(8, 8)
    assert calls == ["set"] and part.isr == {0, 1} and part.joining is None


def test_an_expansion_that_lost_a_race_is_dropped_and_the_state_re_read():
    part, states, calls = written(BadVersionError(), 9)
    assert calls == ["set", "get"] and part.joining is None and part.zk_version == 9


def test_an_expansion_of_unknown_outcome_holds_until_a_re_read_settles_it():
    part, states, calls = written(ConnectionLoss(), 7)  # the write did not land
    assert calls == ["set", "get"] and part.joining is None and part.isr == {0}
    part, states, calls = written(ConnectionLoss(), 8)  # it did
    assert calls == ["set", "get"] and part.joining is None and part.zk_version == 8
