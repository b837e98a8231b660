import asyncio

from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.groups.group import GroupState
from broker.protocol.errors import ErrorCode
from tests.broker.groups.fakes import Driver, MemoryStore, settle

E = ErrorCode
DAY = 86_400_000


async def test_simple_consumer_commit_and_fetch():
    d = Driver()
    res = await d.coord.commit_offsets("s", "", None, -1, {("t", 0): (10, -1, "m")}, 1000)
    assert res == {("t", 0): E.NONE}
    err, offsets = d.coord.fetch_offsets("s", [("t", 0), ("t", 1)])
    assert err == E.NONE
    assert offsets[("t", 0)].offset == 10 and offsets[("t", 0)].metadata == "m"
    assert offsets[("t", 1)] is None  # no commit: offset -1, error NONE
    assert d.coord.fetch_offsets("none", [("t", 0)]) == (E.NONE, {("t", 0): None})
    assert d.coord.fetch_offsets("none", None) == (E.NONE, {})
    # Null topics (v2+) = every committed partition.
    await d.coord.commit_offsets("s", "", None, -1, {("u", 2): (3, 7, None)}, 1000)
    err, offsets = d.coord.fetch_offsets("s", None)
    assert set(offsets) == {("t", 0), ("u", 2)}
    assert offsets[("u", 2)].leader_epoch == 7 and offsets[("u", 2)].metadata == ""


async def test_commit_validation_against_the_group():
    d = Driver(initial_rebalance_delay_ms=3000)
    tp = {("t", 0): (5, -1, "")}
    assert await d.coord.commit_offsets("x", "m", None, 3, tp, 0) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    leader, follower = await d.stable_pair()
    commit = d.coord.commit_offsets
    assert await commit("g", leader, None, 1, tp, 7000) == {("t", 0): E.NONE}
    assert await commit("g", leader, None, 0, tp, 7000) == {("t", 0): E.ILLEGAL_GENERATION}
    assert await commit("g", "ghost", None, 1, tp, 7000) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await commit("g", "", None, -1, tp, 7000) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    big = {("t", 0): (5, -1, "x" * 5000), ("t", 1): (6, -1, "")}
    assert await commit("g", leader, None, 1, big, 7000) == {
        ("t", 0): E.OFFSET_METADATA_TOO_LARGE,
        ("t", 1): E.NONE,
    }
    # While the group waits for the leader's assignment, commits are refused.
    t = d.join("g", client_id="c", now=7100)
    tl = d.join("g", member_id=leader, now=7100)
    tf = d.join("g", member_id=follower, now=7100)
    await settle()
    await t, await tl, await tf
    assert d.coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert await commit("g", leader, None, 2, tp, 7200) == {("t", 0): E.REBALANCE_IN_PROGRESS}


async def test_commit_refreshes_the_session():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    for now in (10_000, 17_000, 24_000):
        assert d.heartbeat("g", leader, 1, now=now) == E.NONE
        await d.coord.commit_offsets("g", follower, None, 1, {("t", 0): (1, -1, "")}, now)
        await d.coord.tick(now + 1)
    assert follower in d.coord.groups["g"].members


async def test_group_and_offsets_survive_a_reload():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    await d.coord.commit_offsets("g", leader, None, 1, {("t", 0): (11, 3, "md")}, 7000)
    await d.coord.commit_offsets("s", "", None, -1, {("t", 1): (4, -1, "")}, 7000)
    fresh = GroupCoordinator(d.store, CoordinatorConfig(initial_rebalance_delay_ms=0))
    for p in range(50):
        fresh.load_partition(p, 8000)
    group = fresh.groups["g"]
    assert (group.state, group.generation, group.leader_id) == (GroupState.STABLE, 1, leader)
    assert group.protocol == "range"
    assert {m: x.assignment for m, x in group.members.items()} == {leader: b"A1", follower: b"A2"}
    assert fresh.heartbeat("g", follower, None, 1, 9000) == E.NONE
    assert fresh.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 11
    assert fresh.fetch_offsets("s", None)[1][("t", 1)].offset == 4
    # Members that do not come back within their session are dropped as usual.
    await fresh.tick(8000 + 10_000)
    assert fresh.groups["g"].members.keys() == {follower}


async def test_empty_group_after_everyone_leaves_is_stored():
    d = Driver(initial_rebalance_delay_ms=3000)
    leader, follower = await d.stable_pair()
    await d.coord.leave_group("g", [(leader, None), (follower, None)], 7000)
    group = d.coord.groups["g"]
    assert (group.state, group.generation) == (GroupState.EMPTY, 2)
    fresh = GroupCoordinator(d.store)
    fresh.load_partition(fresh.partition_for("g"), 8000)
    assert (fresh.groups["g"].state, fresh.groups["g"].generation) == (GroupState.EMPTY, 2)


async def test_offset_expiry_writes_tombstones_and_removes_group():
    d = Driver(initial_rebalance_delay_ms=3000, offsets_retention_ms=DAY)
    await d.coord.commit_offsets("s", "", None, -1, {("t", 0): (1, -1, "")}, 0)
    await d.coord.commit_offsets("s", "", None, -1, {("t", 1): (1, -1, "")}, DAY // 2)
    leader, follower = await d.stable_pair()
    await d.coord.commit_offsets("g", leader, None, 1, {("t", 0): (1, -1, "")}, 7000)
    assert await d.coord.expire_offsets(DAY) == 1  # s/t-0 only
    assert set(d.coord.groups["s"].offsets) == {("t", 1)}
    assert await d.coord.expire_offsets(2 * DAY) == 1
    assert "s" not in d.coord.groups
    # A consumer group's offsets live while it has members, then a retention after Empty.
    assert set(d.coord.groups["g"].offsets) == {("t", 0)}
    await d.coord.leave_group("g", [(leader, None), (follower, None)], 3 * DAY)
    assert await d.coord.expire_offsets(4 * DAY - 1) == 0
    assert await d.coord.expire_offsets(4 * DAY) == 1
    assert "g" not in d.coord.groups
    fresh = GroupCoordinator(d.store)
    for p in range(50):
        fresh.load_partition(p, 4 * DAY)
    assert fresh.groups == {}


class HeldStore(MemoryStore):
    """Appends wait until `release` is set: a commit caught mid-write."""

    def __init__(self):
        super().__init__()
        self.release = asyncio.Event()

    async def append(self, partition: int, records: bytes) -> int:
        await self.release.wait()
        return await super().append(partition, records)


async def test_expiry_keeps_a_new_group_whose_first_commit_is_being_written():
    """Kafka's hasOffsets counts pending commits: the check running while a first
    commit to a new group waits for its append must not drop the group under it."""
    store = HeldStore()
    d = Driver(store)
    commit = asyncio.ensure_future(
        d.coord.commit_offsets("fresh", "", None, -1, {("t", 0): (5, -1, "")}, 1000)
    )
    await settle()
    assert not commit.done()
    expiry = asyncio.ensure_future(d.coord.expire_offsets(1000))
    await settle()
    store.release.set()
    await expiry
    assert await commit == {("t", 0): E.NONE}
    err, offsets = d.coord.fetch_offsets("fresh", [("t", 0)])
    assert err == E.NONE and offsets[("t", 0)].offset == 5


async def test_delete_group():
    d = Driver(initial_rebalance_delay_ms=3000)
    await d.coord.commit_offsets("s", "", None, -1, {("t", 0): (1, -1, "")}, 0)
    leader, _ = await d.stable_pair()
    assert await d.coord.delete_group("g", 7000) == E.NON_EMPTY_GROUP
    assert await d.coord.delete_group("nope", 7000) == E.GROUP_ID_NOT_FOUND
    assert await d.coord.delete_group("s", 7000) == E.NONE
    assert d.coord.fetch_offsets("s", None) == (E.NONE, {})
    fresh = GroupCoordinator(d.store)
    fresh.load_partition(fresh.partition_for("s"), 8000)
    assert "s" not in fresh.groups
