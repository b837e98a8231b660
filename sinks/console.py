"""The `console` sink: one event per line on standard output."""

from __future__ import annotations

import dataclasses
import sys

from agent.api import Channel, Sink, register
from agent.delivery import Format, SinkCounters, encoder, simple_loop


@register("sink", "console")
class ConsoleSink(Sink):
    """Writes to the process's stdout; one instance per configured sink."""

    @dataclasses.dataclass
    class Config:
        format: Format = "auto"  # auto: JSON if parsed, else the line; raw: the line; json: JSON
        batch_events: int = 1000  # most events taken from the channel per write

    async def run(self, channel: Channel) -> None:
        encode = encoder(self.config.format)
        out = sys.stdout.buffer

        async def deliver(events) -> None:
            out.write(b"".join(encode(e) + b"\n" for e in events))
            out.flush()

        await simple_loop(channel, self.config.batch_events, deliver, SinkCounters(self.context))
