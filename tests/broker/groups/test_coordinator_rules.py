"""The classic group coordinator rule by rule, each test named after the rule of
Kafka's GroupCoordinator (3.x) it checks. Sans-I/O: a fake clock (`now` arguments
and `tick`) and an in-memory `__consumer_offsets`."""

from broker.groups.group import GroupState
from broker.protocol.errors import ErrorCode
from tests.broker.groups.fakes import Driver, settle

E = ErrorCode
TP = {("t", 0): (5, -1, "")}


async def single_stable(d, instance=None, client_id="a"):
    """One member, Stable at generation 1; returns its member id."""
    r = await d.join(instance=instance, client_id=client_id)
    await d.sync("g", r.member_id, 1, {r.member_id: b"A"}, instance=instance)
    return r.member_id


async def second_generation(d, first, now=100, instance=None):
    """A second member joins and `first` rejoins: generation 2 is CompletingRebalance.
    Returns the new member's id."""
    t_new = d.join(client_id="b", now=now)
    t_first = d.join(member_id=first, instance=instance, now=now + 100)
    r_new, r_first = await t_new, await t_first
    assert r_new.generation_id == r_first.generation_id == 2
    assert r_first.leader == first
    return r_new.member_id


async def rejoin_into_rebalance(d, member_id, protocols=None):
    """A Stable pair in which `member_id` ("leader"/"follower") rejoins at 7 s: the
    group is PreparingRebalance. Returns (leader, follower, the rejoin's task)."""
    leader, follower = await d.stable_pair()
    ids = {"leader": leader, "follower": follower}
    kwargs = {"protocols": protocols} if protocols else {}
    t = d.join(member_id=ids[member_id], now=7000, **kwargs)
    await settle()
    assert d.coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert not t.done()
    return leader, follower, t


async def test_known_member_with_changed_subscription_in_stable_triggers_rebalance():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower, t = await rejoin_into_rebalance(d, "follower", [("range", b"sub-2")])
    assert d.heartbeat("g", leader, 1, now=7100) == E.REBALANCE_IN_PROGRESS
    r_leader = await d.join(member_id=leader, now=7200)
    r_follower = await t
    assert r_leader.generation_id == r_follower.generation_id == 2
    assert {m.member_id: m.metadata for m in r_leader.members}[follower] == b"sub-2"


async def test_leader_rejoining_in_stable_triggers_rebalance_even_unchanged():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower, t_leader = await rejoin_into_rebalance(d, "leader")
    t_follower = d.join(member_id=follower, now=7100)
    assert (await t_leader).generation_id == (await t_follower).generation_id == 2


async def test_join_phase_completes_as_soon_as_all_known_members_rejoined():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower, t_leader = await rejoin_into_rebalance(d, "leader")
    t_follower = d.join(member_id=follower, now=7100)  # long before the 30 s deadline
    r = await t_follower
    assert (r.generation_id, d.coord.groups["g"].state) == (2, GroupState.COMPLETING_REBALANCE)
    assert (await t_leader).members


async def test_pending_member_expires_after_its_session_timeout():
    d = Driver()
    leader = await single_stable(d)
    p = await d.join(v4=True, client_id="p", now=1000, session=6000)
    assert p.error == E.MEMBER_ID_REQUIRED
    t = d.join(member_id=leader, now=1100)
    await settle()
    await d.coord.tick(6999)
    assert not t.done()  # the pending member could still join
    await d.coord.tick(7000)
    r = await t
    assert (r.generation_id, [m.member_id for m in r.members]) == (2, [leader])
    late = await d.join(member_id=p.member_id, v4=True, now=7100)
    assert late.error == E.UNKNOWN_MEMBER_ID


async def test_sync_answer_restarts_the_session_timer():
    d = Driver()
    leader = await single_stable(d)
    follower = await second_generation(d, leader)
    s_follower = d.sync("g", follower, 2, now=300)
    await settle()
    assert d.heartbeat("g", leader, 2, now=9000) == E.NONE  # Completing: a plain heartbeat
    await d.coord.tick(12_000)  # waiting for the leader keeps the follower alive
    assert follower in d.coord.groups["g"].members
    assignments = {leader: b"L", follower: b"F"}
    assert (await d.sync("g", leader, 2, assignments, now=12_000)).assignment == b"L"
    assert (await s_follower).assignment == b"F"
    await d.coord.tick(21_999)  # 10 s session from the answer at 12 s, not from 300 ms
    assert set(d.coord.groups["g"].members) == {leader, follower}
    await d.coord.tick(22_000)
    assert follower not in d.coord.groups["g"].members


async def test_member_that_sends_no_sync_within_the_rebalance_timeout_is_removed():
    d = Driver()
    leader = await single_stable(d)
    follower = await second_generation(d, leader)  # generation 2 completed at 200
    assignments = {leader: b"L", follower: b"F"}
    assert (await d.sync("g", leader, 2, assignments, now=300)).assignment == b"L"
    assert d.coord.groups["g"].state is GroupState.STABLE
    for now in (8000, 16_000, 24_000):  # both heartbeat; only the follower never syncs
        assert d.heartbeat("g", follower, 2, now=now) == E.NONE
        assert d.heartbeat("g", leader, 2, now=now) == E.NONE
    await d.coord.tick(30_199)
    assert follower in d.coord.groups["g"].members
    await d.coord.tick(30_200)  # 30 s rebalance timeout after the join completed
    assert follower not in d.coord.groups["g"].members
    assert d.heartbeat("g", leader, 2, now=30_300) == E.REBALANCE_IN_PROGRESS
    assert d.heartbeat("g", follower, 2, now=30_300) == E.UNKNOWN_MEMBER_ID


async def test_member_that_syncs_late_in_stable_is_no_longer_pending():
    d = Driver()
    leader = await single_stable(d)
    follower = await second_generation(d, leader)
    await d.sync("g", leader, 2, {leader: b"L", follower: b"F"}, now=300)
    assert (await d.sync("g", follower, 2, now=20_000)).assignment == b"F"
    assert d.heartbeat("g", leader, 2, now=25_000) == E.NONE
    assert d.heartbeat("g", follower, 2, now=25_000) == E.NONE
    await d.coord.tick(30_200)
    group = d.coord.groups["g"]
    assert (group.state, set(group.members)) == (GroupState.STABLE, {leader, follower})


async def test_static_member_that_did_not_rejoin_keeps_its_place_and_loses_leadership():
    d = Driver()
    static = await single_stable(d, instance="i-1", client_id="s")
    dynamic = await second_generation(d, static, instance="i-1")
    await d.sync("g", static, 2, {static: b"S", dynamic: b"D"}, now=300, instance="i-1")
    await d.sync("g", dynamic, 2, now=300)
    t_new = d.join(client_id="n", now=1000)
    t_dynamic = d.join(member_id=dynamic, now=1100)
    await settle()
    for now in (9000, 18_000, 27_000):  # the static member stays alive but never rejoins
        assert d.heartbeat("g", static, 2, now=now, instance="i-1") == E.REBALANCE_IN_PROGRESS
        await d.coord.tick(now)
    await d.coord.tick(31_000)  # the join deadline: 1000 + 30 s
    r_new, r_dynamic = await t_new, await t_dynamic
    group = d.coord.groups["g"]
    assert static in group.members and group.static_members["i-1"] == static
    assert r_dynamic.generation_id == 3 and r_dynamic.leader == dynamic
    assert {m.member_id for m in r_dynamic.members} == {static, dynamic, r_new.member_id}
    assert d.heartbeat("g", static, 2, now=31_100, instance="i-1") == E.ILLEGAL_GENERATION


async def test_join_phase_without_any_rejoined_member_waits_for_sessions_to_expire():
    d = Driver()
    static = await single_stable(d, instance="i-1")
    dynamic = await second_generation(d, static, instance="i-1")
    await d.sync("g", static, 2, {static: b"S", dynamic: b"D"}, now=300, instance="i-1")
    await d.coord.leave_group("g", [(dynamic, None)], 1000)
    for now in (9000, 18_000, 27_000, 30_000):  # alive, but it never rejoins
        assert d.heartbeat("g", static, 2, now=now, instance="i-1") == E.REBALANCE_IN_PROGRESS
        await d.coord.tick(now)
    await d.coord.tick(31_000)  # the join deadline: nobody to lead, keep waiting
    group = d.coord.groups["g"]
    assert (group.state, group.generation) == (GroupState.PREPARING_REBALANCE, 2)
    await d.coord.tick(39_999)
    assert static in group.members
    await d.coord.tick(40_000)  # its session (last heartbeat at 30 s) expired
    assert (group.state, group.generation, group.members) == (GroupState.EMPTY, 3, {})


async def test_heartbeat_error_codes_in_each_state():
    d = Driver()
    leader = await single_stable(d, instance="i-1")
    assert d.heartbeat("g", leader, 1, now=10, instance="i-1") == E.NONE  # Stable
    assert d.heartbeat("g", leader, 0, now=10) == E.ILLEGAL_GENERATION
    assert d.heartbeat("g", "ghost", 1, now=10) == E.UNKNOWN_MEMBER_ID
    assert d.heartbeat("g", "ghost", 1, now=10, instance="i-1") == E.FENCED_INSTANCE_ID
    assert d.heartbeat("g", leader, 1, now=10, instance="i-9") == E.UNKNOWN_MEMBER_ID
    t_new = d.join(client_id="b", now=100)
    await settle()
    assert d.heartbeat("g", leader, 1, now=110) == E.REBALANCE_IN_PROGRESS  # Preparing
    t_leader = d.join(member_id=leader, instance="i-1", now=120)
    await t_new, await t_leader
    assert d.coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert d.heartbeat("g", leader, 2, now=130) == E.NONE  # Completing
    d.coord.unload_partition(d.coord.partition_for("g"))
    assert d.heartbeat("g", leader, 2, now=140) == E.NOT_COORDINATOR


async def test_commit_checks_member_and_generation_before_the_group_state():
    d = Driver()
    leader = await single_stable(d)
    commit = d.coord.commit_offsets
    await second_generation(d, leader)
    assert d.coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert await commit("g", "ghost", None, 2, TP, 400) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await commit("g", leader, None, 1, TP, 400) == {("t", 0): E.ILLEGAL_GENERATION}
    assert await commit("g", leader, "i-9", 2, TP, 400) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await commit("g", "", None, -1, TP, 400) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await commit("g", leader, None, 2, TP, 400) == {("t", 0): E.REBALANCE_IN_PROGRESS}


async def test_commit_of_a_current_member_is_accepted_while_preparing_rebalance():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower, t = await rejoin_into_rebalance(d, "leader")
    assert await d.coord.commit_offsets("g", follower, None, 1, TP, 7100) == {("t", 0): E.NONE}
    assert d.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
    t.cancel()


async def test_sync_with_another_protocol_type_or_name_is_inconsistent():
    d = Driver()
    r = await d.join()
    sync = d.coord.sync_group
    a = {r.member_id: b"A"}
    bad_type = await sync("g", r.member_id, None, 1, a, 10, "connect", "range")
    assert bad_type.error == E.INCONSISTENT_GROUP_PROTOCOL
    bad_name = await sync("g", r.member_id, None, 1, a, 10, "consumer", "roundrobin")
    assert bad_name.error == E.INCONSISTENT_GROUP_PROTOCOL
    ok = await sync("g", r.member_id, None, 1, a, 10, "consumer", "range")
    assert (ok.error, ok.assignment, ok.protocol_type, ok.protocol_name) == (
        E.NONE,
        b"A",
        "consumer",
        "range",
    )


async def test_initial_delay_extends_only_for_a_group_that_never_had_a_generation():
    d = Driver(initial_rebalance_delay_ms=3000)
    t = d.join(client_id="a")
    await settle()
    await d.coord.tick(3000)
    r = await t
    await d.sync("g", r.member_id, 1, {r.member_id: b"A"}, now=3000)
    await d.coord.leave_group("g", [(r.member_id, None)], 4000)
    assert d.coord.groups["g"].generation == 2
    t1 = d.join(client_id="b", now=10_000, rebalance=10_000)
    await settle()
    t2 = d.join(client_id="c", now=12_000, rebalance=10_000)
    await settle()
    await d.coord.tick(13_000)  # one initial delay, not extended by c's arrival
    r1, r2 = await t1, await t2
    assert r1.generation_id == r2.generation_id == 3 and len(r1.members) == 2


async def test_static_replacement_that_cannot_be_stored_is_undone():
    d = Driver()
    old = await single_stable(d, instance="i-1")
    d.store.fail_with = E.NOT_ENOUGH_REPLICAS
    r = await d.join(instance="i-1", now=100)
    assert (r.error, r.member_id) == (E.COORDINATOR_NOT_AVAILABLE, "")
    d.store.fail_with = None
    group = d.coord.groups["g"]
    assert group.static_members["i-1"] == old and group.leader_id == old
    assert d.heartbeat("g", old, 1, now=200, instance="i-1") == E.NONE
