"""Watchdog wake-ups for the tail source.

Watchdog runs an observer thread (inotify on Linux). Its events only wake the read
loop early; the loop polls and rescans on its own as well, so a missed or dropped
event costs latency, never data. Each glob is watched from its longest directory
prefix without wildcards (recursively when the rest of the pattern has directory
parts). Events are coalesced: at most one wake-up per kind is queued on the loop.
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
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

_STRUCTURAL = {EVENT_TYPE_CREATED, EVENT_TYPE_DELETED, EVENT_TYPE_MOVED}
_INTERESTING = _STRUCTURAL | {EVENT_TYPE_MODIFIED}


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
    schedules `callback(structural)` on the loop it was created on."""

    def __init__(self, patterns: list[str], callback: Callable[[bool], None], log: logging.Logger):
        self._loop = asyncio.get_running_loop()
        self._callback = callback
        self._patterns = patterns
        self._log = log
        self._observer = None
        self._queued = {True: False, False: False}

    def start(self) -> None:
        observer = Observer()
        try:
            for root, recursive in watch_roots(self._patterns).items():
                observer.schedule(self, root, recursive=recursive)
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
        if event.event_type not in _INTERESTING or event.is_directory:
            return
        structural = event.event_type in _STRUCTURAL
        if self._queued[structural]:
            return
        self._queued[structural] = True
        try:
            self._loop.call_soon_threadsafe(self._deliver, structural)
        except RuntimeError:
            pass  # the loop is closed: the source is gone

    def _deliver(self, structural: bool) -> None:
        self._queued[structural] = False
        self._callback(structural)
