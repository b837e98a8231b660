"""The cluster node's metadata cache (broker/cluster/metadata_cache.py): pure rules."""

from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.metadata_store import TopicMeta
from broker.cluster.zk import BrokerInfo, Moving, PartitionState

KEY = ("t", 0)
states = st.builds(
    PartitionState,
    leader=st.integers(-1, 3),
    leader_epoch=st.integers(0, 5),
    isr=st.tuples(st.integers(0, 3)),
    version=st.integers(0, 5),
)


@given(st.lists(states, min_size=1, max_size=12))
def test_the_newest_state_wins_whatever_the_order_they_arrive_in(arrivals):
    cache = MetadataCache()
    for state in arrivals:
        kept = cache.record_state(KEY, state)
        assert kept == (cache.states[KEY] is state)
    newest = max((s.leader_epoch, s.version) for s in arrivals)
    kept = cache.states[KEY]
    assert (kept.leader_epoch, kept.version) == newest


def _cache(fenced=False) -> MetadataCache:
    cache = MetadataCache(lambda: fenced)
    cache.brokers = {b: BrokerInfo(b, {"PLAINTEXT": (f"h{b}", 9092)}) for b in (0, 1)}
    cache.topics["t"] = TopicMeta("t", 2, 3, {}, [[0, 1, 2], [1, 2, 0]])
    cache.record_state(("t", 0), PartitionState(1, 4, (1, 0), version=2))
    cache.record_state(("t", 1), PartitionState(2, 1, (2,), version=0))
    return cache


def test_a_leader_counts_while_live_and_not_fenced():
    cache = _cache()
    assert [cache.leader_of("t", p) for p in (0, 1, 2)] == [1, -1, -1]
    assert cache.offline_partitions() == 1
    assert not cache.serves(cache.topics["t"])
    assert _cache(fenced=True).leader_of("t", 0) == -1


def test_partition_view_as_metadata_describes_it():
    view = _cache().partition_view("t", 0)
    assert (view.leader, view.leader_epoch, view.replicas) == (1, 4, [0, 1, 2])
    assert (view.isr, view.offline) == ([1, 0], [2])
    cache = _cache()
    cache.forget_topic("t", 2)
    assert cache.partition_view("t", 1) == (-1, -1, [1, 2, 0], [], [2])


def test_the_replicas_a_reassignment_removes_are_known_until_the_topic_goes():
    cache = _cache()
    cache.record_moving("t", {1: Moving(adding=(3,), removing=(0,))})
    assert cache.removing("t", 1) == (0,)
    assert cache.removing("t", 0) == ()
    assert cache.removing("other", 0) == ()
    cache.forget_topic("t", 2)
    assert cache.removing("t", 1) == ()
