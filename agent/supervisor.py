"""Supervised component tasks: a crashed source or sink is logged and restarted.

`Supervised` runs `start()` (which builds a fresh component instance and returns
its run coroutine) in a task. An exception is logged with its traceback, the
component's health turns "restarting", and it is started again after a backoff
that doubles from 0.5 s up to 30 s (reset after a minute of healthy running). A
clean return marks it "stopped". `stop()` cancels the task and waits for it.

A component started with `needs_ready` is "starting" (not yet healthy) on each
(re)start until it calls `ready()`: sources that bind sockets do so after binding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from common.backoff import Backoff

MIN_BACKOFF, MAX_BACKOFF, HEALTHY_AFTER = 0.5, 30.0, 60.0


class Supervised:
    """One component's task; owned by the runtime, used from its event loop only."""

    def __init__(
        self,
        name: str,
        start: Callable[[], Awaitable[None]],
        health: dict[str, str],
        log: logging.Logger,
        on_crash: Callable[[], None] | None = None,
        needs_ready: bool = False,
    ):
        self.name = name
        self._start = start
        self._health = health
        self._log = log
        self._on_crash = on_crash
        self._needs_ready = needs_ready
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._loop(), name=self.name)

    async def _loop(self) -> None:
        backoff = Backoff(MIN_BACKOFF, MAX_BACKOFF, stable_after=HEALTHY_AFTER)
        while True:
            started = time.monotonic()
            self._health[self.name] = "starting" if self._needs_ready else "running"
            try:
                await self._start()
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = backoff.after_run(time.monotonic() - started)
                self._log.exception("%s crashed; restarting in %.1fs", self.name, delay)
                if self._on_crash is not None:
                    self._on_crash()
            else:
                self._log.info("%s finished", self.name)
                self._health[self.name] = "stopped"
                return
            self._health[self.name] = "restarting"
            await asyncio.sleep(delay)

    def ready(self) -> None:
        """The component accepts input now: "starting" turns "running"."""
        if self._health.get(self.name) == "starting":
            self._health[self.name] = "running"

    async def stop(self, wait_seconds: float | None = None) -> None:
        """Cancel and wait (up to `wait_seconds`); the health entry is removed."""
        self._health.pop(self.name, None)
        if self.task is None or self.task.done():
            return
        self.task.cancel()
        done, _ = await asyncio.wait({self.task}, timeout=wait_seconds)
        if not done:
            self._log.warning("%s did not stop within %.1fs", self.name, wait_seconds)
        elif not self.task.cancelled() and self.task.exception() is not None:
            self._log.error("%s failed while stopping: %r", self.name, self.task.exception())
