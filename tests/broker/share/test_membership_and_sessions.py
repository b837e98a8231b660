"""Share group membership and the simple assignor (broker.share.membership), share
sessions (broker.share.sessions) and the share coordinator's merge of written state
(broker.share.state_store.merge): pure."""

from __future__ import annotations

import uuid

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.protocol import ErrorCode
from broker.share.membership import ShareGroup
from broker.share.sessions import FINAL_EPOCH, ShareSessionCache, next_epoch
from broker.share.state_store import merge

TOPICS = {"t": (uuid.UUID(int=1), 3), "u": (uuid.UUID(int=2), 1)}


def lookup(name):
    return TOPICS.get(name)


def beat(group, member_id, epoch, topics=None, now=0):
    return group.heartbeat(
        member_id, epoch, None, topics, "client", "/127.0.0.1", lookup, 1000, now
    )


def test_every_member_gets_every_partition_of_its_topics():
    group = ShareGroup("g")
    a = beat(group, "a", 0, ["t"])
    b = beat(group, "b", 0, ["t", "u", "missing"])
    assert a.error == b.error == ErrorCode.NONE
    assert a.assignment == {"t": [0, 1, 2]}
    assert b.assignment == {"t": [0, 1, 2], "u": [0]}
    assert b.epoch > a.epoch > 0
    again = beat(group, "a", a.epoch)
    assert again.error == ErrorCode.NONE and again.assignment is None  # unchanged: not resent


def test_an_assignment_follows_new_partitions_and_subscriptions():
    group = ShareGroup("g")
    a = beat(group, "a", 0, ["t"])
    TOPICS["t"] = (TOPICS["t"][0], 4)
    try:
        grown = beat(group, "a", a.epoch)
    finally:
        TOPICS["t"] = (TOPICS["t"][0], 3)
    assert grown.assignment == {"t": [0, 1, 2, 3]} and grown.epoch > a.epoch
    moved = beat(group, "a", grown.epoch, ["u"])
    assert moved.assignment == {"u": [0]} and moved.epoch > grown.epoch


def test_epochs_fence_and_unknown_members_are_told():
    group = ShareGroup("g")
    a = beat(group, "a", 0, ["t"])
    assert beat(group, "a", a.epoch + 5).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(group, "nobody", 3).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(group, "x", 0).error == ErrorCode.INVALID_REQUEST  # no topics to join with


def test_leaving_and_timing_out_remove_members():
    group = ShareGroup("g")
    beat(group, "a", 0, ["t"], now=0)
    beat(group, "b", 0, ["t"], now=500)
    left = beat(group, "b", -1)
    assert left.error == ErrorCode.NONE and left.epoch == -1
    assert group.expire(999) == [] and group.expire(1000) == ["a"]
    assert group.state == "Empty"


def test_a_member_without_id_is_given_one():
    group = ShareGroup("g")
    joined = beat(group, "", 0, ["t"])
    assert joined.member_id and joined.member_id in group.members


def test_session_epochs():
    cache = ShareSessionCache(max_sessions=1)
    assert cache.check("g", "m", 1) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.check("g", "m", 0) == ErrorCode.NONE
    session, old = cache.open("g", "m", 0)
    assert old is None and session.epoch == 1
    assert cache.check("g", "m", 2) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.check("g", "m", 1) == ErrorCode.NONE
    cache.advance(session, 10)
    assert cache.check("g", "m", 2) == ErrorCode.NONE
    assert cache.check("g", "other", 0) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert cache.check("g", "m", FINAL_EPOCH) == ErrorCode.NONE
    assert cache.idle(10 + 99, 100) == [] and cache.idle(10 + 100, 100) == [session]
    assert next_epoch(2**31 - 1) == 1


def test_merge_lets_later_batches_win_and_cuts_below_the_start():
    old = [(0, 9, 0, 1)]
    new = [(3, 4, 2, 1), (9, 12, 4, 3)]
    assert merge(old, new, 2) == [(2, 2, 0, 1), (3, 4, 2, 1), (5, 8, 0, 1), (9, 12, 4, 3)]
    assert merge(old, [], 10) == []


def test_share_settings_are_checked():
    base = {"log.dirs": "/tmp/unused"}
    with pytest.raises(ConfigError, match="group.share.delivery.count.limit"):
        BrokerConfig(base | {"group.share.delivery.count.limit": "1"})
    with pytest.raises(ConfigError, match="group.share.record.lock.duration.ms"):
        BrokerConfig(base | {"group.share.record.lock.duration.ms": "0"})
    assert (
        BrokerConfig(base | {"group.share.delivery.count.limit": "10"})[
            "group.share.delivery.count.limit"
        ]
        == 10
    )
