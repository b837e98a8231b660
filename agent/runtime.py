"""The agent runtime: builds one agent's components and keeps them running.

Start order is channels, then sinks, then sources (so nothing is produced into a
pipeline that cannot drain). Each source gets an `emit`/`offer` pair closing over
its interceptors and selector; each source and sink runs as a `Supervised` task.

Shutdown (SIGTERM/SIGINT): sources are cancelled (they stop reading and persist
their positions), sinks keep draining the channels until they are empty or
`shutdown_grace` has passed, then sinks are cancelled (rolling back what is in
flight), durable channels are closed, and sources get `flush_state()` to persist
what acknowledgements arriving during the drain advanced.

Reload (SIGHUP): the file is compiled again; if it has errors they are logged and
the running config stays. Otherwise specs are compared by value: a changed or
removed channel takes down the sources writing to it and the sinks reading it
(after a drain); changed or removed sources and sinks are stopped; then everything
new or stopped is started from the new specs. Unchanged components keep running.

Each component running is announced by `logflume_agent_component_info{component,
kind, type}` at 1 (0 once stopped), which `logflume agent top` reads to name the
components. The metrics listener also serves `/tap` (agent/tap.py): the runtime
samples a source's events after its interceptors and a channel's as they are put,
when someone taps them.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import time
from pathlib import Path

from agent.api import Channel, Context, Event, Source
from agent.config import AgentSpec, SourceSpec, compile_file
from agent.metrics import Registry
from agent.selector import Selector
from agent.source_audit import SourceTally
from agent.supervisor import Supervised
from agent.tap import Tapped, Taps
from common.hostport import parse_hostport
from common.prometheus import MetricsServer

log = logging.getLogger("logflume.agent")

# Objects the cyclic garbage collector lets the young generation grow to before it
# collects it (CPython's default is 700); see `tune_gc`.
GC_YOUNG_THRESHOLD = 50_000


def tune_gc() -> None:
    """Set the garbage collector for a process that runs an agent, before it starts.

    The agent holds many short-lived, GC-tracked objects at once: an Event per line,
    up to a channel's capacity of them, with their parsed records when a parser
    runs. With CPython's default thresholds a collection of the young generation
    runs every 700 allocations and each event is scanned again at every older
    generation it reaches: over a third of the main thread's CPU when tailing raw
    lines into a kafka sink (0.9 of 2.4 s per million lines). A higher young
    threshold lets batches come and go between collections (the counter falls as
    objects are freed), and `gc.freeze` moves what startup loaded (modules, the
    compiled pipelines) out of the scans. Garbage in reference cycles is still
    collected, once 50,000 tracked objects more were made than freed."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


class AgentRuntime:
    """Runs one agent on the current event loop; owned by `logflume agent run`."""

    def __init__(self, spec: AgentSpec, state_dir: str | Path, config_path: str | Path | None):
        self.spec = spec
        self.state_dir = Path(state_dir)
        self.config_path = config_path
        self.registry = Registry()
        self.channels: dict[str, Channel] = {}
        self.sources: dict[str, Supervised] = {}
        self.source_objects: dict[str, Source] = {}
        self.sinks: dict[str, Supervised] = {}
        self.metrics_server: MetricsServer | None = None
        self.source_tallies: dict[str, SourceTally] = {}  # the audit's source tier
        self.taps = Taps(self.registry)
        self._stop = asyncio.Event()
        self._reload_lock = asyncio.Lock()

    def _announce(self, kind: str, name: str, cls, running: bool) -> None:
        self.registry.gauge(
            "logflume_agent_component_info",
            "1 for each component running, with its kind and type",
            component=name,
            kind=kind,
            type=cls.type_name,
        ).set(1 if running else 0)

    def _context(self, kind: str, name: str) -> Context:
        state = self.state_dir / f"{kind}s" / name
        os.makedirs(state, exist_ok=True)
        return Context(self.spec.name, name, self.registry, str(state), log.getChild(name))

    # ---- building and starting -------------------------------------------------

    def _start_channel(self, name: str) -> None:
        spec = self.spec.channels[name]
        channel = self.channels[name] = spec.cls(spec.config, self._context("channel", name))
        self._announce("channel", name, spec.cls, True)
        if any(
            s.channel == name and s.cls.records_positions(s.config)
            for s in self.spec.sinks.values()
        ):
            channel.delivered_marks = asyncio.get_running_loop().create_future()

    async def _open_channel(self, name: str) -> None:
        opener = getattr(self.channels[name], "open", None)
        if opener is not None:
            await opener()

    def _audit_publisher(self, source: str) -> str | None:
        """The sink that publishes `source`'s audit tier: the first (in the file's
        order) that publishes the audit and reads one of the source's channels."""
        channels = self.spec.sources[source].channels
        for name, spec in self.spec.sinks.items():
            if spec.channel in channels and spec.cls.publishes_audit(spec.config):
                return name
        return None

    def _start_sink(self, name: str) -> None:
        spec = self.spec.sinks[name]
        channel = self.channels[spec.channel]
        audited = [s for s in self.spec.sources if self._audit_publisher(s) == name]
        tallies = [self.source_tallies.setdefault(s, SourceTally(s)) for s in audited]

        async def start() -> None:
            context = self._context("sink", name)
            context.audited_sources = tallies
            sink = spec.cls(spec.config, context)
            await sink.run(channel)

        sup = Supervised(f"sink.{name}", start, self.registry.health, log)
        self.sinks[name] = sup
        self._announce("sink", name, spec.cls, True)
        sup.start()

    def _start_source(self, name: str) -> None:
        spec = self.spec.sources[name]
        counters = _SourceCounters(self.registry, name)

        async def start() -> None:
            source = spec.cls(spec.config, self._context("source", name))
            source.on_ready = sup.ready
            self.source_objects[name] = source
            held = [await self._held_marks(self.channels[c], name) for c in spec.channels]
            marks = [h for h in held if h is not None]
            if held and len(marks) == len(held):
                source.resume_from(marks)
            emit, offer = self._pipeline(spec, counters)
            await source.run(emit, offer)

        sup = Supervised(
            f"source.{name}", start, self.registry.health, log, needs_ready=spec.cls.signals_ready
        )
        self.sources[name] = sup
        self._announce("source", name, spec.cls, True)
        sup.start()

    async def _held_marks(self, channel: Channel, source: str) -> dict | None:
        """What `channel` holds of `source` (a durable channel), else what the next hop
        holds (a sink recording positions: waits until it has read them)."""
        held = channel.held_marks(source)
        if held is not None or channel.delivered_marks is None:
            return held
        if not channel.delivered_marks.done():
            log.info(
                "source %s waits for the positions the broker committed (channel %s)",
                source,
                channel.context.name,
            )
        return (await asyncio.shield(channel.delivered_marks)).get(source, {})

    def _pipeline(self, spec: SourceSpec, counters: _SourceCounters):
        """The emit/offer pair of one source: interceptors, selector, channel puts."""
        interceptors = [
            i.cls(i.config, self._context("source", f"{spec.name}.interceptor{i.name}"))
            for i in spec.interceptors
        ]
        selector = Selector([(c, self.channels[c]) for c in spec.channels], spec.selector)
        tallies, parsed, taps, name = self.source_tallies, bool(interceptors), self.taps, spec.name

        def prepare(events: list[Event]):
            n = len(events)
            counters.received.inc(n)
            host = events[0].headers.get("host", "") if n else ""
            for interceptor in interceptors:
                events = interceptor.intercept(events)
            counters.filtered.inc(n - len(events))
            tally = tallies.get(spec.name)  # looked up each time: a reload may add one
            if tally is not None and n:
                bad = sum(1 for e in events if "parse_error" in e.headers) if parsed else 0
                tally.count(host, n, len(events), bad, int(time.time() * 1000))
            if taps.active:
                taps.sample("source", name, events)
            return selector.route(events)

        async def emit(events: list[Event]) -> None:
            routes, unrouted = prepare(events)
            for channel, batch in routes:
                await channel.put(batch)
                if taps.active:
                    taps.sample("channel", channel.context.name, batch)
            _count(counters, routes, unrouted)

        def offer(events: list[Event]) -> bool:
            routes, unrouted = prepare(events)
            stored = True
            for channel, batch in routes:
                if not channel.offer(batch):
                    stored = False
                    counters.dropped.inc(len(batch))
                    for e in batch:
                        e.settle()
                elif taps.active:
                    taps.sample("channel", channel.context.name, batch)
            _count(counters, routes, unrouted)
            return stored

        return emit, offer

    async def start(self) -> None:
        for name in self.spec.channels:
            self._start_channel(name)
            await self._open_channel(name)
        for name in self.spec.sinks:
            self._start_sink(name)
        for name in self.spec.sources:
            self._start_source(name)
        await self._start_metrics()
        log.info(
            "agent %s running: sources %s, channels %s, sinks %s",
            self.spec.name,
            ", ".join(self.spec.sources) or "-",
            ", ".join(self.spec.channels) or "-",
            ", ".join(self.spec.sinks) or "-",
        )

    async def _start_metrics(self) -> None:
        settings = self.spec.settings.metrics
        if settings is None:
            return
        host, port = parse_hostport(settings.listen, "metrics.listen")

        async def tap(request):
            return await self.taps.stream(request, host, self._tap_components())

        self.metrics_server = MetricsServer(
            self.registry.prometheus, self.registry.status, host, port, {"/tap": tap}
        )
        await self.metrics_server.start()
        log.info("metrics on http://%s:%d/metrics", host, self.metrics_server.port)

    def _tap_components(self) -> dict[str, Tapped]:
        """What `/tap?component=NAME` shows: a source's or channel's own events, a
        sink's input (its channel's); a name used by two kinds is the source's, then
        the channel's."""
        out: dict[str, Tapped] = {}
        for name in self.spec.sources:
            out.setdefault(name, ("source", ("source", name)))
        for name in self.spec.channels:
            out.setdefault(name, ("channel", ("channel", name)))
        for name, sink in self.spec.sinks.items():
            out.setdefault(name, ("sink", ("channel", sink.channel)))
        return out

    # ---- stopping --------------------------------------------------------------

    async def _stop_components(self, sources, channels, sinks) -> None:
        grace = float(self.spec.settings.shutdown_grace)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        for kind, names, specs in (
            ("source", sources, self.spec.sources),
            ("channel", channels, self.spec.channels),
            ("sink", sinks, self.spec.sinks),
        ):
            for n in names:
                self._announce(kind, n, specs[n].cls, False)
        await asyncio.gather(*(self.sources.pop(n).stop(grace) for n in sources))
        while loop.time() < deadline:
            if not any(self.channels[c].pending() for c in channels):
                break
            await asyncio.sleep(0.05)
        left = {c: self.channels[c].pending() for c in channels if self.channels[c].pending()}
        if left:
            log.warning("grace period over; events left in channels: %s", left)
        remaining = max(1.0, deadline - loop.time())
        await asyncio.gather(*(self.sinks.pop(n).stop(remaining) for n in sinks))
        for name in channels:
            await self.channels.pop(name).close()
        for name in sources:
            source = self.source_objects.pop(name, None)
            if source is not None:
                try:
                    source.flush_state()
                except Exception:
                    log.exception("source %s failed to flush its state", name)

    async def shutdown(self) -> None:
        log.info("agent %s stopping (grace %ss)", self.spec.name, self.spec.settings.shutdown_grace)
        await self._stop_components(list(self.sources), list(self.channels), list(self.sinks))
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        log.info("agent %s stopped", self.spec.name)

    # ---- reload ----------------------------------------------------------------

    async def reload(self) -> bool:
        """Apply the config file again; False (old config kept) if it is invalid."""
        async with self._reload_lock:
            assert self.config_path is not None  # reloads come from a config file
            agents, errors = compile_file(self.config_path)
            if errors or self.spec.name not in agents:
                reasons: list[object] = [*errors] or [
                    f"agent {self.spec.name!r} not in {self.config_path}"
                ]
                for error in reasons:
                    log.error("reload rejected: %s", error)
                return False
            old, new = self.spec, agents[self.spec.name]
            channels = {n for n in old.channels if old.channels[n] != new.channels.get(n)}
            sources = {
                n
                for n, s in old.sources.items()
                if s != new.sources.get(n) or channels.intersection(s.channels)
            }
            sinks = {
                n for n, s in old.sinks.items() if s != new.sinks.get(n) or s.channel in channels
            }
            await self._stop_components(sources, channels, sinks)
            self.spec = new
            for name in new.channels:
                if name not in self.channels:
                    self._start_channel(name)
                    await self._open_channel(name)
            for name in new.sinks:
                if name not in self.sinks:
                    self._start_sink(name)
            for name in new.sources:
                if name not in self.sources:
                    self._start_source(name)
            if old.settings.metrics != new.settings.metrics:
                if self.metrics_server is not None:
                    await self.metrics_server.stop()
                    self.metrics_server = None
                await self._start_metrics()
            log.info(
                "reloaded: restarted sources %s, channels %s, sinks %s",
                sorted(sources) or "-",
                sorted(channels) or "-",
                sorted(sinks) or "-",
            )
            return True

    # ---- main ------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload()))
        await self.start()
        try:
            await self._stop.wait()
        finally:
            await self.shutdown()


class _SourceCounters:
    def __init__(self, registry: Registry, name: str):
        c = registry.counter
        self.received = c(
            "logflume_agent_source_events_in_total", "Events produced by the source", component=name
        )
        self.filtered = c(
            "logflume_agent_source_events_filtered_total",
            "Events removed by interceptors",
            component=name,
        )
        self.out = c(
            "logflume_agent_source_events_out_total", "Events put into channels", component=name
        )
        self.dropped = c(
            "logflume_agent_source_events_dropped_total",
            "Events refused by a full channel (offer) or routed to no channel",
            component=name,
        )


def _count(counters: _SourceCounters, routes, unrouted: int) -> None:
    counters.out.inc(sum(len(batch) for _, batch in routes))
    counters.dropped.inc(unrouted)
