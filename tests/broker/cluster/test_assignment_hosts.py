"""Pure unit and property tests: replica assignment over brokers that share hosts
(several brokers per machine, one per core), with and without racks."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.assignment import (
    assign_replicas,
    broker_hosts,
    host_shortfall,
    rack_alternated,
)
from broker.cluster.zk import BrokerInfo


def kafka_assignment(brokers, partitions, rf, start):
    """The assignment as it was before hosts counted (Kafka's AdminUtils, without the
    shift of followers): the reference the host rule must leave unchanged when every
    broker is on a host of its own."""
    racks = set(brokers.values())
    ids = sorted(brokers) if None in racks else rack_alternated(brokers)
    n = len(ids)
    out = []
    for i in range(partitions):
        chosen, used = [], set()
        k = (i + start) % n
        while len(chosen) < rf:
            candidate = ids[k % n]
            fresh_rack = brokers[candidate] not in used or len(used) == len(racks)
            if candidate not in chosen and fresh_rack:
                chosen.append(candidate)
                used.add(brokers[candidate])
            k += 1
        out.append(chosen)
    return out


@st.composite
def layouts(draw, sane=False):
    """(brokers: id -> rack, hosts: id -> host, rf, partitions, start). Broker ids are
    drawn sparse and in any order relative to hosts. `sane`: each host in one rack (the
    host's rack is drawn once), as machines are."""
    ids = draw(st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True))
    host_names = [f"10.0.0.{i}" for i in range(1, 7)]
    hosts = {b: draw(st.sampled_from(host_names)) for b in ids}
    if draw(st.booleans()):
        if sane:
            rack_of = {h: draw(st.sampled_from("abc")) for h in host_names}
            brokers = {b: rack_of[hosts[b]] for b in ids}
        else:
            brokers = {b: draw(st.sampled_from("abc")) for b in ids}
    else:
        brokers = dict.fromkeys(ids)
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 30))
    start = draw(st.integers(0, len(ids) - 1))
    return brokers, hosts, rf, partitions, start


@given(layouts())
def test_replicas_go_to_distinct_hosts_whenever_there_are_enough(layout):
    brokers, hosts, rf, partitions, start = layout
    distinct = len(set(hosts.values()))
    lists = assign_replicas(brokers, partitions, rf, start, hosts=hosts)
    assert len(lists) == partitions
    for replicas in lists:
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
        # every host first, then again: as spread as the hosts allow
        assert len({hosts[b] for b in replicas}) == min(rf, distinct)
    assert (host_shortfall(hosts, rf) is None) == (distinct >= rf)


@given(layouts(sane=True))
def test_racks_spread_as_before_and_leaders_stay_balanced(layout):
    brokers, hosts, rf, partitions, start = layout
    lists = assign_replicas(brokers, partitions, rf, start, hosts=hosts)
    racks = set(brokers.values())
    if None not in racks:
        for replicas in lists:
            assert len({brokers[b] for b in replicas}) == min(rf, len(racks))
    leaders = Counter(replicas[0] for replicas in lists)
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


@given(layouts())
def test_brokers_on_hosts_of_their_own_or_all_on_one_get_kafkas_assignment(layout):
    brokers, _, rf, partitions, start = layout
    expected = kafka_assignment(brokers, partitions, rf, start)
    assert assign_replicas(brokers, partitions, rf, start) == expected
    own = {b: f"host-{b}" for b in brokers}
    assert assign_replicas(brokers, partitions, rf, start, hosts=own) == expected
    one = dict.fromkeys(brokers, "the-host")
    assert assign_replicas(brokers, partitions, rf, start, hosts=one) == expected


def test_six_brokers_on_three_hosts_spread_replicas_and_leaders_evenly():
    hosts = {0: "127.0.0.2", 1: "127.0.0.2", 2: "127.0.0.3", 3: "127.0.0.3"}
    hosts |= {4: "127.0.0.4", 5: "127.0.0.4"}
    lists = assign_replicas(dict.fromkeys(hosts), 12, 3, start=0, hosts=hosts)
    assert lists[:3] == [[0, 2, 4], [2, 4, 1], [4, 1, 3]]
    for replicas in lists:
        assert len({hosts[b] for b in replicas}) == 3
    assert Counter(b for replicas in lists for b in replicas) == dict.fromkeys(hosts, 6)
    assert Counter(replicas[0] for replicas in lists) == dict.fromkeys(hosts, 2)


def test_racks_first_then_hosts_within_the_rack_choice():
    # two racks, each of two machines with two brokers
    hosts = {0: "a1", 1: "a1", 2: "a2", 3: "a2", 4: "b1", 5: "b1", 6: "b2", 7: "b2"}
    brokers = {b: host[0] for b, host in hosts.items()}
    for replicas in assign_replicas(brokers, 16, 3, hosts=hosts):
        assert {brokers[b] for b in replicas} == {"a", "b"}
        assert len({hosts[b] for b in replicas}) == 3


def test_the_host_rule_wins_over_racks_declared_across_one_machine():
    # brokers 0 and 1 share a machine but declare different racks
    brokers = {0: "a", 1: "b", 2: "a"}
    hosts = {0: "m1", 1: "m1", 2: "m2"}
    for replicas in assign_replicas(brokers, 6, 2, hosts=hosts):
        assert len({hosts[b] for b in replicas}) == 2


def test_fewer_hosts_than_replicas_is_a_warning_not_a_refusal():
    hosts = {0: "h1", 1: "h1", 2: "h2", 3: "h2"}
    lists = assign_replicas(dict.fromkeys(hosts), 4, 3, hosts=hosts)
    assert all(len({hosts[b] for b in r}) == 2 for r in lists)
    assert host_shortfall(hosts, 3) == (
        "replication factor 3 over brokers on 2 host(s) (h1, h2): some replicas of a "
        "partition share a host"
    )
    assert host_shortfall(hosts, 2) is None


def test_a_brokers_host_is_its_inter_broker_endpoints():
    infos = {
        1: BrokerInfo(1, {"CLIENT": ("lb.example.net", 9092), "REPL": ("Node1.Local", 9093)}),
        2: BrokerInfo(2, {"CLIENT": ("lb.example.net", 9094), "REPL": ("node2.local", 9095)}),
        3: BrokerInfo(3, {"PLAINTEXT": ("10.0.0.3", 9092)}),
    }
    assert broker_hosts(infos, "REPL") == {1: "node1.local", 2: "node2.local", 3: "10.0.0.3"}
