"""A tiny Prometheus registry and the agent's /metrics and /health endpoints.

`Registry` implements the `Metrics` protocol of agent/api.py. Each (name, labels)
pair is one time series; asking twice for the same series returns the same object,
so a restarted component keeps counting where its predecessor stopped. `render()`
writes the Prometheus text exposition format 0.0.4.

`MetricsServer` serves `/metrics` and `/health` with aiohttp. Health is a dict of
component name -> state ("starting", "running", "restarting", "stopped") kept by
the runtime; `/health` answers 200 when every component is running (a network
source only once its socket is bound), 503 otherwise.
"""

from __future__ import annotations

import bisect
import math

from aiohttp import web

DEFAULT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: tuple[tuple[str, str], ...], extra: str = "") -> str:
    parts = [f'{k}="{_escape(v)}"' for k, v in labels]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class CounterValue:
    """A monotonically increasing number. Single-threaded use (the agent's loop)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class GaugeValue:
    """A number that goes up and down. Single-threaded use (the agent's loop)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = value

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class HistogramValue:
    """Cumulative buckets, sum and count, as Prometheus histograms."""

    __slots__ = ("buckets", "counts", "sum", "count")

    def __init__(self, buckets: tuple[float, ...] = DEFAULT_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1


class Registry:
    """All metric series of one agent process. Owned by the runtime; not thread-safe
    (every component runs on the agent's event loop)."""

    def __init__(self) -> None:
        # name -> (type, help, {labels tuple: value})
        self._families: dict[str, tuple[str, str, dict]] = {}
        self.health: dict[str, str] = {}

    def _series(self, kind: str, name: str, help: str, labels: dict[str, str], factory):
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = (kind, help, {})
        elif family[0] != kind:
            raise ValueError(f"metric {name} registered as {family[0]}, not {kind}")
        key = tuple(sorted(labels.items()))
        series = family[2].get(key)
        if series is None:
            series = family[2][key] = factory()
        return series

    def counter(self, name: str, help: str, **labels: str) -> CounterValue:
        return self._series("counter", name, help, labels, CounterValue)

    def gauge(self, name: str, help: str, **labels: str) -> GaugeValue:
        return self._series("gauge", name, help, labels, GaugeValue)

    def histogram(self, name: str, help: str, **labels: str) -> HistogramValue:
        return self._series("histogram", name, help, labels, HistogramValue)

    def value(self, name: str, **labels: str) -> float | None:
        """The current value of a counter or gauge series (for tests and health)."""
        family = self._families.get(name)
        series = family and family[2].get(tuple(sorted(labels.items())))
        return None if series is None else series.value

    def render(self) -> str:
        out: list[str] = []
        for name in sorted(self._families):
            kind, help, series = self._families[name]
            help_text = help.replace("\\", "\\\\").replace("\n", " ")
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for key in sorted(series):
                s = series[key]
                if kind != "histogram":
                    out.append(f"{name}{_labels(key)} {_num(s.value)}")
                    continue
                running = 0
                for bound, n in zip(s.buckets, s.counts, strict=True):
                    running += n
                    le = 'le="' + _num(bound) + '"'
                    out.append(f"{name}_bucket{_labels(key, le)} {running}")
                inf = _labels(key, 'le="+Inf"')
                out.append(f"{name}_bucket{inf} {s.count}")
                out.append(f"{name}_sum{_labels(key)} {_num(s.sum)}")
                out.append(f"{name}_count{_labels(key)} {s.count}")
        return "\n".join(out) + "\n"

    def healthy(self) -> bool:
        return all(state == "running" for state in self.health.values())


class MetricsServer:
    """aiohttp server for /metrics and /health; owned by the runtime."""

    def __init__(self, registry: Registry, host: str, port: int):
        self.registry, self.host, self.port = registry, host, port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.registry.render().encode(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def _health(self, request: web.Request) -> web.Response:
        ok = self.registry.healthy()
        return web.json_response(
            {"status": "ok" if ok else "degraded", "components": self.registry.health},
            status=200 if ok else 503,
        )
