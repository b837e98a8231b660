"""The share group records in `__consumer_offsets` (broker.share.records): the codecs
against hand-written frames of Kafka's schemas, round trips, and a group rebuilt by
another coordinator from what the first one wrote (broker.share.manager with an
in-memory log): pure, no broker."""

from __future__ import annotations

import asyncio
import uuid

from broker.protocol import ErrorCode
from broker.share import records
from broker.share.manager import ShareConfig, ShareGroupManager
from broker.share.membership import ShareGroup

TOPICS = {"t": (uuid.UUID(int=1), 3), "u": (uuid.UUID(int=2), 1)}


def lookup(name):
    return TOPICS.get(name)


def beat(group, member_id, epoch, topics=None, now=0):
    return group.heartbeat(
        member_id, epoch, "rack-a", topics, "client", "/127.0.0.1", lookup, 1000, now
    )


def test_a_group_metadata_key_and_value_are_kafkas_frames():
    group = ShareGroup("g")
    group.epoch = 5
    snap = records.snapshot(group, lookup)
    key = bytes.fromhex("000b0001") + b"g"  # key version 11, GroupId "g"
    assert key in snap
    # version 0; Epoch 5; MetadataHash 0; no tagged fields
    assert snap[key] == bytes.fromhex("000000000005000000000000000000")
    decoded = records.decode(key, snap[key])
    assert (decoded.kind, decoded.group_id, decoded.member_id) == (11, "g", None)
    assert decoded.value == {"epoch": 5, "metadata_hash": 0}


def test_a_current_assignment_is_kafkas_frame():
    group = ShareGroup("g")
    assert beat(group, "m", 0, ["u"]).error == ErrorCode.NONE
    snap = records.snapshot(group, lookup)
    key = bytes.fromhex("000e0001") + b"g" + bytes.fromhex("0001") + b"m"
    assert snap[key] == bytes.fromhex(
        "0000"  # value version 0
        "00000003"  # MemberEpoch (joined, subscribed, assigned)
        "00000000"  # PreviousMemberEpoch
        "00"  # State: stable
        "02"  # AssignedPartitions: one topic (compact array length + 1)
        "00000000000000000000000000000002"  # TopicId
        "02" "00000000"  # Partitions [0]
        "00"  # the topic's tagged fields
        "00"  # the value's tagged fields
    )  # fmt: skip


def test_every_record_round_trips():
    group = ShareGroup("g")
    beat(group, "a", 0, ["t"])
    beat(group, "b", 0, ["t", "u"])
    group.initialized["u"] = {0}
    snap = records.snapshot(group, lookup)
    kinds = sorted({records.decode(k, v).kind for k, v in snap.items()})
    assert kinds == [10, 11, 12, 13, 14, 15]
    for k, v in snap.items():
        r = records.decode(k, v)
        assert records.value(r.kind, r.value) == v
        assert records.key(r.kind, r.group_id, r.member_id) == k
    state = records.decode(records.key(15, "g"), snap[records.key(15, "g")]).value
    assert state["initialized_topics"] == [
        {"topic_id": TOPICS["t"][0], "topic_name": "t", "partitions": [0, 1, 2]},
        {"topic_id": TOPICS["u"][0], "topic_name": "u", "partitions": [0]},
    ]
    assert state["initializing_topics"] == state["deleting_topics"] == []


def test_changes_write_what_changed_and_tombstones_members_first():
    group = ShareGroup("g")
    beat(group, "a", 0, ["t"])
    before = records.snapshot(group, lookup)
    assert records.changes(before, records.snapshot(group, lookup)) == []
    beat(group, "a", -1)
    changed = records.changes(before, records.snapshot(group, lookup))
    kinds = [(records.decode(k, v).kind, v is None) for k, v in changed]
    assert kinds == [(11, False), (14, True), (13, True), (10, True)]
    gone = records.changes(records.snapshot(group, lookup), {})
    assert [(records.decode(k, v).kind, v) for k, v in gone] == [(12, None), (15, None), (11, None)]


def test_kafka_4_0_partition_metadata_is_read_and_ignored():
    r = records.decode(records.key(9, "g"), b"\x00\x00\x01\x00")
    assert (r.kind, r.value) == (9, None)
    assert records.rebuild([r], lookup, 0) == {}


def _manager(log: list, owned: bool = True) -> ShareGroupManager:
    async def write(_group_id, recs):
        log.extend(recs)
        return ErrorCode.NONE

    return ShareGroupManager(
        ShareConfig(session_timeout_ms=1000),
        lambda _t, _i: None,
        lookup,
        lambda _g: owned,
        lambda _t, _i: None,
        None,
        write_records=write,
    )


def _loaded(log: list, now_ms: int) -> ShareGroupManager:
    other = _manager([])
    other.load_groups([records.decode(k, v) for k, v in log], now_ms)
    return other


def test_a_new_coordinator_knows_the_group_its_members_and_epochs():
    async def scenario():
        log: list = []
        first = _manager(log)
        a = await first.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 0)
        b = await first.heartbeat("g", "b", 0, None, ["t", "u"], "c", "/h", 0)
        assert a.error == b.error == ErrorCode.NONE
        second = _loaded(log, 5000)
        code, group = second.describe("g")
        assert code == ErrorCode.NONE and group is not None
        assert group.epoch == first.groups["g"].epoch
        assert group.initialized == {"t": {0, 1, 2}, "u": {0}}
        assert {m: (x.epoch, x.assignment) for m, x in group.members.items()} == {
            "a": (first.groups["g"].members["a"].epoch, {"t": [0, 1, 2]}),
            "b": (b.epoch, {"t": [0, 1, 2], "u": [0]}),
        }
        assert group.members["a"].deadline_ms == 6000  # a new session from the load
        # a member goes on with the epoch it had: not fenced, nothing resent
        again = await second.heartbeat("g", "b", b.epoch, None, None, "c", "/h", 5100)
        assert again.error == ErrorCode.NONE and again.epoch == b.epoch
        assert again.assignment is None
        # members that do not come back time out
        second.tick(6050)
        await asyncio.sleep(0)
        await asyncio.gather(*second._background)
        assert second.groups["g"].members == {"b": second.groups["g"].members["b"]}

    asyncio.run(scenario())


def test_a_deleted_group_is_gone_for_the_next_coordinator():
    async def scenario():
        log: list = []
        first = _manager(log)
        r = await first.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 0)
        await first.heartbeat("g", "a", -1, None, None, "c", "/h", 0)
        assert _loaded(log, 0).groups["g"].members == {}
        assert await first.delete_group("g") == ErrorCode.NONE
        assert r.error == ErrorCode.NONE
        assert _loaded(log, 0).groups == {}

    asyncio.run(scenario())


def test_a_refused_first_heartbeat_writes_no_group():
    async def scenario():
        log: list = []
        first = _manager(log)
        r = await first.heartbeat("g", "", 0, None, None, "c", "/h", 0)
        assert r.error == ErrorCode.INVALID_REQUEST
        assert log == [] and "g" not in first.groups

    asyncio.run(scenario())


def test_groups_of_a_partition_moved_away_are_forgotten():
    owned = [True]
    first = ShareGroupManager(
        ShareConfig(),
        lambda _t, _i: None,
        lookup,
        lambda _g: owned[0],
        lambda _t, _i: None,
        None,
    )
    first.groups["g"] = ShareGroup("g")
    owned[0] = False
    first.unload_groups()
    assert first.groups == {}
