"""MarkerWriter: markers grouped by leader (local appends, one WriteTxnMarkers per
remote leader), retried on retriable errors and leader moves, skipped for deleted
topics, stopped when the coordinator loses the transaction."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode as E
from broker.transactions.markers import MarkerWriter


class Cluster:
    def __init__(self, leaders):
        self.leaders = dict(leaders)  # tp -> broker id; missing: topic deleted
        self.local: list = []
        self.remote: list = []
        self.local_errors: list = []  # errors the next local writes answer
        self.remote_fails = 0  # remote requests that raise before answering

    def leader_of(self, tp):
        return self.leaders.get(tp)

    async def write_local(self, tp, pid, epoch, commit, coordinator_epoch):
        self.local.append((tp, pid, epoch, commit, coordinator_epoch))
        return self.local_errors.pop(0) if self.local_errors else E.NONE

    async def write_remote(self, broker, pid, epoch, commit, coordinator_epoch, tps):
        if self.remote_fails:
            self.remote_fails -= 1
            raise TimeoutError("no answer")
        self.remote.append((broker, tuple(tps)))
        return dict.fromkeys(tps, E.NONE)


def writer(cluster: Cluster) -> MarkerWriter:
    return MarkerWriter(0, cluster.leader_of, cluster.write_local, cluster.write_remote, 0)


async def test_local_and_remote_leaders():
    c = Cluster({("a", 0): 0, ("a", 1): 1, ("b", 0): 1, ("b", 1): 2})
    done = await writer(c).write(5, 2, True, 3, set(c.leaders), lambda: True)
    assert done
    assert c.local == [(("a", 0), 5, 2, True, 3)]
    assert sorted(c.remote) == [(1, (("a", 1), ("b", 0))), (2, (("b", 1),))]


async def test_retries_until_written_and_follows_a_new_leader():
    c = Cluster({("a", 0): 0, ("a", 1): 2})
    c.local_errors = [E.NOT_LEADER_OR_FOLLOWER]
    c.remote_fails = 1

    moved = writer(c)
    original = c.write_local

    async def local_then_move(tp, *rest):
        err = await original(tp, *rest)
        if err:
            c.leaders[tp] = 1  # the leader moved to broker 1
        return err

    moved._write_local = local_then_move
    assert await moved.write(5, 2, False, 3, set(c.leaders), lambda: True)
    assert [r[0] for r in c.local] == [("a", 0)]
    assert sorted(c.remote) == [(1, (("a", 0),)), (2, (("a", 1),))]


async def test_deleted_topics_and_no_leader_yet():
    c = Cluster({("a", 0): -1})
    rounds = []

    def owner() -> bool:
        rounds.append(1)
        if len(rounds) == 3:
            c.leaders[("a", 0)] = 0
        return True

    assert await writer(c).write(1, 0, True, 0, {("a", 0), ("gone", 0)}, owner)
    assert [r[0] for r in c.local] == [("a", 0)]


async def test_stops_when_no_longer_the_owner():
    c = Cluster({("a", 0): -1})
    calls = []

    def owner() -> bool:
        calls.append(1)
        return len(calls) < 3

    assert not await writer(c).write(1, 0, True, 0, {("a", 0)}, owner)
    assert c.local == []


async def test_fenced_markers_are_not_retried():
    c = Cluster({("a", 0): 0})
    c.local_errors = [E.TRANSACTION_COORDINATOR_FENCED]
    assert await writer(c).write(1, 0, True, 0, {("a", 0)}, lambda: True)
    assert len(c.local) == 1
