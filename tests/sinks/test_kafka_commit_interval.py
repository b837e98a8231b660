"""`commit_interval` of the exactly-once kafka sink against a real broker: lines put
into the channel one batch every 50 ms for about a second go in one or two
transactions (the first take at once, what came after it when the interval is
over), not one per put; every one of them arrives once."""

import asyncio

from agent.channels.memory import MemoryChannel
from sinks.kafka import KafkaSink
from sinks.kafka.exactly_once import ExactlyOnce
from testkit.agent import read_topic
from tests.agent.helpers import context, events

PUTS = 20


async def test_puts_arriving_within_the_interval_share_a_transaction(tmp_path, broker, monkeypatch):
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    channel.delivered_marks = asyncio.get_running_loop().create_future()
    config = KafkaSink.Config(
        topic="lines",
        bootstrap_servers=broker.bootstrap,
        delivery="exactly_once",
        commit_interval=5.0,
    )
    commits = []
    commit = ExactlyOnce._commit

    async def counted(strategy):
        await commit(strategy)
        commits.append(len(commits))

    monkeypatch.setattr(ExactlyOnce, "_commit", counted)
    sink = asyncio.create_task(KafkaSink(config, context(tmp_path, "k")).run(channel))
    try:
        sent = []
        for i in range(PUTS):
            batch = events(3, f"p{i}-")
            sent += [e.body for e in batch]
            await channel.put(batch)
            await asyncio.sleep(0.05)
        # the first take went at once; the puts after it wait for the interval's end
        assert len(commits) <= 1
        got = await asyncio.to_thread(
            read_topic, broker.bootstrap, "lines", lambda m: len(m) >= len(sent)
        )
    finally:
        sink.cancel()
        await asyncio.gather(sink, return_exceptions=True)
    assert sorted(m.value() for m in got) == sorted(sent)
    assert 1 <= len(commits) <= 2
