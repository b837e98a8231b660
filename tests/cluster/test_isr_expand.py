"""Pure unit test of the leader's ISR expansion rule (broker/cluster/isr.py): a
caught-up follower joins the ISR, a broker in controlled shutdown does not (KIP-841),
though it keeps fetching until it stops."""

import types

from broker.cluster.isr import IsrManager


class Config(dict):
    broker_id = 0


def manager(leaving: set[int]):
    node = types.SimpleNamespace(leaving=leaving)
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
