"""Classic members in consumer groups and the online migration between the protocols
(KIP-848), on the coordinator in memory: the embedded protocol against
kafka-python's codec, a classic member's JoinGroup / SyncGroup / Heartbeat /
LeaveGroup in a consumer group, a classic group upgraded by a consumer-protocol
member and downgraded when it leaves, the migration policy, and a new coordinator
resuming classic members from `__consumer_offsets`."""

import asyncio
import uuid

import pytest
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from broker.groups.consumer import embedded, records
from broker.groups.consumer.group import ClassicMetadata, ConsumerMember
from broker.groups.consumer.heartbeat import HeartbeatRequest
from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.groups.group import GroupState
from broker.protocol.errors import ErrorCode
from tests.broker.groups.fakes import MemoryStore

E = ErrorCode
T1 = uuid.UUID(int=21)
TOPICS = {"t1": (T1, 4)}


def coordinator(store=None, **config) -> GroupCoordinator:
    config.setdefault("initial_rebalance_delay_ms", 0)
    coord = GroupCoordinator(store or MemoryStore(), CoordinatorConfig(**config), lambda: TOPICS)
    for p in range(coord.config.num_partitions):
        coord.load_partition(p, 0)
    return coord


def subscription(*topics: str) -> bytes:
    return RangePartitionAssignor.metadata(set(topics)).encode()


def partitions(assignment: bytes) -> set[tuple[str, int]]:
    decoded = ConsumerProtocolAssignment.decode(assignment)
    return {(t, p) for t, ps in decoded.assigned_partitions for p in ps}


async def join(coord, member_id="", now=0, require_known=False, group="g", **kw):
    protocols = kw.pop("protocols", [("range", subscription("t1"))])
    return await coord.join_group(
        group, member_id, kw.pop("instance", None), "classic", "/h", 10_000, 20_000,
        kw.pop("protocol_type", "consumer"), protocols, require_known, now,
    )  # fmt: skip


async def hb(coord, member, epoch, owned=None, now=0, group="g"):
    kw = {}
    if epoch == 0:
        kw = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ("t1",)}
        owned = owned or {}
    return await coord.consumer.heartbeat(
        HeartbeatRequest(group, member, epoch, owned=owned, **kw), now
    )


def test_the_embedded_protocol_reads_and_writes_what_kafka_python_does():
    sub = embedded.decode_subscription(subscription("b", "a"))
    assert sorted(sub.topics) == ["a", "b"] and sub.owned == {}
    data = embedded.encode_assignment({"t1": frozenset({2, 0}), "t2": frozenset()}, 0)
    decoded = ConsumerProtocolAssignment.decode(data)
    assert decoded.version == 0 and decoded.assigned_partitions == [("t1", [0, 2])]
    assert embedded.decode_assignment(data) == {"t1": frozenset({0, 2})}
    assert embedded.version_of(embedded.encode_assignment({}, 7)) == embedded.MAX_VERSION
    for bad in (b"", b"\x00", b"\x00\x00\x00\x00\x00\x09ab"):
        with pytest.raises(embedded.MalformedProtocol):
            embedded.decode_subscription(bad)


async def test_a_classic_member_joins_syncs_and_leaves_a_consumer_group():
    coord = coordinator()
    a = await hb(coord, "a", 0)
    assert a.assignment == {T1: frozenset(range(4))}
    required = await join(coord, require_known=True)
    assert required.error == E.MEMBER_ID_REQUIRED and required.member_id
    mid = required.member_id
    joined = await join(coord, mid)
    assert joined.error == E.NONE and joined.member_id == mid
    assert (joined.protocol_type, joined.protocol_name, joined.leader) == ("consumer", "range", "")
    assert joined.members == () and joined.generation_id == 2
    group = coord.consumer_group("g")
    assert group.members[mid].classic.session_timeout_ms == 10_000
    # its half is still a's: it gets nothing until a revokes it
    synced = await coord.sync_group("g", mid, None, 2, {}, 0, "consumer", "range")
    assert synced.error == E.NONE and partitions(synced.assignment) == set()
    assert coord.heartbeat("g", mid, None, 1, 0) == E.ILLEGAL_GENERATION
    a2 = await hb(coord, "a", 1, owned={T1: frozenset(range(4))})
    kept = a2.assignment[T1]
    await hb(coord, "a", 1, owned={T1: kept})
    # the partitions it waits for are free: rejoin to get them
    assert coord.heartbeat("g", mid, None, 2, 0) == E.REBALANCE_IN_PROGRESS
    again = await join(coord, mid)
    assert again.generation_id == 2
    synced = await coord.sync_group("g", mid, None, 2, {}, 0, "consumer", "range")
    assert partitions(synced.assignment) == {("t1", p) for p in set(range(4)) - kept}
    assert coord.heartbeat("g", mid, None, 2, 0) == E.NONE
    wrong = await coord.sync_group("g", mid, None, 2, {}, 0, "consumer", "roundrobin")
    assert wrong.error == E.INCONSISTENT_GROUP_PROTOCOL
    # commits carry the generation: a classic member's epoch
    commit = await coord.commit_offsets("g", mid, None, 2, {("t1", 0): (5, -1, "")}, 0, 7)
    assert commit == {("t1", 0): E.NONE}
    stale = await coord.commit_offsets("g", mid, None, 1, {("t1", 0): (5, -1, "")}, 0, 7)
    assert stale == {("t1", 0): E.ILLEGAL_GENERATION}
    assert await coord.leave_group("g", [(mid, None), ("a", None)], 0) == (
        E.NONE,
        [E.NONE, E.UNKNOWN_MEMBER_ID],  # a uses the consumer protocol
    )
    assert list(group.members) == ["a"] and group.epoch == 3
    a3 = await hb(coord, "a", 2, owned={T1: kept})
    assert a3.assignment == {T1: frozenset(range(4))}


async def test_classic_joins_that_cannot_be_served():
    coord = coordinator()
    await hb(coord, "a", 0)
    other = await join(coord, "x", protocol_type="connect")
    assert other.error == E.INCONSISTENT_GROUP_PROTOCOL
    malformed = await join(coord, "x", protocols=[("range", b"\x00")])
    assert malformed.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert list(coord.consumer_group("g").members) == ["a"]
    await join(coord, "c1")
    # every classic member must share a protocol with the next one
    assert (await join(coord, "c2", protocols=[("sticky", subscription("t1"))])).error == (
        E.INCONSISTENT_GROUP_PROTOCOL
    )
    assert coord.heartbeat("g", "a", None, 1, 0) == E.UNKNOWN_MEMBER_ID  # not classic


async def test_a_classic_member_that_does_not_sync_or_rejoin_is_fenced():
    coord = coordinator()
    await hb(coord, "a", 0)
    generation = (await join(coord, "c")).generation_id
    for now in (9_000, 18_000):
        await coord.tick(now)
        assert coord.heartbeat("g", "c", None, generation, now) == E.NONE  # session kept
    await coord.tick(20_001)  # but no SyncGroup within its rebalance timeout
    assert "c" not in coord.consumer_group("g").members


async def classic_group(coord) -> tuple[str, str]:
    """A Stable classic group of two members, t1 split 0-1 / 2-3; their ids."""
    t1 = asyncio.ensure_future(join(coord, "", 0))
    t2 = asyncio.ensure_future(join(coord, "", 0))
    await asyncio.sleep(0)
    await coord.tick(3000)  # the initial rebalance delay
    await coord.tick(6000)
    r1, r2 = await t1, await t2
    assert r1.generation_id == r2.generation_id == 1
    leader, follower = (r1, r2) if r1.members else (r2, r1)
    first = ConsumerProtocolAssignment(version=0, assigned_partitions=[("t1", [0, 1])])
    second = ConsumerProtocolAssignment(version=0, assigned_partitions=[("t1", [2, 3])])
    assignments = {leader.member_id: first.encode(), follower.member_id: second.encode()}
    s1, s2 = await asyncio.gather(
        coord.sync_group("g", leader.member_id, None, 1, assignments, 0),
        coord.sync_group("g", follower.member_id, None, 1, {}, 0),
    )
    assert s1.error == s2.error == E.NONE
    await coord.commit_offsets("g", leader.member_id, None, 1, {("t1", 0): (7, -1, "")}, 0, 7)
    return leader.member_id, follower.member_id


async def test_a_consumer_member_upgrades_a_classic_group_and_its_leave_downgrades_it():
    store = MemoryStore()
    coord = coordinator(store, initial_rebalance_delay_ms=3000)
    c1, c2 = await classic_group(coord)
    n = await hb(coord, "n", 0)
    assert n.error == E.NONE
    kinds = {gid: kind for gid, _, _, kind in coord.list_groups()}
    assert kinds == {"g": "consumer"}
    group = coord.consumer_group("g")
    assert group.members[c1].assignment.assigned == {T1: frozenset({0, 1})}
    assert group.members[c1].epoch == 1 and group.epoch == 2
    assert n.assignment == {}  # every partition is still held by the classic members
    assert coord.fetch_offsets("g", [("t1", 0)])[1][("t1", 0)].offset == 7
    # the classic members rejoin and give up what the new member gets
    assert coord.heartbeat("g", c1, None, 1, 0) == E.REBALANCE_IN_PROGRESS
    for c in (c1, c2):
        joined = await join(coord, c)
        assert joined.error == E.NONE and joined.generation_id == 2
    n2 = await hb(coord, "n", 2, owned={})
    assert n2.assignment and sum(len(ps) for ps in n2.assignment.values()) in (1, 2)
    # a new coordinator resumes the classic members
    moved = coordinator(store, initial_rebalance_delay_ms=3000)
    resumed = moved.consumer_group("g").members[c1]
    assert resumed.classic == group.members[c1].classic
    assert moved.heartbeat("g", c1, None, 2, 0) == E.NONE
    # the consumer-protocol member leaves: a classic group again, rebalancing
    left = await hb(coord, "n", -1, owned=None)
    assert left.error == E.NONE
    assert coord.consumer_group("g") is None
    classic = coord.groups["g"]
    assert classic.state is GroupState.PREPARING_REBALANCE
    assert set(classic.members) == {c1, c2} and classic.protocol == "range"
    assert coord.heartbeat("g", c1, None, classic.generation, 0) == E.REBALANCE_IN_PROGRESS
    assert coord.fetch_offsets("g", [("t1", 0)])[1][("t1", 0)].offset == 7
    r1, r2 = await asyncio.gather(join(coord, c1), join(coord, c2))
    assert r1.error == r2.error == E.NONE and r1.generation_id == classic.generation
    # and the next coordinator sees a classic group
    assert coordinator(store).consumer_group("g") is None


async def test_the_migration_policy_is_obeyed():
    coord = coordinator(consumer_migration_policy="downgrade", initial_rebalance_delay_ms=3000)
    await classic_group(coord)
    refused = await hb(coord, "n", 0)
    assert refused.error == E.GROUP_ID_NOT_FOUND
    assert coord.consumer_group("g") is None and len(coord.groups["g"].members) == 2
    full = coordinator(consumer_max_size=2, initial_rebalance_delay_ms=3000)
    await classic_group(full)
    assert (await hb(full, "n", 0)).error == E.GROUP_MAX_SIZE_REACHED
    assert full.consumer_group("g") is None and len(full.groups["g"].members) == 2
    coord = coordinator(consumer_migration_policy="upgrade")
    await hb(coord, "n", 0)
    c = (await join(coord, "c")).member_id
    await hb(coord, "n", -1)
    group = coord.consumer_group("g")
    assert group is not None and list(group.members) == [c]


async def test_a_fenced_consumer_member_downgrades_the_group_too():
    store = MemoryStore()
    coord = coordinator(store, initial_rebalance_delay_ms=3000, consumer_session_timeout_ms=6000)
    c1, c2 = await classic_group(coord)
    await hb(coord, "n", 0)
    for now in (5_000, 9_000):  # the classic members keep their sessions; n does not
        for c in (c1, c2):
            assert coord.heartbeat("g", c, None, 1, now) == E.REBALANCE_IN_PROGRESS
        await coord.tick(now)
    assert coord.consumer_group("g") is None
    assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert set(coordinator(store).groups["g"].members) == {c1, c2}


def test_the_member_record_carries_the_classic_metadata_as_kafka_writes_it():
    member = ConsumerMember(
        "m", subscribed_names=("a",), classic=ClassicMetadata(10_000, (("range", b"\0\0"),))
    )
    _, value = records.member_record("g", member)
    # ConsumerGroupMemberMetadataValue v0: ... ServerAssignor null, then tagged field 0
    # (16 bytes): SessionTimeoutMs, SupportedProtocols [Name, Metadata], empty tag sections
    assert value.hex() == (
        "0000" "00" "00" "01" "01" "02" "0261" "00" "ffffffff" "00"
        "01" "00" "10" "00002710" "02" "0672616e6765" "030000" "00" "00"
    )  # fmt: skip
    decoded = records.decode(*records.member_record("g", member)).value
    assert decoded["classic_member_metadata"] == {
        "session_timeout_ms": 10_000,
        "supported_protocols": [{"name": "range", "metadata": b"\0\0"}],
    }
