import asyncio

from broker.groups.group import GroupState
from broker.protocol.errors import ErrorCode
from tests.broker.groups.fakes import Driver, settle

E = ErrorCode


async def test_two_members_join_leader_gets_members_and_sync_distributes():
    d = Driver(initial_rebalance_delay_ms=3000)
    t1 = d.join(client_id="a")
    t2 = d.join(client_id="b", now=100)
    await settle()
    assert not t1.done() and not t2.done()  # waiting out the initial delay
    await d.coord.tick(3000)  # b arrived during it: wait one more delay
    assert not t1.done()
    await d.coord.tick(6000)
    r1, r2 = await t1, await t2
    assert r1.error == r2.error == E.NONE
    assert r1.member_id.startswith("a-") and r2.member_id.startswith("b-")
    assert r1.generation_id == r2.generation_id == 1
    assert r1.leader == r2.leader == r1.member_id
    assert r1.protocol_name == "range"
    assert [m.member_id for m in r1.members] == [r1.member_id, r2.member_id]
    assert r1.members[0].metadata == b"sub-range"
    assert r2.members == ()
    s2 = d.sync("g", r2.member_id, 1, now=3100)
    await settle()
    assert not s2.done()  # followers wait for the leader
    assert d.heartbeat("g", r2.member_id, 1, now=3100) == E.NONE
    s1 = d.sync("g", r1.member_id, 1, {r1.member_id: b"x", r2.member_id: b"y"}, now=3200)
    assert (await s1).assignment == b"x"
    assert (await s2).assignment == b"y"
    assert d.coord.groups["g"].state is GroupState.STABLE
    # A late follower sync in Stable gets its assignment at once.
    assert (await d.sync("g", r2.member_id, 1)).assignment == b"y"


async def test_leave_triggers_rebalance_and_heartbeat_says_so():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    top, per_member = await d.coord.leave_group("g", [(follower, None)], 4000)
    assert (top, per_member) == (E.NONE, [E.NONE])
    assert d.coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert d.heartbeat("g", leader, 1, now=4100) == E.REBALANCE_IN_PROGRESS
    assert d.heartbeat("g", follower, 1, now=4100) == E.UNKNOWN_MEMBER_ID
    r = await d.join(member_id=leader, now=4200)
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, leader)
    assert [m.member_id for m in r.members] == [leader]
    assert d.heartbeat("g", leader, 1, now=4300) == E.ILLEGAL_GENERATION


async def test_last_member_leaving_empties_the_group_at_once():
    d = Driver()
    r = await d.join()
    await d.sync("g", r.member_id, 1, {r.member_id: b"A"})
    assert await d.coord.leave_group("g", [(r.member_id, None)], 100) == (E.NONE, [E.NONE])
    group = d.coord.groups["g"]
    assert (group.state, group.generation, group.leader_id) == (GroupState.EMPTY, 2, None)


async def test_leave_batch_v3_and_unknown_members():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    top, per_member = await d.coord.leave_group(
        "g", [(follower, None), ("nobody", None), ("", "no-such-instance")], 4000
    )
    assert top == E.NONE
    assert per_member == [E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert await d.coord.leave_group("other", [("x", None)], 4000) == (
        E.NONE,
        [E.UNKNOWN_MEMBER_ID],
    )


async def test_session_expiry_removes_member_and_rebalances():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    assert d.heartbeat("g", leader, 1, now=9000) == E.NONE
    await d.coord.tick(15_999)
    assert follower in d.coord.groups["g"].members
    await d.coord.tick(16_000)  # follower's last contact was its sync at 6000
    assert follower not in d.coord.groups["g"].members
    assert d.heartbeat("g", leader, 1, now=16_100) == E.REBALANCE_IN_PROGRESS
    r = await d.join(member_id=leader, now=16_200)
    assert r.generation_id == 2 and len(r.members) == 1


async def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    t3 = d.join(client_id="c", now=4000, rebalance=8000)
    t1 = d.join(member_id=leader, now=4100)
    await settle()
    # The follower keeps heartbeating but never rejoins.
    assert d.heartbeat("g", follower, 1, now=5000) == E.REBALANCE_IN_PROGRESS
    assert not t3.done()
    await d.coord.tick(4000 + 30_000)  # the largest rebalance timeout
    r3, r1 = await t3, await t1
    assert r1.generation_id == r3.generation_id == 2
    assert {m.member_id for m in r1.members} == {leader, r3.member_id}
    assert d.heartbeat("g", follower, 2, now=34_100) == E.UNKNOWN_MEMBER_ID


async def test_member_id_required_round_trip():
    d = Driver()
    r = await d.join(v4=True, client_id="kp")
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id.startswith("kp-")
    r2 = await d.join(member_id=r.member_id, v4=True, now=10)
    assert (r2.error, r2.member_id, r2.generation_id) == (E.NONE, r.member_id, 1)
    # A pending id that never comes back expires after the session timeout.
    p = await d.join(v4=True, client_id="late", now=100)
    assert p.error == E.MEMBER_ID_REQUIRED
    await d.coord.tick(100 + 10_000)
    late = await d.join(member_id=p.member_id, v4=True, now=10_200)
    assert late.error == E.UNKNOWN_MEMBER_ID


async def test_pending_member_blocks_join_completion_until_it_joins():
    d = Driver()
    first = await d.join()
    assert first.generation_id == 1
    await d.sync("g", first.member_id, 1, {first.member_id: b"A"})
    p = await d.join(v4=True, now=100)  # group stays Stable: nothing joined yet
    assert d.coord.groups["g"].state is GroupState.STABLE
    t1 = d.join(member_id=first.member_id, now=200)  # the leader rejoins
    await settle()
    assert not t1.done()
    t2 = d.join(member_id=p.member_id, v4=True, now=300)
    r1, r2 = await t1, await t2
    assert r1.generation_id == r2.generation_id == 2


async def test_static_member_rejoin_replaces_without_rebalance():
    d = Driver(initial_rebalance_delay_ms=3000)
    t1 = d.join(instance="i-1", client_id="s")
    t2 = d.join(client_id="dyn", now=10)
    await settle()
    await d.coord.tick(3000)
    await d.coord.tick(6000)
    r1, r2 = await t1, await t2
    s2 = d.sync("g", r2.member_id, 1, now=3000)
    await d.sync("g", r1.member_id, 1, {r1.member_id: b"A", r2.member_id: b"B"}, 3000, "i-1")
    await s2
    # The static member restarts: same instance id, no member id.
    r1b = await d.join(instance="i-1", client_id="s", now=5000)
    assert r1b.error == E.NONE and r1b.member_id != r1.member_id
    assert r1b.generation_id == 1
    # It keeps the leader role, but the answer names the leader it replaced so that
    # it runs no assignment that the Stable group would ignore (Kafka before v9).
    assert r1b.leader == r1.member_id
    assert d.coord.groups["g"].leader_id == r1b.member_id
    assert d.coord.groups["g"].state is GroupState.STABLE
    sync = await d.sync("g", r1b.member_id, 1, now=5100, instance="i-1")
    assert (sync.error, sync.assignment) == (E.NONE, b"A")
    assert d.heartbeat("g", r1.member_id, 1, now=5200, instance="i-1") == E.FENCED_INSTANCE_ID
    assert d.heartbeat("g", r1.member_id, 1, now=5200) == E.UNKNOWN_MEMBER_ID
    assert d.heartbeat("g", r2.member_id, 1, now=5200) == E.NONE
    late = await d.join(member_id=r1.member_id, instance="i-1", now=5300)
    assert late.error == E.FENCED_INSTANCE_ID


async def test_static_member_rejoin_during_rebalance_fences_old_join():
    d = Driver()
    r1 = await d.join(instance="i-1")
    await d.sync("g", r1.member_id, 1, {r1.member_id: b"A"})
    t2 = d.join(client_id="dyn", now=10)
    r1 = await d.join(member_id=r1.member_id, instance="i-1", now=20)
    r2 = await t2
    s2 = d.sync("g", r2.member_id, 2, now=30)
    await d.sync("g", r1.member_id, 2, {r1.member_id: b"A", r2.member_id: b"B"}, 30)
    await s2
    t_new = d.join(client_id="new", now=100)
    t_old = d.join(member_id=r1.member_id, instance="i-1", now=200)
    await settle()
    assert not t_old.done()  # waiting for the dynamic member to rejoin
    t_b = d.join(instance="i-1", now=300)  # the static member restarted meanwhile
    assert (await t_old).error == E.FENCED_INSTANCE_ID
    t_2 = d.join(member_id=r2.member_id, now=400)
    rb, rn, r2b = await t_b, await t_new, await t_2
    assert rb.generation_id == rn.generation_id == r2b.generation_id == 3
    assert rb.member_id != r1.member_id


def protocols(*names):
    return [(n, n.encode()) for n in names]


async def test_protocol_selection_by_votes_among_common_protocols():
    d = Driver(initial_rebalance_delay_ms=1000)
    tasks = [
        d.join(protocols=protocols("roundrobin", "range", "sticky")),
        d.join(protocols=protocols("sticky", "range")),
        d.join(protocols=protocols("sticky", "range", "roundrobin")),
    ]
    await settle()
    await d.coord.tick(1000)
    await d.coord.tick(2000)
    results = [await t for t in tasks]
    assert {r.protocol_name for r in results} == {"sticky"}
    assert results[0].members[0].metadata == b"sticky"


async def test_inconsistent_protocols_are_refused():
    d = Driver()
    await d.join(protocols=protocols("range", "roundrobin"))
    r = await d.join(protocols=protocols("cooperative-sticky"), now=10)
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await d.join(protocol_type="connect", now=10)
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await d.join(protocols=[], group="h")).error == E.INCONSISTENT_GROUP_PROTOCOL


async def test_request_validation():
    d = Driver()
    assert (await d.join(session=1000)).error == E.INVALID_SESSION_TIMEOUT
    assert (await d.join(group="")).error == E.INVALID_GROUP_ID
    assert (await d.join(member_id="ghost")).error == E.UNKNOWN_MEMBER_ID
    assert d.heartbeat("nope", "m", 1) == E.UNKNOWN_MEMBER_ID
    assert (await d.sync("nope", "m", 1)).error == E.UNKNOWN_MEMBER_ID
    r = await d.join()
    assert (await d.sync("g", r.member_id, 7)).error == E.ILLEGAL_GENERATION
    d.coord.unload_partition(d.coord.partition_for("g"))
    assert d.heartbeat("g", r.member_id, 1) == E.NOT_COORDINATOR
    assert (await d.join(group="g")).error == E.NOT_COORDINATOR


async def test_follower_rejoin_with_same_metadata_when_stable_returns_current_generation():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    r = await d.join(member_id=follower, now=4000)
    assert (r.error, r.generation_id, r.members) == (E.NONE, 1, ())
    assert d.coord.groups["g"].state is GroupState.STABLE
    # The leader rejoining always rebalances.
    t = d.join(member_id=leader, now=4100)
    await settle()
    assert d.coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    t.cancel()


async def test_initial_delay_extends_while_members_arrive():
    d = Driver(initial_rebalance_delay_ms=3000)
    t1 = d.join(rebalance=10_000)
    await settle()
    t2 = d.join(now=2000, rebalance=10_000)
    await settle()
    await d.coord.tick(3000)
    assert not t1.done()  # a member arrived during the delay: wait another round
    await d.coord.tick(6000)
    r1, r2 = await t1, await t2
    assert r1.generation_id == r2.generation_id == 1 and len(r1.members) == 2


async def test_store_failure_on_leader_sync_fails_sync_and_rebalances():
    d = Driver()
    r = await d.join()
    d.store.fail_with = E.NOT_ENOUGH_REPLICAS
    s = await d.sync("g", r.member_id, 1, {r.member_id: b"A"})
    assert s.error == E.COORDINATOR_NOT_AVAILABLE
    assert d.coord.groups["g"].state is GroupState.PREPARING_REBALANCE


async def test_sync_waiting_follower_gets_rebalance_in_progress_when_member_joins():
    d = Driver()
    first = await d.join()
    t_new = d.join(client_id="n", now=10)
    t_old = d.join(member_id=first.member_id, now=20)
    r_new, r_old = await t_new, await t_old
    follower = r_new if r_new.member_id != r_old.leader else r_old
    s = d.sync("g", follower.member_id, 2, now=30)
    await settle()
    t3 = d.join(client_id="third", now=40)
    assert (await s).error == E.REBALANCE_IN_PROGRESS
    t3.cancel()
    await asyncio.sleep(0)


async def test_describe_and_list():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    err, summary = d.coord.describe_group("g")
    assert err == E.NONE
    assert (summary.state, summary.protocol_type, summary.protocol) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.client_host, m.assignment) for m in summary.members] == [
        (leader, "/127.0.0.1", b"A1"),
        (follower, "/127.0.0.1", b"A2"),
    ]
    assert summary.members[0].client_id == "a"
    assert d.coord.describe_group("missing")[1].state == "Dead"
    assert d.coord.list_groups() == [("g", "consumer", "Stable", "classic")]
