"""broker/server/purgatory.py, and the delayed operations built on it
(broker/cluster/delayed_produce.py): DelayedProduce (acks=all) and wait_replicated
(internal writers)."""

import asyncio

from broker.cluster.delayed_produce import DelayedProduce, wait_replicated
from broker.cluster.partition import Partition
from broker.protocol import ErrorCode
from broker.server.purgatory import DelayedOperation, Purgatory
from tests.broker.cluster.fakes import FakeLog


class FakeClock:
    def __init__(self):
        self.timers = []

    def call_later(self, delay, fn):
        timer = FakeTimer(delay, fn)
        self.timers.append(timer)
        return timer

    def fire_all(self):
        for t in self.timers:
            if not t.cancelled:
                t.fn()


class FakeTimer:
    def __init__(self, delay, fn):
        self.delay, self.fn, self.cancelled = delay, fn, False

    def cancel(self):
        self.cancelled = True


class Waiting(DelayedOperation):
    def __init__(self, ready, timeout_s=1.0):
        super().__init__(timeout_s)
        self.ready = ready
        self.completions = 0
        self.expirations = 0

    def try_complete(self):
        return self.ready() and self.force_complete()

    def on_complete(self):
        self.completions += 1

    def on_expire(self):
        self.expirations += 1


def test_purgatory_completes_once_when_key_changes():
    clock = FakeClock()
    purgatory = Purgatory("test", clock.call_later)
    state = {"ready": False}
    op = Waiting(lambda: state["ready"])
    assert purgatory.try_complete_else_watch(op, [("t", 0), ("t", 1)]) is False
    assert purgatory.watched() == 1
    assert purgatory.check_and_complete(("t", 0)) == 0
    state["ready"] = True
    assert purgatory.check_and_complete(("t", 1)) == 1
    assert purgatory.check_and_complete(("t", 0)) == 0
    clock.fire_all()
    assert (op.completions, op.expirations) == (1, 0)
    assert purgatory.watched() == 0 and clock.timers[0].cancelled


def test_purgatory_immediate_and_expiry():
    clock = FakeClock()
    purgatory = Purgatory("test", clock.call_later)
    now = Waiting(lambda: True)
    assert purgatory.try_complete_else_watch(now, ["k"]) is True
    assert now.completions == 1 and not clock.timers
    later = Waiting(lambda: False, timeout_s=0.5)
    purgatory.try_complete_else_watch(later, ["k"])
    assert clock.timers[0].delay == 0.5
    clock.fire_all()
    assert (later.completions, later.expirations) == (1, 1)
    assert purgatory.watched("k") == 0
    assert later.force_complete() is False


def test_purgatory_complete_all():
    clock = FakeClock()
    purgatory = Purgatory("test", clock.call_later)
    ops = [Waiting(lambda: False) for _ in range(3)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i % 2])
    assert purgatory.complete_all() == 3
    assert all(op.completions == 1 for op in ops)


def test_delayed_produce_waits_for_hw_then_times_out():
    loop = asyncio.new_event_loop()
    try:
        clock = FakeClock()
        purgatory = Purgatory("produce", clock.call_later)
        parts = []
        for i in range(2):
            p = Partition("t", i, FakeLog(), 0, [0, 1])
            p.isr = {0, 1}
            p.on_change = lambda part: purgatory.check_and_complete(part.key)
            p.append_as_leader(b"ab", required_acks=-1)
            parts.append(p)
        resp = [{"error_code": 0, "base_offset": 0}, {"error_code": 0, "base_offset": 0}]
        future = loop.create_future()
        op = DelayedProduce(
            5.0, [(parts[0], 2, resp[0]), (parts[1], 2, resp[1])], {"r": resp}, future
        )
        assert not purgatory.try_complete_else_watch(op, [p.key for p in parts])
        parts[0].update_follower_leo(1, 2)
        assert not future.done()
        clock.fire_all()
        assert future.result() == {"r": resp}
        assert resp[0]["error_code"] == 0
        assert resp[1]["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    finally:
        loop.close()


def test_wait_replicated_for_internal_writers():
    purgatory = Purgatory("produce")

    async def main():
        p = Partition("__consumer_offsets", 0, FakeLog(), 0, [0, 1])
        p.isr = {0, 1}
        p.on_change = lambda part: purgatory.check_and_complete(part.key)
        p.append_as_leader(b"abc", required_acks=-1)
        waiter = asyncio.create_task(wait_replicated(purgatory, p, 3, 5.0))
        await asyncio.sleep(0)
        assert not waiter.done()
        p.update_follower_leo(1, 3)
        assert await waiter == ErrorCode.NONE
        assert await wait_replicated(purgatory, p, 4, 0.01) == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(main())
