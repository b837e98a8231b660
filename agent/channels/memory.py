"""The `memory` channel: a bounded in-process queue with take transactions.

Bounded by events AND bytes, counting what is stored plus what sinks have taken and
not yet committed, so memory stays bounded while the next hop is down. `put` waits
for room (backpressure), `offer` refuses. A batch larger than the whole capacity
is admitted only into an empty channel, so it cannot wait forever.

Acknowledgement: nothing here is durable, so an event's Ack is settled only when the
sink commits the take that carried it. A crash loses the channel's content, but the
sources never advanced past it, so they read it again on restart.

Events are numbered in put order (`TakeBatch.end_seq`) under an identity made when
the channel is (`Channel.identity`), so the numbers are valid for this channel in
this process only. An exactly-once sink records them with each transaction: when it
crashed after a commit the broker accepted but before it committed its take, the take
went back to the channel, and the restarted sink drops it (`discard_below`) instead
of sending it again. A new process has a new identity: nothing is dropped, the
sources resume from the positions the sink recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import deque

from agent.api import Channel, Context, Event, Size, TakeBatch, register, settle_all
from common.aio import within

EVENT_OVERHEAD = 120  # bytes of Python objects per event beyond its body, roughly
RECORD_OVERHEAD = 600  # a parsed record's dict and field objects beyond 2x the body
# (measured: an nginx record of a 178-byte line takes ~930 bytes)


def event_bytes(events: list[Event]) -> int:
    """Approximate memory of a batch: event objects and bodies, plus the parsed
    records when the first event has one (batches come from one source, so they
    are alike)."""
    if not events:
        return 0
    n = len(events)
    body = sum([len(e.body) for e in events])
    if events[0].record is None:
        return EVENT_OVERHEAD * n + body
    return (EVENT_OVERHEAD + RECORD_OVERHEAD) * n + 3 * body


class ChannelMetrics:
    """Fill gauges and counters shared by the channel types; one per channel."""

    def __init__(self, context: Context, capacity: int, byte_capacity: int):
        m, c = context.metrics, context.name
        self.events = m.gauge("logflume_agent_channel_events", "Events in the channel", component=c)
        self.bytes = m.gauge("logflume_agent_channel_bytes", "Bytes in the channel", component=c)
        m.gauge("logflume_agent_channel_capacity_events", "Event capacity", component=c).set(
            capacity
        )
        m.gauge("logflume_agent_channel_capacity_bytes", "Byte capacity", component=c).set(
            byte_capacity
        )
        self.put = m.counter("logflume_agent_channel_put_total", "Events put", component=c)
        self.committed = m.counter(
            "logflume_agent_channel_take_committed_total", "Events taken and committed", component=c
        )
        self.rolled_back = m.counter(
            "logflume_agent_channel_take_rollback_total",
            "Events taken and rolled back",
            component=c,
        )
        self.refused = m.counter(
            "logflume_agent_channel_offer_refused_total", "Events refused by offer", component=c
        )


@register("channel", "memory")
class MemoryChannel(Channel):
    """Owned by the runtime; used by source and sink tasks of one event loop (not
    thread-safe)."""

    @dataclasses.dataclass
    class Config:
        capacity: int = 100_000  # most events held, taken and not yet committed included
        byte_capacity: Size = Size(64 << 20)  # most memory held, estimated from the events

    @classmethod
    def validate(cls, config) -> list[str]:
        errors = []
        if config.capacity < 1:
            errors.append("capacity: must be at least 1")
        if config.byte_capacity < 1:
            errors.append("byte_capacity: must be at least 1 byte")
        return errors

    def __init__(self, config, context: Context):
        super().__init__(config, context)
        # chunks (events, bytes, sequence number of the first event), in put order
        self._queue: deque[tuple[list[Event], int, int]] = deque()
        self._next_seq = 0
        self._identity = uuid.uuid4().hex
        self._events = 0  # stored + taken, not committed
        self._bytes = 0
        self._space = asyncio.Event()
        self._data = asyncio.Event()
        self.metrics = ChannelMetrics(context, config.capacity, config.byte_capacity)

    def pending(self) -> int:
        return self._events

    @property
    def identity(self) -> str:
        return self._identity

    def discard_below(self, seq: int) -> int:
        dropped: list[Event] = []
        size = 0
        queue = self._queue
        while queue and queue[0][2] < seq:
            chunk, chunk_size, first = queue.popleft()
            keep = first + len(chunk) - seq
            if keep > 0:  # the chunk straddles `seq`: its tail stays
                part = chunk_size * keep // len(chunk)
                queue.appendleft((chunk[-keep:], part, seq))
                chunk, chunk_size = chunk[:-keep], chunk_size - part
            dropped += chunk
            size += chunk_size
        if dropped:
            self._committed(dropped, size)
        return len(dropped)

    def _fits(self, n: int, size: int) -> bool:
        if self._events == 0:
            return True
        return (
            self._events + n <= self.config.capacity
            and self._bytes + size <= self.config.byte_capacity
        )

    def _store(self, events: list[Event], size: int) -> None:
        self._queue.append((events, size, self._next_seq))
        self._next_seq += len(events)
        self._events += len(events)
        self._bytes += size
        self.metrics.put.inc(len(events))
        self._gauges()
        self._data.set()

    def _gauges(self) -> None:
        self.metrics.events.set(self._events)
        self.metrics.bytes.set(self._bytes)

    async def put(self, events: list[Event]) -> None:
        if not events:
            return
        size = event_bytes(events)
        while not self._fits(len(events), size):
            self._space.clear()
            await self._space.wait()
        self._store(events, size)

    def offer(self, events: list[Event]) -> bool:
        if not events:
            return True
        size = event_bytes(events)
        if not self._fits(len(events), size):
            self.metrics.refused.inc(len(events))
            return False
        self._store(events, size)
        return True

    async def take(self, max_events: int, max_wait: float, whole_puts: bool = False) -> TakeBatch:
        self.check_open("open a take")
        if not self._queue:
            self._data.clear()
            try:
                await within(self._data.wait(), max_wait)
            except TimeoutError:
                return _MemoryTake(self, [], 0, None)
        queue = self._queue
        events: list[Event] = []
        size = 0
        first_seq = queue[0][2] if queue else None
        while queue and len(events) < max_events:
            chunk, chunk_size, first = queue.popleft()
            room = max_events - len(events)
            if whole_puts and len(chunk) > room:
                if events:
                    queue.appendleft((chunk, chunk_size, first))
                    break
                room = len(chunk)
            if len(chunk) > room:  # split the chunk; sizes are shared out pro rata
                part = chunk_size * room // len(chunk)
                queue.appendleft((chunk[room:], chunk_size - part, first + room))
                chunk, chunk_size = chunk[:room], part
            events += chunk
            size += chunk_size
        return _MemoryTake(self, events, size, first_seq)

    def _committed(self, events: list[Event], size: int) -> None:
        """`events` delivered for good: their room is free, their Acks settled."""
        self._events -= len(events)
        self._bytes -= size
        self._gauges()
        self._space.set()
        self.metrics.committed.inc(len(events))
        settle_all(events)

    def _return(self, events: list[Event], size: int, first_seq: int) -> None:
        self._queue.appendleft((events, size, first_seq))
        self._data.set()


class _MemoryTake(TakeBatch):
    __slots__ = ("size", "first_seq")
    channel: MemoryChannel

    def __init__(
        self, channel: MemoryChannel, events: list[Event], size: int, first_seq: int | None
    ):
        super().__init__(channel, events)
        self.size = size
        self.first_seq = first_seq

    @property
    def end_seq(self) -> int | None:
        if not self.events or self.first_seq is None:  # set whenever events are
            return None
        return self.first_seq + len(self.events)

    async def _commit(self) -> None:
        self.channel._committed(self.events, self.size)

    async def _rollback(self) -> None:
        self.channel.metrics.rolled_back.inc(len(self.events))
        if self.first_seq is not None:  # an empty take gives nothing back
            self.channel._return(self.events, self.size, self.first_seq)
