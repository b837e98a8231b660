"""Pure helpers of bench/bench_rebalance.py and bench/rebalance_members.py (no broker here)."""

from bench.bench_rebalance import (
    Callback,
    Cost,
    Join,
    Sizes,
    apply,
    covers,
    join_phase,
    next_at_phase,
    rebalance_cost,
    spread,
    table,
    to_figures,
)
from bench.rebalance_members import client_config

fs = frozenset
BEFORE = {"a": fs({0, 1, 2}), "b": fs({3, 4, 5})}


def cb(t: float, member: str, kind: str, *parts: int) -> Callback:
    return Callback(t, member, kind, fs(parts))


def test_apply_adds_and_removes_and_says_whether_anything_changed():
    owned = dict(BEFORE)
    assert apply(owned, cb(1, "a", "revoke", 2))
    assert owned["a"] == {0, 1}
    assert not apply(owned, cb(2, "a", "assign"))  # librdkafka's empty incremental assign
    assert apply(owned, cb(3, "c", "assign", 2))
    assert apply(owned, cb(4, "b", "lost", 3, 4, 5)) and owned["b"] == set()


def test_covers_wants_every_partition_once_and_every_member_some():
    assert covers(BEFORE, {"a", "b"}, 6)
    assert not covers(BEFORE, {"a", "b", "c"}, 6)  # c owns nothing yet
    assert not covers(BEFORE, {"a", "b"}, 7)  # partition 6 unowned
    assert not covers(BEFORE | {"c": fs({5})}, {"a", "b", "c"}, 6)  # 5 owned twice
    assert not covers(BEFORE | {"b": fs({3, 4})}, {"a", "b"}, 6)  # 5 revoked, pending
    assert not covers({}, set(), 0)


def test_eager_pauses_every_partition_even_those_kept():
    callbacks = [
        cb(10.5, "a", "revoke", 0, 1, 2),
        cb(10.6, "b", "revoke", 3, 4, 5),
        cb(11.2, "a", "assign", 0, 1),
        cb(11.3, "b", "assign", 3, 4),
        cb(11.4, "c", "assign", 2, 5),
    ]
    cost = rebalance_cost(BEFORE, callbacks, 10.0)
    assert cost == Cost(
        moved=2,
        unaffected_paused=4,
        paused=6,
        members_disturbed=2,
        stable_s=cost.stable_s,
        callbacks=5,
    )
    assert abs(cost.stable_s - 1.4) < 1e-9
    assert abs(cost.heartbeats(500) - 2.8) < 1e-9


def test_incremental_pauses_only_what_moves():
    callbacks = [
        cb(10.1, "c", "assign"),  # joined with nothing yet
        cb(10.9, "b", "revoke", 5),
        cb(11.0, "a", "assign"),  # no change: not the time of stability
        cb(11.6, "c", "assign", 5),
        cb(12.5, "a", "assign"),
    ]
    cost = rebalance_cost(BEFORE, callbacks, 10.0)
    assert (cost.moved, cost.unaffected_paused, cost.paused, cost.members_disturbed) == (
        1,
        0,
        1,
        1,
    )
    assert abs(cost.stable_s - 1.6) < 1e-9


def test_a_partition_revoked_and_given_back_counts_as_unaffected_paused():
    callbacks = [
        cb(10.2, "a", "revoke", 1, 2),
        cb(10.4, "c", "assign", 2),
        cb(10.8, "a", "assign", 1),
    ]
    cost = rebalance_cost(BEFORE, callbacks, 10.0)
    assert (cost.moved, cost.unaffected_paused, cost.paused) == (1, 1, 2)


def test_joins_at_evenly_spread_phases_of_the_heartbeat():
    assert [join_phase(r, 3) for r in range(3)] == [1 / 6, 0.5, 5 / 6]
    assert join_phase(0, 1) == 0.5
    assert next_at_phase(100.0, 100.2, 1.0, 0.5) == 100.5
    assert next_at_phase(100.0, 103.7, 1.0, 0.5) == 104.5
    assert next_at_phase(100.0, 103.5, 1.0, 0.5) == 103.5
    assert next_at_phase(100.0, 99.0, 1.0, 0.25) == 100.25  # never before the origin's


def test_spread_deals_members_over_processes():
    names = [f"m{i}" for i in range(10)]
    parts = spread(names, 4)
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert sorted(sum(parts, [])) == sorted(names)
    assert spread(names[:2], 4) == [["m0"], ["m1"]]


def test_client_config_per_protocol():
    eager = client_config("h:1", "g", "m0", "eager", 1000)
    assert eager["partition.assignment.strategy"] == "range"
    assert eager["heartbeat.interval.ms"] == 1000 and eager["client.id"] == "m0"
    coop = client_config("h:1", "g", "m0", "cooperative", 1000)
    assert coop["partition.assignment.strategy"] == "cooperative-sticky"
    consumer = client_config("h:1", "g", "m0", "consumer", 1000)
    assert consumer["group.protocol"] == "consumer"
    assert consumer["group.remote.assignor"] == "uniform"
    # librdkafka takes these from the broker under the consumer protocol
    assert "heartbeat.interval.ms" not in consumer and "session.timeout.ms" not in consumer
    assert "partition.assignment.strategy" not in consumer


def test_figures_and_table_side_by_side():
    sizes = Sizes(members=2, partitions=6, processes=1, repeats=2)
    eager = Cost(2, 4, 6, 2, 1.5, 5)
    results = {
        "eager": (3.0, [Join(eager, ""), Join(eager, "")]),
        "consumer": (1.0, [Join(Cost(2, 0, 2, 2, 1.2, 4), ""), Join(Cost(2, 0, 2, 2, 2.4, 4), "")]),
    }
    figs = to_figures(results, sizes)
    assert all({"area", "metric", "value"} <= set(f) for f in figs)
    assert {f["area"] for f in figs} == {"rebalance"}
    targeted = {f["metric"].split(":")[0]: f for f in figs if f.get("target")}
    assert set(targeted) == {"consumer protocol (KIP-848, uniform)"}
    hb = next(f for f in figs if f.get("target") == "<= 2")
    assert abs(hb["value"] - 1.8) < 1e-9 and "classic eager (range) 1.5" in hb["peer"]
    check = figs[-1]
    assert check["ok"] and check["value"] == "4 of 4"
    lines = table(results, sizes).splitlines()
    assert len(lines) == 1 + 3 + 3  # header, two joins and a median per protocol
    assert "median" in lines[3]
    bad = dict(results, eager=(3.0, [Join(eager, "PREPARING_REBALANCING with 3 members")]))
    assert not to_figures(bad, sizes)[-1]["ok"]
