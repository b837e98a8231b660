"""Take transactions end exactly once, while the channel is open; any other use is a
sink bug and raises TransactionError, changing nothing (as Flume's
BasicTransactionSemantics does), for every channel type."""

import pytest

from agent.api import TransactionError
from agent.channels.file import FileChannel
from agent.channels.memory import MemoryChannel
from tests.agent.helpers import context, events, metric


@pytest.fixture(params=["memory", "file"])
def kind(request):
    return request.param


async def opened(kind, tmp_path):
    if kind == "memory":
        return MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    ch = FileChannel(FileChannel.Config(), context(tmp_path, "fc"))
    await ch.open()
    return ch


async def bodies(ch):
    batch = await ch.take(100, 0.05)
    out = [e.body.rstrip(b".") for e in batch.events]
    await batch.rollback()
    return out


async def test_commit_twice_raises_and_counts_once(kind, tmp_path):
    ch = await opened(kind, tmp_path)
    await ch.put(events(3))
    await ch.put(events(2, "f"))
    batch = await ch.take(3, 0.1)
    await batch.commit()
    with pytest.raises(TransactionError, match=r"cannot commit .* already committed"):
        await batch.commit()
    assert ch.pending() == 2
    assert metric(ch, "logflume_agent_channel_take_committed_total") == 3
    assert await bodies(ch) == [b"f0", b"f1"]
    await ch.close()


async def test_rollback_after_commit_raises_and_returns_nothing(kind, tmp_path):
    ch = await opened(kind, tmp_path)
    await ch.put(events(3))
    batch = await ch.take(3, 0.1)
    await batch.commit()
    with pytest.raises(TransactionError, match=r"cannot roll back .* already committed"):
        await batch.rollback()
    assert ch.pending() == 0
    assert metric(ch, "logflume_agent_channel_take_rollback_total") == 0
    assert await bodies(ch) == []
    await ch.close()


async def test_commit_after_rollback_raises_and_keeps_the_events(kind, tmp_path):
    settled = []
    ch = await opened(kind, tmp_path)
    await ch.put(events(3, settled=settled))
    batch = await ch.take(3, 0.1)
    await batch.rollback()
    settled_before = len(settled)  # the file channel settles on the durable put
    with pytest.raises(TransactionError, match=r"cannot commit .* already rolled back"):
        await batch.commit()
    assert len(settled) == settled_before
    assert ch.pending() == 3
    assert metric(ch, "logflume_agent_channel_take_committed_total") == 0
    assert await bodies(ch) == [b"e0", b"e1", b"e2"]
    await ch.close()


async def test_rollback_twice_raises_and_returns_the_events_once(kind, tmp_path):
    ch = await opened(kind, tmp_path)
    await ch.put(events(3))
    batch = await ch.take(3, 0.1)
    await batch.rollback()
    with pytest.raises(TransactionError, match=r"cannot roll back .* already rolled back"):
        await batch.rollback()
    assert ch.pending() == 3
    assert metric(ch, "logflume_agent_channel_take_rollback_total") == 3
    assert await bodies(ch) == [b"e0", b"e1", b"e2"]
    await ch.close()


async def test_an_empty_take_also_ends_once(kind, tmp_path):
    ch = await opened(kind, tmp_path)
    batch = await ch.take(3, 0.01)
    assert batch.events == []
    await batch.commit()
    with pytest.raises(TransactionError, match="already committed"):
        await batch.commit()
    await ch.close()


async def test_use_after_the_channel_closed_raises(kind, tmp_path):
    ch = await opened(kind, tmp_path)
    await ch.put(events(2))
    await ch.put(events(2, "f"))  # the file channel takes whole puts
    first = await ch.take(2, 0.1)
    second = await ch.take(2, 0.1)
    await ch.close()
    with pytest.raises(
        TransactionError, match=r"^cannot commit a take of 2 events: channel '(mem|fc)' is closed$"
    ):
        await first.commit()
    with pytest.raises(
        TransactionError,
        match=r"^cannot roll back a take of 2 events: channel '(mem|fc)' is closed$",
    ):
        await second.rollback()
    with pytest.raises(
        TransactionError, match=r"^cannot open a take: channel '(mem|fc)' is closed$"
    ):
        await ch.take(2, 0.1)
    assert metric(ch, "logflume_agent_channel_take_committed_total") == 0
    assert metric(ch, "logflume_agent_channel_take_rollback_total") == 0


async def test_misuse_messages_name_the_channel_and_the_take(kind, tmp_path):
    ch = await opened(kind, tmp_path)
    await ch.put(events(3))
    batch = await ch.take(3, 0.1)
    await batch.commit()
    with pytest.raises(TransactionError) as err:
        await batch.rollback()
    name = ch.context.name
    assert str(err.value) == (
        f"cannot roll back a take of 3 events from channel {name!r}: it was already committed"
    )
    await ch.close()
