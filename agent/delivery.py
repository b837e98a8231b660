"""Helpers shared by sinks: value encoding, counters, and the simple take loop.

`format` of a sink's output:
    auto  the parsed record as JSON when a parser produced one, else the raw body
    raw   always the raw body
    json  always JSON: the record, or {"message": body} for unparsed events
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

import orjson

from agent.api import Channel, Context, Event

Format = Literal["auto", "raw", "json"]


def encoder(fmt: str) -> Callable[[Event], bytes]:
    dumps = orjson.dumps
    if fmt == "raw":
        return lambda e: e.body
    if fmt == "json":
        return lambda e: dumps(
            e.record
            if e.record is not None
            else {"message": e.body.decode("utf-8", "replace"), **e.headers}
        )
    return lambda e: e.body if e.record is None else dumps(e.record)


def encode_all(fmt: str, events: list[Event]) -> list[bytes]:
    """`encoder(fmt)` over a batch, inlined (no call per event)."""
    if fmt == "raw":
        return [e.body for e in events]
    dumps = orjson.dumps
    if fmt == "auto":
        return [e.body if e.record is None else dumps(e.record) for e in events]
    return [  # json
        dumps(e.record)
        if e.record is not None
        else dumps({"message": e.body.decode("utf-8", "replace"), **e.headers})
        for e in events
    ]


class SinkCounters:
    def __init__(self, context: Context):
        m, c = context.metrics, context.name
        self.out = m.counter(
            "logflume_agent_sink_events_out_total", "Events delivered by the sink", component=c
        )
        self.failed = m.counter(
            "logflume_agent_sink_events_failed_total",
            "Events the next hop rejected for good (dead-lettered or dropped)",
            component=c,
        )
        self.rollbacks = m.counter(
            "logflume_agent_sink_rollbacks_total", "Take batches rolled back", component=c
        )


async def simple_loop(
    channel: Channel,
    max_events: int,
    deliver: Callable[[list[Event]], Awaitable[None]],
    counters: SinkCounters,
) -> None:
    """Take, deliver, commit; roll back and re-raise on any failure or cancellation
    (the supervisor restarts a crashed sink with backoff)."""
    while True:
        batch = await channel.take(max_events, 0.5)
        if not batch.events:
            await batch.commit()
            continue
        try:
            await deliver(batch.events)
        except BaseException:
            counters.rollbacks.inc()
            await asyncio.shield(batch.rollback())
            raise
        await batch.commit()
        counters.out.inc(len(batch.events))
