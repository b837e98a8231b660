"""Test-only plugins (registered under `test-*` type names) for pure unit tests."""

from __future__ import annotations

import asyncio
import dataclasses
import os

from agent.api import Ack, Event, Interceptor, Sink, Source, register
from agent.delivery import SinkCounters, simple_loop
from common.hostport import parse_hostport

SETTLED: dict[str, int] = {}


@register("source", "test-gen")
class GenSource(Source):
    """Emits `count` events `<prefix> <i>` in batches, each batch with one Ack that
    counts settled events in SETTLED[component name]."""

    @dataclasses.dataclass
    class Config:
        count: int = 100
        batch: int = 10
        prefix: str = "line"
        listen: str | None = None
        path: str | None = None
        level: str | None = None

    @classmethod
    def validate(cls, config) -> list[str]:
        if config.path is not None and not os.access(config.path, os.R_OK):
            return [f"path: cannot read {config.path!r}"]
        return []

    @classmethod
    def listen_ports(cls, config):
        return [("udp", parse_hostport(config.listen)[1])] if config.listen else []

    async def run(self, emit, offer) -> None:
        name = self.context.name
        SETTLED.setdefault(name, 0)
        cfg = self.config
        for start in range(0, cfg.count, cfg.batch):
            n = min(cfg.batch, cfg.count - start)

            def done(n=n) -> None:
                SETTLED[name] += n

            ack = Ack(done, copies=n)
            headers = {"level": cfg.level} if cfg.level else {}
            await emit(
                [
                    Event(f"{cfg.prefix} {start + i}".encode(), dict(headers), ack=ack)
                    for i in range(n)
                ]
            )
        await asyncio.Event().wait()


@register("interceptor", "test-drop-odd")
class DropOdd(Interceptor):
    """Removes events whose number is odd (and settles them)."""

    @dataclasses.dataclass
    class Config:
        pass

    def intercept(self, events):
        kept = []
        for e in events:
            if int(e.body.split()[-1]) % 2:
                e.settle()
            else:
                kept.append(e)
        return kept


DELIVERED: dict[str, list[bytes]] = {}


@register("sink", "test-collect")
class CollectSink(Sink):
    """Appends delivered bodies to DELIVERED[name]; raises on the first `fail_first`
    deliveries (to exercise rollback and the supervisor's restart)."""

    @dataclasses.dataclass
    class Config:
        fail_first: int = 0
        batch: int = 7

    failures: dict[str, int] = {}

    async def run(self, channel) -> None:
        name = self.context.name
        out = DELIVERED.setdefault(name, [])

        async def deliver(events) -> None:
            if CollectSink.failures.get(name, 0) < self.config.fail_first:
                CollectSink.failures[name] = CollectSink.failures.get(name, 0) + 1
                raise RuntimeError("next hop down")
            out.extend(e.body for e in events)

        await simple_loop(channel, self.config.batch, deliver, SinkCounters(self.context))


GATES: dict[str, asyncio.Event] = {}


@register("source", "test-late-ready")
class LateReadySource(Source):
    """Signals readiness only once GATES[name] is set (as a socket source does after
    its bind), then idles."""

    signals_ready = True

    @dataclasses.dataclass
    class Config:
        pass

    async def run(self, emit, offer) -> None:
        await GATES.setdefault(self.context.name, asyncio.Event()).wait()
        self.ready()
        await asyncio.Event().wait()
