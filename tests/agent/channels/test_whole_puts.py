"""Takes of whole puts (for sinks that record positions) and dropping what the next
hop already holds (`discard_below`)."""

from agent.channels.file import FileChannel
from agent.channels.memory import MemoryChannel
from tests.agent.helpers import context, events


def memory(tmp_path):
    return MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))


async def test_memory_take_of_whole_puts_never_splits_one(tmp_path):
    ch = memory(tmp_path)
    await ch.put(events(3, "a"))
    await ch.put(events(3, "b"))
    await ch.put(events(8, "c"))
    first = await ch.take(5, 0.1, whole_puts=True)
    assert [e.body[:2] for e in first.events] == [b"a0", b"a1", b"a2"]
    second = await ch.take(5, 0.1, whole_puts=True)
    assert len(second.events) == 3
    big = await ch.take(5, 0.1, whole_puts=True)  # larger than max_events: whole
    assert len(big.events) == 8
    assert first.end_seq is None  # keeps nothing across a restart


async def test_memory_take_still_splits_when_not_asked(tmp_path):
    ch = memory(tmp_path)
    await ch.put(events(8))
    assert len((await ch.take(5, 0.1)).events) == 5


async def test_file_channel_drops_what_the_next_hop_holds_after_a_restart(tmp_path):
    cfg = FileChannel.Config(fsync=False)
    ch = FileChannel(cfg, context(tmp_path, "f"))
    await ch.open()
    for name in "abc":
        await ch.put(events(4, name))
    take = await ch.take(5, 0.1)
    assert len(take.events) == 4 and take.end_seq == 4
    second = await ch.take(5, 0.1)
    assert second.end_seq == 8
    # the sink delivered both takes, then the agent died before committing them
    await ch.close()
    again = FileChannel(cfg, context(tmp_path, "f"))
    await again.open()
    assert again.identity == ch.identity and len(again.identity) == 32
    assert again.pending() == 12
    assert again.discard_below(8) == 8
    rest = await again.take(100, 0.1)
    assert [e.body[:2] for e in rest.events] == [b"c0", b"c1", b"c2", b"c3"]
    await rest.commit()
    assert again.pending() == 0
    await again.close()
