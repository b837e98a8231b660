"""`/tap` of the agent's metrics listener: samples of the events flowing through a
component, as JSON lines (`logflume agent tap`, Vector's `vector tap`).

What a tap sees: a source's events after its interceptors (what it puts into its
channels); a channel's events as they are put into it; a sink's, its input: the
events put into the channel it reads. Each sampled event is one line
`{"component", "kind", "time", "headers", "line", "record"}`: `time` is the event's
own time (epoch ms) or the time it was sampled, `line` its raw text, `record` its
parsed form (null when no parser ran).

The pipeline pays one attribute test per batch while nobody taps (`Taps.active`).
A tap never blocks it either: each client has a bounded queue, events that find it
full are dropped for that client and counted (`logflume_agent_tap_dropped_total`
and the last line of the stream, `{"dropped": N}`), so a slow reader only loses
samples. `logflume_agent_tap_clients` is the number of taps open.

The events show log content (client addresses, URLs), and the metrics listener has
no authentication of its own: `/tap` answers only on a listener bound to a
loopback address (127.0.0.0/8, ::1, localhost), where only this host's users reach
it; any other listener answers 403.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import deque
from typing import TYPE_CHECKING

import orjson

from agent.api import Event
from agent.metrics import Registry
from common.aio import within

if TYPE_CHECKING:
    from aiohttp import web

QUEUE_EVENTS = 1000  # most events waiting for one tap client; more are dropped
DEFAULT_LIMIT = 100  # events one tap streams unless `limit` says otherwise
MAX_LIMIT = 1_000_000

# what a tapped name is: (its kind, (kind, name) of the component whose events it shows)
Tapped = tuple[str, tuple[str, str]]
IDLE_CHECK_S = 1.0  # while nothing flows, how often a tap looks whether its client left


def is_loopback(host: str) -> bool:
    """Whether a listener bound to `host` is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class TapClient:
    """One tap request's queue; filled on the event loop, emptied by its handler."""

    __slots__ = ("dropped", "kind", "name", "queue", "wake")

    def __init__(self, kind: str, name: str):
        self.kind, self.name = kind, name
        self.queue: deque[Event] = deque()
        self.dropped = 0
        self.wake = asyncio.Event()


class Taps:
    """The tap clients of one agent, by (kind, component). Event loop only."""

    def __init__(self, registry: Registry):
        self.active = False  # any client at all: the one test the hot path makes
        self._clients: dict[tuple[str, str], list[TapClient]] = {}
        self._dropped = registry.counter(
            "logflume_agent_tap_dropped_total",
            "Sampled events dropped because a tap client read too slowly",
        )
        self._connected = registry.gauge("logflume_agent_tap_clients", "Tap clients connected")

    def sample(self, kind: str, name: str, events: list[Event]) -> None:
        """Hand `events` of component `name` to its tap clients, if any."""
        for client in self._clients.get((kind, name), ()):
            room = QUEUE_EVENTS - len(client.queue)
            if room < len(events):
                lost = len(events) - max(room, 0)
                client.dropped += lost
                self._dropped.inc(lost)
            if room > 0:
                client.queue.extend(events[:room])
                client.wake.set()

    def subscribe(self, kind: str, name: str) -> TapClient:
        client = TapClient(kind, name)
        self._clients.setdefault((kind, name), []).append(client)
        self.active = True
        self._connected.inc()
        return client

    def unsubscribe(self, client: TapClient) -> None:
        key = (client.kind, client.name)
        clients = self._clients.get(key, [])
        if client in clients:
            clients.remove(client)
            self._connected.dec()
        if not clients:
            self._clients.pop(key, None)
        self.active = bool(self._clients)

    async def stream(
        self, request: web.Request, listener_host: str, components: dict[str, Tapped]
    ) -> web.StreamResponse:
        """GET /tap?component=NAME&limit=N: `components` maps each name to its kind
        and the (kind, name) whose events it shows."""
        from aiohttp import web

        if not is_loopback(listener_host):
            return web.Response(
                status=403,
                text=f"tap refused: the metrics listener is bound to {listener_host}, not a "
                "loopback address, and tap shows log content; listen on 127.0.0.1 to use it\n",
            )
        name = request.query.get("component", "")
        if name not in components:
            known = ", ".join(sorted(components)) or "none"
            return web.Response(
                status=404, text=f"no component {name!r} in this agent (components: {known})\n"
            )
        try:
            limit = int(request.query.get("limit", DEFAULT_LIMIT))
        except ValueError:
            limit = -1
        if not 1 <= limit <= MAX_LIMIT:
            return web.Response(
                status=400, text=f"limit: expected an integer from 1 to {MAX_LIMIT}\n"
            )
        kind, (sampled_kind, sampled_name) = components[name]
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        client = self.subscribe(sampled_kind, sampled_name)
        try:
            sent = 0
            while sent < limit:
                try:
                    await within(client.wake.wait(), IDLE_CHECK_S)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break  # the client went away while nothing flowed
                    continue
                client.wake.clear()
                lines: list[bytes] = []
                while client.queue and sent + len(lines) < limit:
                    lines.append(_line(name, kind, client.queue.popleft()))
                sent += len(lines)
                await response.write(b"".join(lines))
            if client.dropped:
                await response.write(orjson.dumps({"dropped": client.dropped}) + b"\n")
            await response.write_eof()
        except ConnectionError:
            pass  # the client left mid-stream: nothing to answer
        finally:
            self.unsubscribe(client)
        return response


def _line(component: str, kind: str, event: Event) -> bytes:
    doc = {
        "component": component,
        "kind": kind,
        "time": event.time if event.time is not None else int(time.time() * 1000),
        "headers": event.headers,
        "line": event.body.decode("utf-8", "replace"),
        "record": event.record,
    }
    return orjson.dumps(doc, default=str) + b"\n"
