"""Delayed operations: requests that wait for a partition to change.

The contract (Kafka's DelayedOperation, kept small):

- `try_complete()` checks whether the operation can finish now; if so it calls
  `force_complete()` and returns True. It is called when the operation is first
  submitted and again every time one of its watched partitions changes.
- `on_complete()` builds the result. It runs exactly once, either from
  `try_complete()` or when the timeout expires.
- `on_expire()` runs after `on_complete()` when the completion came from the timeout
  (bookkeeping only, e.g. counting).

A `Purgatory` holds operations keyed by partition (`(topic, index)`); whoever changes
a partition (an append moves the log end, a follower moves the high watermark) calls
`check_and_complete(key)`. Acks=all produce waits on the high watermark, long-poll
fetch on new data, and follower fetches move the high watermark.
`purgatory_metrics` reports how many requests wait in each.

Everything runs on the broker's event loop: no locks, and callbacks never await.
Operations hand their result to an `asyncio.Future` that the request handler awaits.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily

from broker.metrics import PREFIX

log = logging.getLogger(__name__)


class Timer(Protocol):
    """What `call_later` returns: asyncio's TimerHandle, or a fake clock's."""

    def cancel(self) -> None: ...


class DelayedOperation(abc.ABC):
    """One waiting request. Owned by the purgatory that watches it; event-loop only."""

    def __init__(self, timeout_s: float):
        self.timeout_s = max(0.0, timeout_s)
        self.completed = False
        self._timer: Timer | None = None
        self._purgatory: Purgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    def force_complete(self) -> bool:
        """Complete now; True only for the caller that actually completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer = None
        if self.force_complete():
            self.on_expire()

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Call force_complete() and return True if the operation can finish now."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Produce the result. Called exactly once."""

    def on_expire(self) -> None:
        """Called after on_complete() when the timeout completed the operation."""
        log.debug("%s expired after %.3f s", type(self).__name__, self.timeout_s)


class Purgatory:
    """Watch lists of delayed operations by key. Event-loop only; not thread-safe.

    `call_later(delay_s, callback)` schedules timeouts; it defaults to the running
    loop's and can be replaced by a fake clock in unit tests.
    """

    def __init__(
        self, name: str, call_later: Callable[[float, Callable[[], None]], Timer] | None = None
    ):
        self.name = name
        self._call_later = call_later
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if possible; otherwise watch it under `keys` until its timeout.

        Returns True if the operation completed immediately.
        """
        if op.try_complete():
            return True
        op._purgatory = self
        op._keys = tuple(keys)
        for key in op._keys:
            self._watchers.setdefault(key, {})[op] = None
        # A watched key may have changed between the first check and the watch above only
        # if try_complete awaited, which it cannot; so no second check is needed.
        call_later = self._call_later or asyncio.get_running_loop().call_later
        op._timer = call_later(op.timeout_s, op._expire)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching `key`; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        done = 0
        for op in list(watchers):
            if not op.completed and op.try_complete():
                done += 1
        return done

    def complete_all(self) -> int:
        """Force every watched operation to complete (used at shutdown)."""
        ops = {op: None for watchers in self._watchers.values() for op in watchers}
        return sum(op.force_complete() for op in ops)

    def watched(self, key: Hashable | None = None) -> int:
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len({op for watchers in self._watchers.values() for op in watchers})

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(op, None)
                if not watchers:
                    del self._watchers[key]
        op._purgatory = None


def purgatory_metrics(purgatories: Iterable[Purgatory]) -> Iterator[GaugeMetricFamily]:
    """A scrape's `purgatory_size` gauge: the requests waiting in each purgatory."""
    family = GaugeMetricFamily(
        PREFIX + "purgatory_size",
        "Requests waiting: acks=all produces and long-poll fetches",
        labels=["purgatory"],
    )
    for p in purgatories:
        family.add_metric([p.name], p.watched())
    yield family
