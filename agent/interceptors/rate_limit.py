"""`rate_limit` interceptor: at most `events_per_second` events of the source pass,
in bursts of up to `burst` (a token bucket); the excess is dropped, not delayed, and
counted.

A token bucket (Fluent Bit's and Vector's `throttle`): it holds up to `burst`
tokens, starts full, and gains `events_per_second` tokens a second; each batch of
the source takes as many as it can, and its events beyond the tokens it got are
dropped (the first ones pass, the last ones go). One bucket per source pipeline,
on the monotonic clock; a restarted source starts with a full one. Excess is
dropped, not delayed: a tail reading a backlog (`start_at: beginning`, or after the
agent was down) loses all of it but the burst and the rate.

Dropped events are settled, so their acknowledgement still completes (a tail's
position moves past them), and counted in `logflume_agent_throttled_total`; the
runtime counts them as filtered, in `logflume_agent_source_events_filtered_total`
and the audit's source tier.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from agent.api import Context, Event, Interceptor, register, settle_all

_EPSILON = 1e-9  # refills that add up to a whole token may sum to 0.9999999999


class TokenBucket:
    """Pure: the caller passes the time. Event loop only (one source's pipeline)."""

    def __init__(self, rate: float, burst: int, now: float):
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = now

    def take(self, n: int, now: float) -> int:
        """How many of `n` events may pass at `now` (they take their tokens)."""
        if now > self.updated:  # a clock that went back earns nothing until it is past
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        allowed = min(n, int(self.tokens + _EPSILON))
        self.tokens = max(0.0, self.tokens - allowed)
        return allowed


@dataclasses.dataclass
class RateLimitConfig:
    events_per_second: float  # the sustained rate let through
    burst: int | None = None  # most events let through at once (the bucket); null: 1 s of rate


@register("interceptor", "rate_limit")
class RateLimit(Interceptor):
    """Drops what exceeds the rate; owned by one source's pipeline (single task)."""

    Config = RateLimitConfig

    @classmethod
    def validate(cls, config: RateLimitConfig) -> list[str]:
        errors = []
        if not math.isfinite(config.events_per_second):
            errors.append("events_per_second: must be a finite number")
        elif config.events_per_second <= 0:
            errors.append("events_per_second: must be more than 0")
        if config.burst is not None and config.burst < 1:
            errors.append("burst: must be at least 1")
        return errors

    def __init__(
        self,
        config: RateLimitConfig,
        context: Context,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(config, context)
        rate = config.events_per_second
        burst = config.burst if config.burst is not None else max(1, math.ceil(rate))
        self._clock = clock
        self._bucket = TokenBucket(rate, burst, clock())
        self._throttled = context.metrics.counter(
            "logflume_agent_throttled_total",
            "Events dropped by rate_limit",
            component=context.name,
        )

    def intercept(self, events: list[Event]) -> list[Event]:
        allowed = self._bucket.take(len(events), self._clock())
        if allowed == len(events):
            return events
        dropped = events[allowed:]
        settle_all(dropped)
        self._throttled.inc(len(dropped))
        return events[:allowed]
