import asyncio

from agent.channels.memory import EVENT_OVERHEAD, MemoryChannel
from common.aio import within
from tests.agent.helpers import context, events, metric


def channel(tmp_path, **cfg):
    return MemoryChannel(MemoryChannel.Config(**cfg), context(tmp_path, "mem"))


async def test_bounded_by_events_put_waits_and_offer_refuses(tmp_path):
    ch = channel(tmp_path, capacity=10)
    await ch.put(events(8))
    assert not ch.offer(events(3))
    assert ch.offer(events(2))
    blocked = asyncio.create_task(ch.put(events(5, "late")))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # backpressure
    batch = await ch.take(6, 0.1)
    assert ch.pending() == 10  # taken but not committed still counts
    await batch.commit()
    await within(blocked, 1)
    assert ch.pending() == 9
    assert metric(ch, "logflume_agent_channel_offer_refused_total") == 3


async def test_bounded_by_bytes(tmp_path):
    per_event = 100 + EVENT_OVERHEAD
    ch = channel(tmp_path, capacity=1000, byte_capacity=3 * per_event)
    await ch.put(events(3, size=100))
    assert not ch.offer(events(1, size=100))
    assert metric(ch, "logflume_agent_channel_bytes") == 3 * per_event


async def test_oversized_batch_enters_an_empty_channel(tmp_path):
    ch = channel(tmp_path, capacity=5)
    await within(ch.put(events(20)), 1)
    assert ch.pending() == 20


async def test_rollback_returns_events_to_the_head_in_order(tmp_path):
    ch = channel(tmp_path)
    await ch.put(events(5))
    first = await ch.take(3, 0.1)
    await first.rollback()
    again = await ch.take(10, 0.1)
    assert [e.body.rstrip(b".") for e in again.events] == [b"e0", b"e1", b"e2", b"e3", b"e4"]


async def test_an_empty_take_rolled_back_gives_nothing_back(tmp_path):
    ch = channel(tmp_path)
    empty = await ch.take(10, 0.01)
    await empty.rollback()
    await ch.put(events(2))
    again = await ch.take(10, 0.1)
    assert [e.body.rstrip(b".") for e in again.events] == [b"e0", b"e1"]
    assert again.end_seq is not None and ch.pending() == 2


async def test_acks_settle_only_on_commit(tmp_path):
    settled = []
    ch = channel(tmp_path)
    await ch.put(events(4, settled=settled))
    batch = await ch.take(4, 0.1)
    assert settled == []
    await batch.rollback()
    batch = await ch.take(4, 0.1)
    await batch.commit()
    assert len(settled) == 4


async def test_take_waits_then_returns_empty(tmp_path):
    ch = channel(tmp_path)
    batch = await ch.take(10, 0.05)
    assert batch.events == []
    waiter = asyncio.create_task(ch.take(10, 5))
    await asyncio.sleep(0.01)
    await ch.put(events(2))
    assert len((await within(waiter, 1)).events) == 2
