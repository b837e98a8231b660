"""A sampled byte rate and the throttle time of a quota violation: Kafka's Rate over
a SampledStat, and QuotaUtils.throttleTime, as pure arithmetic (times in ms, passed in).

The rate is kept in `samples` windows of `window_ms` each. A record goes into the
current window; once that window is `window_ms` old the next one starts (reusing the
oldest). A measurement first forgets windows that started more than
`samples * window_ms` ago, then divides the sum of the rest by the time they span:
from the start of the oldest window kept to now, but never less than
`samples - 1` full windows, so that the first bytes of a new client do not look like
an enormous rate.

`SimpleRate` (Kafka's SimpleRate, the replication throttles') measures from the start
of the oldest window kept, but over never less than one window: a throttle that
allows a burst and then holds back until the average is back under the rate.

When a recorded value makes the rate exceed the quota, the client is throttled for
the time that brings the rate back to the quota if it sent nothing more:
`(rate - quota) / quota * window span`, at most the full measurement span
(`samples * window_ms`).
"""

from __future__ import annotations


class SampledRate:
    """One quota entity's rate (event-loop only)."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_current")

    def __init__(self, samples: int, window_ms: int, now_ms: float):
        self.samples = samples
        self.window_ms = window_ms
        self._starts = [now_ms]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        if now_ms - self._starts[self._current] >= self.window_ms:
            self._advance(now_ms)
        self._values[self._current] += value

    def _advance(self, now_ms: float) -> None:
        if len(self._starts) < self.samples:
            self._starts.append(now_ms)
            self._values.append(0.0)
            self._current = len(self._starts) - 1
        else:
            self._current = (self._current + 1) % self.samples
            self._starts[self._current] = now_ms
            self._values[self._current] = 0.0

    def _purge(self, now_ms: float) -> None:
        """Windows older than the whole measurement span count nothing (reset to now)."""
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """The span the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def rate(self, now_ms: float) -> float:
        """Per second."""
        span = self.window_size_ms(now_ms)
        return sum(self._values) / (span / 1000.0)


class SimpleRate(SampledRate):
    """The rate over the time since the oldest window kept began, at least one window."""

    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        return max(now_ms - min(self._starts), float(self.window_ms))


def throttle_time_ms(rate: float, quota: float, window_ms: float, max_ms: float) -> int:
    """Kafka's throttle time for an observed rate over a quota (0 when within it)."""
    if rate <= quota:
        return 0
    return int(round(min((rate - quota) / quota * window_ms, max_ms)))
