"""Waits between retries, computed one way everywhere: exponential with a cap and
jitter, as Kafka's clients compute them from `retry.backoff.ms` and
`retry.backoff.max.ms` (KIP-580).

The n-th retry (n = 0, 1, ...) waits `initial * multiplier**n`, at most `maximum`,
times a random factor drawn from [1 - jitter, 1 + jitter], and never more than
`maximum`. An `initial` above `maximum` waits exactly `maximum` from the first retry
on, as in Kafka; `multiplier` is above 1. With `jitter` 0 (the default) the waits are
exact: 0.5, 1, 2, ... 16, 30.

`Backoff` keeps the count of one retry loop. A loop that restarts something long
lived (a crashed child process or agent component) gives `stable_after`: a run that
lasted that long counts as a success and the waits start over (`after_run`).
Pure: no clock and no sleeping; the caller sleeps, and says how long a run lasted.
"""

from __future__ import annotations

import math
import random


def backoff_delay(
    attempt: int,
    initial: float,
    maximum: float,
    multiplier: float = 2.0,
    jitter: float = 0.0,
    rng: random.Random | None = None,
) -> float:
    """The wait in seconds before retry number `attempt` (0 for the first retry)."""
    if maximum <= initial:
        return maximum
    if initial <= 0:
        return 0.0
    top = math.ceil(math.log(maximum / initial, multiplier)) + 1  # past the cap: no overflow
    delay = min(initial * multiplier ** min(attempt, top), maximum)
    if jitter:
        delay *= (rng or random).uniform(1 - jitter, 1 + jitter)
    return min(delay, maximum)


class Backoff:
    """The waits of one retry loop; owned by that loop (not shared across tasks)."""

    def __init__(
        self,
        initial: float,
        maximum: float,
        multiplier: float = 2.0,
        jitter: float = 0.0,
        stable_after: float | None = None,
        rng: random.Random | None = None,
    ):
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = jitter
        self.stable_after = stable_after
        self.rng = rng
        self.attempts = 0

    def next(self) -> float:
        """The wait before the next retry; each call counts one more attempt."""
        delay = backoff_delay(
            self.attempts, self.initial, self.maximum, self.multiplier, self.jitter, self.rng
        )
        self.attempts += 1
        return delay

    def reset(self) -> None:
        """The retried operation succeeded: the next wait is `initial` again."""
        self.attempts = 0

    def after_run(self, uptime: float) -> float:
        """The wait before restarting something that ran `uptime` seconds and failed:
        after a run of `stable_after` seconds or more the waits start over."""
        if self.stable_after is not None and uptime >= self.stable_after:
            self.reset()
        return self.next()
