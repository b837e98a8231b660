"""The agent's metric registry, on prometheus_client, and its component health.

`Registry` implements the `Metrics` protocol of agent/api.py over a prometheus_client
registry made by `common.prometheus.new_registry("agent")` (so /metrics also carries
process_*, python_* and logflume_build_info). A family (Counter, Gauge or Histogram)
is created on first use of its name, with the sorted label keys as label names; each
(name, labels) pair is one child series, cached, so asking twice returns the same
object and a restarted component keeps counting where its predecessor stopped.
Counter names end in `_total`, which prometheus_client strips and writes back, so
the exposed names are the names asked for.

Health is a dict of component name -> state ("starting", "running", "restarting",
"stopped") kept by the runtime's supervisors; the agent is healthy when every
component is running (a network source only once its socket is bound). `status()`
is the `health` callable of `common.prometheus.MetricsServer`.
"""

from __future__ import annotations

import threading

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from common.prometheus import new_registry

DEFAULT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

_KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}


class Registry:
    """All metric series of one agent process. Owned by the runtime. Series may be
    asked for and updated from any thread (the Kafka sink's statistics callback runs
    on its poll thread); prometheus_client series are thread-safe."""

    def __init__(self) -> None:
        self.prometheus = new_registry("agent")
        self.health: dict[str, str] = {}
        self._families: dict[str, tuple[str, tuple[str, ...], MetricWrapperBase]] = {}
        self._series: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def _get(self, kind: str, name: str, help: str, labels: dict[str, str]):
        key = (kind, name, *sorted(labels.items()))
        series = self._series.get(key)
        if series is not None:
            return series
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = self._child(kind, name, help, labels)
        return series

    def _child(self, kind: str, name: str, help: str, labels: dict[str, str]):
        names = tuple(sorted(labels))
        family = self._families.get(name)
        if family is None:
            if kind == "counter" and not name.endswith("_total"):
                raise ValueError(f"counter {name}: a counter's name ends in _total")
            extra = {"buckets": DEFAULT_BUCKETS} if kind == "histogram" else {}
            metric = _KINDS[kind](name, help, names, registry=self.prometheus, **extra)
            family = self._families[name] = (kind, names, metric)
        if family[0] != kind:
            raise ValueError(f"metric {name} registered as {family[0]}, not {kind}")
        if family[1] != names:
            raise ValueError(f"metric {name} has labels {family[1]}, not {names}")
        return family[2].labels(**labels) if names else family[2]

    def counter(self, name: str, help: str, **labels: str) -> Counter:
        return self._get("counter", name, help, labels)

    def gauge(self, name: str, help: str, **labels: str) -> Gauge:
        return self._get("gauge", name, help, labels)

    def histogram(self, name: str, help: str, **labels: str) -> Histogram:
        return self._get("histogram", name, help, labels)

    def value(self, name: str, **labels: str) -> float | None:
        """The current value of a counter or gauge series (for tests)."""
        family = self._families.get(name)
        if family is None:
            return None
        for metric in family[2].collect():
            for sample in metric.samples:
                if sample.name == name and sample.labels == labels:
                    return sample.value
        return None

    def healthy(self) -> bool:
        return all(state == "running" for state in self.health.values())

    def status(self) -> tuple[bool, dict]:
        """(healthy, details) for /health: the state of every component."""
        return self.healthy(), {"components": dict(self.health)}
