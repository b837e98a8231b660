"""The broker sink's take loop without a broker: what happens to a take whose
delivery fails (pure loop logic; the delivery itself is tested against a real
broker in test_broker_sink.py)."""

import pytest

from agent.channels.memory import MemoryChannel
from sinks.kafka import KafkaSink
from tests.agent.helpers import context, events, metric


async def test_a_failed_delivery_rolls_its_take_back_into_the_channel(tmp_path):
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    sink = KafkaSink(KafkaSink.Config(topic="lines"), context(tmp_path, "k"))

    async def fatal(batch_events):
        raise RuntimeError("fatal producer error")

    sink._deliver = fatal
    sent = events(5)
    await channel.put(sent)
    with pytest.raises(RuntimeError, match="fatal producer error"):
        await sink._loop(channel)
    assert metric(sink, "logflume_agent_sink_rollbacks_total") == 1
    again = await channel.take(10, 0.1)
    assert [e.body for e in again.events] == [e.body for e in sent]
    await again.commit()
    assert channel.pending() == 0
