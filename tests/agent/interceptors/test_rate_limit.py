"""`rate_limit` interceptor: a token bucket per source pipeline; what exceeds it is
dropped, settled and counted. Time is a fake monotonic clock."""

import pytest

from agent.api import Ack, Event
from agent.interceptors.rate_limit import RateLimit, TokenBucket
from tests.agent.interceptors.pipelines import FIRST_LINE, WHERE, compile_interceptor
from tests.sources.harness import FakeMetrics, make_context

THROTTLED = "logflume_agent_throttled_total"


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def limiter(clock, metrics=None, **config) -> RateLimit:
    context = make_context("/nonexistent", "rl", metrics)
    return RateLimit(RateLimit.Config(**config), context, clock=clock)


def batch(start, stop, settled=None):
    out = []
    for i in range(start, stop):
        ack = Ack(lambda i=i: settled.append(i)) if settled is not None else None
        out.append(Event(b"%d" % i, ack=ack))
    return out


def numbers(events):
    return [int(e.body) for e in events]


def test_token_bucket_starts_full_refills_at_the_rate_and_holds_at_most_burst():
    bucket = TokenBucket(rate=2.0, burst=5, now=10.0)
    assert bucket.take(3, now=10.0) == 3
    assert bucket.take(3, now=10.0) == 2  # the burst is spent
    assert bucket.take(1, now=10.2) == 0  # 0.4 of a token
    assert bucket.take(1, now=10.5) == 1  # 1.0: one
    assert bucket.take(10, now=11.75) == 2  # 2.5 tokens: two, half a token left
    assert bucket.take(10, now=12.0) == 1  # 0.5 + 0.5
    assert bucket.take(10, now=1000.0) == 5  # full again, never more than burst
    assert bucket.take(0, now=1000.0) == 0


def test_token_bucket_fractional_rates():
    bucket = TokenBucket(rate=0.5, burst=1, now=0.0)
    assert [bucket.take(1, now=t) for t in (0.0, 1.0, 1.9, 2.0, 3.9, 4.0)] == [1, 0, 0, 1, 0, 1]


def test_token_bucket_ignores_a_clock_that_goes_back():
    bucket = TokenBucket(rate=1.0, burst=2, now=5.0)
    assert bucket.take(2, now=5.0) == 2
    assert bucket.take(1, now=4.0) == 0
    assert bucket.take(1, now=5.5) == 0  # no credit for the time it went back
    assert bucket.take(1, now=6.0) == 1


def test_excess_events_are_dropped_settled_and_counted():
    clock, metrics, settled = Clock(), FakeMetrics(), []
    rl = limiter(clock, metrics, events_per_second=2, burst=5)
    assert numbers(rl.intercept(batch(0, 8, settled))) == [0, 1, 2, 3, 4]
    assert sorted(settled) == [5, 6, 7]
    assert metrics.value(THROTTLED, component="rl") == 3
    clock.now += 1.0
    assert numbers(rl.intercept(batch(8, 12, settled))) == [8, 9]
    clock.now += 0.25
    assert numbers(rl.intercept(batch(12, 13, settled))) == []
    clock.now += 0.25
    assert numbers(rl.intercept(batch(13, 14, settled))) == [13]
    clock.now += 3600
    assert numbers(rl.intercept(batch(14, 30, settled))) == [14, 15, 16, 17, 18]
    assert metrics.value(THROTTLED, component="rl") == 3 + 2 + 1 + 11
    assert len(settled) == 17


def test_the_sustained_rate_is_the_configured_one():
    clock = Clock()
    rl = limiter(clock, events_per_second=100, burst=10)
    passed = 0
    for _ in range(1000):  # 10 s of batches of 50 every 10 ms: 5000 events/s offered
        passed += len(rl.intercept(batch(0, 50)))
        clock.now += 0.01
    assert 1000 <= passed <= 1010  # 100/s for 10 s, plus the first burst


@pytest.mark.parametrize(("rate", "burst"), [(100.0, 100), (2.5, 3), (0.1, 1)])
def test_burst_defaults_to_one_seconds_worth(rate, burst):
    rl = limiter(Clock(), events_per_second=rate)
    assert len(rl.intercept(batch(0, 500))) == burst


def test_validate_and_errors():
    def check(**config):
        return RateLimit.validate(RateLimit.Config(**config))

    assert check(events_per_second=1000, burst=5000) == []
    assert check(events_per_second=0) == ["events_per_second: must be more than 0"]
    assert check(events_per_second=float("inf")) == ["events_per_second: must be a finite number"]
    assert check(events_per_second=10, burst=0) == ["burst: must be at least 1"]
    _, errors = compile_interceptor("type: rate_limit\nevents_per_second: 0")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE + 1}:32: {WHERE}.events_per_second: must be more than 0"
    ]
    _, errors = compile_interceptor("type: rate_limit\nevents_per_second: lots")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE + 1}:32: {WHERE}.events_per_second: expected float, got 'lots'"
    ]
    config, errors = compile_interceptor("type: rate_limit\nevents_per_second: 500\nburst: 2000")
    assert errors == [] and (config.events_per_second, config.burst) == (500.0, 2000)
