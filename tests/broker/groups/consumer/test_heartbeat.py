"""ConsumerGroupHeartbeat on the coordinator, in memory: epochs, incremental
reconciliation, leaves, timeouts, static members, errors, offset checks and a new
coordinator resuming the group from `__consumer_offsets`."""

import uuid

from broker.groups.consumer.heartbeat import HeartbeatRequest
from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.protocol.errors import ErrorCode
from tests.broker.groups.fakes import MemoryStore

T1 = uuid.UUID(int=11)
T2 = uuid.UUID(int=12)
TOPICS = {"t1": (T1, 4), "t2": (T2, 2)}


def coordinator(store=None, topics=TOPICS, **config) -> GroupCoordinator:
    coord = GroupCoordinator(
        store or MemoryStore(), CoordinatorConfig(**config), lambda: dict(topics)
    )
    for p in range(coord.config.num_partitions):
        coord.load_partition(p, 0)
    return coord


async def hb(coord, member, epoch, owned=None, now=0, group="g", **kw):
    kw.setdefault("rebalance_timeout_ms", 30_000 if epoch == 0 else -1)
    if epoch == 0:
        kw.setdefault("subscribed_topic_names", ("t1",))
        owned = owned or {}
    return await coord.consumer.heartbeat(
        HeartbeatRequest(group, member, epoch, owned=owned, **kw), now
    )


async def test_join_then_second_member_takes_half_after_revocation():
    coord = coordinator()
    a = await hb(coord, "a", 0)
    assert a.error == ErrorCode.NONE and a.member_epoch == 1
    assert a.assignment == {T1: frozenset({0, 1, 2, 3})}
    assert a.heartbeat_interval_ms == 5000
    b = await hb(coord, "b", 0)
    assert b.member_epoch == 2 and b.assignment == {}  # a still owns everything
    a2 = await hb(coord, "a", 1, owned={T1: frozenset({0, 1, 2, 3})})
    assert a2.member_epoch == 1  # revoke first, keep the epoch
    kept = a2.assignment[T1]
    assert len(kept) == 2
    a3 = await hb(coord, "a", 1, owned={T1: kept})
    assert a3.member_epoch == 2 and a3.assignment is None  # unchanged assignment
    b2 = await hb(coord, "b", 2, owned={})
    assert b2.assignment == {T1: frozenset({0, 1, 2, 3}) - kept}
    group = coord.consumer_group("g")
    assert group.state == "Stable" and group.epoch == 2


async def test_epoch_errors_and_unknown_members():
    coord = coordinator()
    await hb(coord, "a", 0)
    assert (await hb(coord, "a", 5, owned={})).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert (await hb(coord, "zz", 1, owned={})).error == ErrorCode.UNKNOWN_MEMBER_ID
    missing = await hb(coord, "a", 1, owned={}, group="nope")
    assert missing.error == ErrorCode.GROUP_ID_NOT_FOUND
    bad = await hb(coord, "a", 0, subscribed_topic_names=None)
    assert bad.error == ErrorCode.INVALID_REQUEST
    regex = await hb(coord, "c", 0, subscribed_topic_names=None, subscribed_topic_regex="a(?=b)")
    assert regex.error == ErrorCode.INVALID_REGULAR_EXPRESSION
    assignor = await hb(coord, "c", 0, server_assignor="sticky")
    assert assignor.error == ErrorCode.UNSUPPORTED_ASSIGNOR


async def test_leave_and_session_timeout_free_partitions():
    coord = coordinator(consumer_session_timeout_ms=1000)
    await hb(coord, "a", 0, now=0)
    await hb(coord, "b", 0, now=0)
    left = await hb(coord, "b", -1, now=10)
    assert left.error == ErrorCode.NONE and left.member_epoch == -1
    assert "b" not in coord.consumer_group("g").members
    await coord.tick(5000)  # a never heartbeated again: fenced
    assert coord.consumer_group("g").members == {}
    assert coord.consumer_group("g").state == "Empty"
    assert (await hb(coord, "a", 3, owned={})).error == ErrorCode.UNKNOWN_MEMBER_ID


async def test_static_member_rejoins_with_its_assignment():
    coord = coordinator()
    s = await hb(coord, "s1", 0, instance_id="i1")
    assert s.assignment == {T1: frozenset(range(4))}
    dup = await hb(coord, "s2", 0, instance_id="i1")
    assert dup.error == ErrorCode.UNRELEASED_INSTANCE_ID
    away = await hb(coord, "s1", -2, instance_id="i1")
    assert away.member_epoch == -2
    back = await hb(coord, "s2", 0, instance_id="i1")
    assert back.error == ErrorCode.NONE
    assert back.assignment == {T1: frozenset(range(4))}
    assert coord.consumer_group("g").epoch == 1  # no rebalance
    fenced = await hb(coord, "s1", 1, instance_id="i1", owned={})
    assert fenced.error == ErrorCode.FENCED_INSTANCE_ID


async def test_offset_commit_checks_member_epoch():
    coord = coordinator()
    await hb(coord, "a", 0)
    offsets = {("t1", 0): (5, -1, "")}
    ok = await coord.commit_offsets("g", "a", None, 1, offsets, 0, 9)
    assert ok == {("t1", 0): ErrorCode.NONE}
    stale = await coord.commit_offsets("g", "a", None, 0, offsets, 0, 9)
    assert stale == {("t1", 0): ErrorCode.STALE_MEMBER_EPOCH}
    old = await coord.commit_offsets("g", "a", None, 1, offsets, 0, 8)
    assert old == {("t1", 0): ErrorCode.UNSUPPORTED_VERSION}
    unknown = await coord.commit_offsets("g", "x", None, 1, offsets, 0, 9)
    assert unknown == {("t1", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert coord.fetch_offsets("g", [("t1", 0)], "a", 7)[0] == ErrorCode.STALE_MEMBER_EPOCH
    code, got = coord.fetch_offsets("g", [("t1", 0)], "a", 1)
    assert code == ErrorCode.NONE and got[("t1", 0)].offset == 5


async def test_a_consumer_group_takes_no_classic_member_of_another_protocol_type():
    coord = coordinator()
    await hb(coord, "a", 0, group="cg")
    join = await coord.join_group(
        "cg", "", None, "c", "/h", 10_000, 10_000, "connect", [("range", b"")], False, 0
    )
    assert join.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    kinds = {gid: kind for gid, _, _, kind in coord.list_groups()}
    assert kinds == {"cg": "consumer"}
    assert coord.describe_group("cg")[1].state == "Dead"
    assert await coord.delete_group("cg", 0) == ErrorCode.NON_EMPTY_GROUP


async def test_regex_subscription_follows_new_topics():
    topics = dict(TOPICS)
    coord = coordinator(topics=topics)
    a = await hb(coord, "a", 0, subscribed_topic_names=None, subscribed_topic_regex="t.*")
    assert a.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}
    t3 = uuid.UUID(int=13)
    topics["t3"] = (t3, 1)
    nxt = await hb(coord, "a", a.member_epoch, owned=a.assignment)
    assert nxt.member_epoch == a.member_epoch + 1
    assert nxt.assignment[t3] == frozenset({0})


async def test_new_coordinator_resumes_epochs_and_assignments():
    store = MemoryStore()
    coord = coordinator(store)
    await hb(coord, "a", 0)
    await hb(coord, "b", 0)
    a = await hb(coord, "a", 1, owned={T1: frozenset(range(4))})
    await hb(coord, "a", 1, owned=a.assignment)
    await hb(coord, "b", 2, owned={})
    before = coord.consumer_group("g")
    await coord.commit_offsets("g", "a", None, 2, {("t1", 0): (9, -1, "")}, 0, 9)
    moved = coordinator(store)
    after = moved.consumer_group("g")
    assert (after.epoch, after.assignment_epoch) == (before.epoch, before.assignment_epoch)
    assert {m: x.assignment for m, x in after.members.items()} == {
        m: x.assignment for m, x in before.members.items()
    }
    assert after.target == before.target
    # the members carry on at their epochs without a rebalance
    again = await hb(moved, "a", 2, owned=a.assignment)
    assert again.error == ErrorCode.NONE and again.member_epoch == 2
    assert moved.consumer_group("g").epoch == before.epoch
    assert moved.fetch_offsets("g", [("t1", 0)])[1][("t1", 0)].offset == 9


async def test_an_empty_consumer_group_without_offsets_is_removed():
    store = MemoryStore()
    coord = coordinator(store)
    await hb(coord, "a", 0, group="kept")
    await hb(coord, "b", 0, group="gone")
    await coord.commit_offsets("kept", "a", None, 1, {("t1", 0): (3, -1, "")}, 0, 9)
    await hb(coord, "a", -1, group="kept")
    await hb(coord, "b", -1, group="gone")
    await coord.expire_offsets(1000)
    assert coord.consumer_group("gone") is None
    assert coord.consumer_group("kept").state == "Empty"
    reloaded = coordinator(store)
    assert reloaded.consumer_group("gone") is None
    assert reloaded.consumer_group("kept").epoch == 2
    assert await reloaded.delete_group("kept", 0) == ErrorCode.NONE
    assert coordinator(store).consumer_group("kept") is None


async def test_transactional_commits_check_the_member_epoch():
    coord = coordinator()
    await hb(coord, "a", 0)
    offsets = {("t1", 0): (5, -1, "")}
    stale = await coord.commit_txn_offsets("g", 7, 0, "a", None, 0, offsets, 0)
    assert stale == {("t1", 0): ErrorCode.STALE_MEMBER_EPOCH}
    unknown = await coord.commit_txn_offsets("g", 7, 0, "x", None, 1, offsets, 0)
    assert unknown == {("t1", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    ok = await coord.commit_txn_offsets("g", 7, 0, "a", None, 1, offsets, 0)
    assert ok == {("t1", 0): ErrorCode.NONE}
    assert coord.is_pending("g", ("t1", 0))
