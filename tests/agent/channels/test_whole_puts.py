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
    assert (first.end_seq, second.end_seq, big.end_seq) == (3, 6, 14)


async def test_memory_channel_drops_a_taken_back_batch_the_next_hop_holds(tmp_path):
    settled = []
    ch = memory(tmp_path)
    for name in "abc":
        await ch.put(events(3, name, settled))
    take = await ch.take(4, 0.1, whole_puts=True)  # a0-a2: b does not fit
    assert take.end_seq == 3
    await take.rollback()  # a sink that crashed after the broker committed it
    assert ch.discard_below(3) == 3
    assert len(settled) == 3 and ch.pending() == 6
    assert ch.discard_below(5) == 2  # b0, b1 of the put b0-b2
    rest = await ch.take(10, 0.1)
    assert [e.body[:2] for e in rest.events] == [b"b2", b"c0", b"c1", b"c2"]
    assert rest.end_seq == 9
    await rest.commit()
    assert ch.pending() == 0 and len(settled) == 9


async def test_memory_channel_numbers_are_its_own(tmp_path):
    a, b = memory(tmp_path), memory(tmp_path)
    assert a.identity != b.identity and a.identity is not None
    empty = await a.take(5, 0.01)
    assert empty.end_seq is None


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
