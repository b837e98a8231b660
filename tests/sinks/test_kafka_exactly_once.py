"""The exactly-once broker sink against a real broker: a sink stopped between the
broker's commit of its transaction and its own commit of the take (a reload or a
crash cancels it there) puts the take back into the channel; the sink started next
on that channel drops it (`discard_below`) instead of sending the lines again."""

import asyncio

import pytest

from agent.channels.memory import MemoryChannel
from sinks.kafka import KafkaSink
from sinks.kafka.exactly_once import ExactlyOnce
from testkit.agent import read_topic
from tests.agent.helpers import context, events


@pytest.fixture(params=[2, 1], ids=["tv2", "tv1"])
def broker(request, broker_factory):
    """A broker finalizing `transaction.version` 2 (the default), and one pinned to 1."""
    return broker_factory(settings={"transaction.version": request.param})


async def test_a_take_the_broker_committed_is_not_sent_again_by_the_next_sink(
    tmp_path, broker, monkeypatch
):
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    channel.delivered_marks = asyncio.get_running_loop().create_future()
    config = KafkaSink.Config(
        topic="lines", bootstrap_servers=broker.bootstrap, delivery="exactly_once"
    )
    commit = ExactlyOnce._commit

    async def committed_then_cancelled(strategy):
        await commit(strategy)
        raise asyncio.CancelledError  # the reload came right after the broker's commit

    monkeypatch.setattr(ExactlyOnce, "_commit", committed_then_cancelled)
    sent = events(5)
    await channel.put(sent)
    with pytest.raises(asyncio.CancelledError):
        await KafkaSink(config, context(tmp_path, "k")).run(channel)
    assert channel.pending() == 5  # the take went back to the channel

    monkeypatch.setattr(ExactlyOnce, "_commit", commit)
    restarted = asyncio.create_task(KafkaSink(config, context(tmp_path, "k")).run(channel))
    try:
        await channel.put(events(1, "after"))
        got = await asyncio.to_thread(
            read_topic,
            broker.bootstrap,
            "lines",
            lambda m: any(x.value() == b"after0...." for x in m),
        )
    finally:
        restarted.cancel()
        await asyncio.gather(restarted, return_exceptions=True)
    assert [m.value() for m in got] == [e.body for e in sent] + [b"after0...."]
    assert channel.pending() == 0
