"""Watchdog wake-ups for the tail source.

Watchdog runs an observer thread (inotify on Linux). Its events only wake the read
loop early, for files created, moved or deleted (a rotation, a new log): growth is
found by the loop's own polling (`poll_interval`), not by modification events. A
writer such as nginx writes each line on its own, each write is an inotify event,
and watchdog spends ~250 us of Python on each (measured: 600 lines/s cost the agent
20 % of a core with them, 2 % without), so the kernel is not even asked for them
(watchdog's `event_filter` sets the inotify mask). The loop polls and rescans on its
own as well, so a missed or dropped event costs latency, never data. Each glob is
watched from its longest directory prefix without wildcards (recursively when the
rest of the pattern has directory parts). Wake-ups are coalesced: at most one is
queued on the loop.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
from collections.abc import Callable

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MOVED,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

_STRUCTURAL = {EVENT_TYPE_CREATED, EVENT_TYPE_DELETED, EVENT_TYPE_MOVED}
_EVENT_FILTER = [FileCreatedEvent, FileDeletedEvent, FileMovedEvent]


def glob_root(pattern: str) -> tuple[str, bool]:
    """The directory of `pattern` before its first wildcard component, and whether
    a directory component has a wildcard (matching files may then sit deeper)."""
    parts = pattern.split(os.sep)
    static = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        static.append(part)
    return os.sep.join(static) or os.sep, len(static) < len(parts) - 1


def watch_roots(patterns: list[str]) -> dict[str, bool]:
    """Directory -> recursive, for the existing static prefix of each glob."""
    roots: dict[str, bool] = {}
    for pattern in patterns:
        root, recursive = glob_root(pattern)
        while not os.path.isdir(root) and root != os.sep:
            root, recursive = os.path.dirname(root), True
        roots[root] = roots.get(root, False) or recursive
    return roots


class Watcher(FileSystemEventHandler):
    """Owned by one tail source. `dispatch` runs on watchdog's thread and only
    schedules `callback()` on the loop it was created on."""

    def __init__(self, patterns: list[str], callback: Callable[[], None], log: logging.Logger):
        self._loop = asyncio.get_running_loop()
        self._callback = callback
        self._patterns = patterns
        self._log = log
        self._observer: BaseObserver | None = None
        self._queued = False

    def start(self) -> None:
        observer = Observer()
        try:
            for root, recursive in watch_roots(self._patterns).items():
                observer.schedule(self, root, recursive=recursive, event_filter=_EVENT_FILTER)
            observer.start()
        except OSError as exc:
            self._log.warning("tail: file events unavailable (%s); polling only", exc)
            return
        self._observer = observer

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(2.0)
            self._observer = None

    def dispatch(self, event) -> None:
        if event.event_type not in _STRUCTURAL or event.is_directory or self._queued:
            return
        self._queued = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:
            pass  # the loop is closed: the source is gone

    def _deliver(self) -> None:
        self._queued = False
        self._callback()
