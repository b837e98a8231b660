"""`commit_interval` of the exactly-once kafka sink against a real broker: the first
take goes at once, puts arriving after it wait for the interval's end instead of
going in a transaction each; a sink restarted meanwhile sends what waited in one
transaction, and every line arrives once."""

import asyncio

from agent.channels.memory import MemoryChannel
from common.aio import within
from sinks.kafka import KafkaSink
from sinks.kafka.exactly_once import ExactlyOnce
from testkit.agent import read_topic
from tests.agent.helpers import context, events

PUTS = 20


async def test_puts_arriving_within_the_interval_wait_for_its_end(tmp_path, broker, monkeypatch):
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    channel.delivered_marks = asyncio.get_running_loop().create_future()
    commits = []
    committed = asyncio.Event()
    commit = ExactlyOnce._commit

    async def counted(strategy):
        await commit(strategy)
        commits.append(len(commits))
        committed.set()

    monkeypatch.setattr(ExactlyOnce, "_commit", counted)

    def start_sink(interval: float) -> asyncio.Task:
        config = KafkaSink.Config(
            topic="lines",
            bootstrap_servers=broker.bootstrap,
            delivery="exactly_once",
            commit_interval=interval,
        )
        return asyncio.create_task(KafkaSink(config, context(tmp_path, "k")).run(channel))

    sent = []
    sink = start_sink(3600.0)
    try:
        for i in range(PUTS):
            batch = events(3, f"p{i}-")
            sent += [e.body for e in batch]
            await channel.put(batch)
            if i == 0:
                await within(committed.wait(), 30)
                assert commits == [0], "the first take goes at once"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert commits == [0], "the later puts wait for the end of the hour-long interval"
        sink.cancel()
        await asyncio.gather(sink, return_exceptions=True)
        sink = start_sink(0.5)
        got = await asyncio.to_thread(
            read_topic, broker.bootstrap, "lines", lambda m: len(m) >= len(sent)
        )
    finally:
        sink.cancel()
        await asyncio.gather(sink, return_exceptions=True)
    assert sorted(m.value() for m in got) == sorted(sent)
    assert commits == [0, 1]
