"""A small harness to run one source outside the agent runtime.

`Harness.start()` runs `source.run(emit, offer)` as a task on the test's loop; the
emit it passes records events and settles their acks as the test chooses
(immediately, later, or never); `offer` accepts until `full` is set.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import shutil
import subprocess
import time
from pathlib import Path

from agent.api import REGISTRY, Context, Event


class FakeMetric:
    def __init__(self):
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def set(self, value: float) -> None:
        self.value = value


class FakeMetrics:
    """In-memory Metrics: `m.value(name, **labels)` reads a counter or gauge."""

    def __init__(self):
        self.series: dict[tuple, FakeMetric] = {}

    def _get(self, name: str, labels: dict) -> FakeMetric:
        key = (name, tuple(sorted(labels.items())))
        return self.series.setdefault(key, FakeMetric())

    def counter(self, name: str, help: str, **labels: str) -> FakeMetric:
        return self._get(name, labels)

    def gauge(self, name: str, help: str, **labels: str) -> FakeMetric:
        return self._get(name, labels)

    def value(self, name: str, **labels: str) -> float:
        return sum(
            m.value
            for (n, lab), m in self.series.items()
            if n == name and all(dict(lab).get(k) == v for k, v in labels.items())
        )


def make_context(state_dir: Path, name: str = "src", metrics: FakeMetrics | None = None):
    return Context(
        agent="test",
        name=name,
        metrics=metrics or FakeMetrics(),
        state_dir=str(state_dir),
        log=logging.getLogger(f"test.{name}"),
    )


def build(kind_type: tuple[str, str], state_dir: Path, metrics=None, name="src", **config):
    importlib.import_module(f"sources.{kind_type[1]}")  # registers the plugin
    cls = REGISTRY[kind_type]
    cfg = cls.Config(**config)
    assert cls.validate(cfg) == []
    return cls(cfg, make_context(state_dir, name, metrics))


class Harness:
    """Collects what a source emits. `settle`: "now" settles each batch on receipt,
    "hold" keeps every batch unsettled in `held` (settle them with `release`)."""

    def __init__(self, source, settle: str = "now"):
        self.source = source
        self.settle = settle
        self.events: list[Event] = []
        self.batches: list[list[Event]] = []
        self.held: list[list[Event]] = []
        self.gate: asyncio.Event | None = None  # when set up, emit waits for it
        self.full = False
        self.offered = 0
        self.task: asyncio.Task | None = None

    async def emit(self, batch: list[Event]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.batches.append(batch)
        self.events.extend(batch)
        if self.settle == "now":
            for e in batch:
                e.settle()
        else:
            self.held.append(batch)

    def offer(self, batch: list[Event]) -> bool:
        if self.full:
            return False
        self.offered += 1
        self.batches.append(batch)
        self.events.extend(batch)
        return True

    def release(self, batches: list[list[Event]] | None = None) -> None:
        for batch in batches if batches is not None else self.held:
            for e in batch:
                e.settle()
        if batches is None:
            self.held = []

    def start(self) -> Harness:
        self.task = asyncio.get_running_loop().create_task(self.source.run(self.emit, self.offer))
        return self

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass

    def bodies(self) -> list[bytes]:
        return [e.body for e in self.events]

    async def wait_for(self, predicate, limit: float = 20.0, what: str = "condition") -> None:
        deadline = time.monotonic() + limit
        while not predicate():
            if self.task is not None and self.task.done():
                self.task.result()
                raise AssertionError(f"source stopped before {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; got {len(self.events)} events")
            await asyncio.sleep(0.02)

    async def wait_lines(self, n: int, limit: float = 20.0) -> None:
        await self.wait_for(lambda: len(self.events) >= n, limit, f"{n} events")


async def run_logrotate(tmp_path: Path, log: Path, mode: str) -> None:
    """Rotate `log` once with the real logrotate (forced), in `mode` ("create" or
    "copytruncate"), keeping compressed generations with delaycompress as nginx
    deployments do; its state and config go under `tmp_path`."""
    lr = shutil.which("logrotate")
    assert lr, "logrotate is installed by deploy/system-deps.sh"
    conf = tmp_path / "logrotate.conf"
    conf.write_text(f"{log} {{\n  {mode}\n  compress\n  delaycompress\n  rotate 3\n}}\n")
    result = await asyncio.to_thread(
        subprocess.run,
        [lr, "-f", "-s", str(tmp_path / "logrotate.state"), str(conf)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
