"""What the agent and the broker share of their Prometheus side: a registry per process
and the aiohttp server of /metrics and /health.

`new_registry(component)` gives a prometheus_client `CollectorRegistry` already holding
the process_* and python_* collectors and `logflume_build_info{version, component}`,
so every logflume process exports them the same way. A registry per process role,
rather than prometheus_client's global one, keeps two brokers (or a broker and an
agent) started in one test process apart.

`MetricsServer` serves `/metrics` in the format the scraper asks for (Prometheus text
0.0.4 by default, OpenMetrics when its Accept header says so) and `/health` as JSON:
200 when the `health()` callable reports ready, 503 otherwise, with its details; and
the GET routes its owner adds (the agent's `/tap`, agent/tap.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder

if TYPE_CHECKING:
    from aiohttp import web

Health = Callable[[], tuple[bool, dict]]
Route = Callable[["web.Request"], Awaitable["web.StreamResponse"]]

SHUTDOWN_TIMEOUT_S = 1.0


def new_registry(component: str) -> CollectorRegistry:
    """A registry with process_*, python_* and logflume_build_info for `component`."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Info("logflume_build", "Version of the running logflume process", registry=registry).info(
        {"version": _version(), "component": component}
    )
    return registry


def _version() -> str:
    """The installed distribution's version (shared utilities import no other package
    of the project, so not `logflume.__version__`, which is the same number)."""
    try:
        return metadata.version("logflume")
    except metadata.PackageNotFoundError:
        return "unknown"


class MetricsServer:
    """aiohttp server of /metrics and /health on the caller's event loop."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Health,
        host: str,
        port: int,
        routes: Mapping[str, Route] | None = None,
    ):
        self.registry, self.health = registry, health
        self.host, self.port = host, port
        self.routes = dict(routes or {})  # path -> handler of GET requests
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        # imported here: aiohttp is a quarter of a second of a process's start, which a
        # broker without a metrics listener need not pay
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        for path, handler in self.routes.items():
            app.router.add_get(path, handler)
        # Stopping waits at most this long for requests being answered (aiohttp's default
        # is 60 s); answering /metrics or /health takes milliseconds.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]  # the port bound, when asked for port 0

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        from aiohttp import web

        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(self.registry), headers={"Content-Type": content_type})

    async def _health(self, request: web.Request) -> web.Response:
        from aiohttp import web

        ok, details = self.health()
        return web.json_response(
            {"status": "ok" if ok else "degraded", **details}, status=200 if ok else 503
        )
