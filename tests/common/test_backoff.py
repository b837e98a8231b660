"""Retry waits, as pure code: no clock, no sleeping."""

import random

import pytest

from common.backoff import Backoff, backoff_delay


def test_waits_double_up_to_the_cap():
    backoff = Backoff(initial=1, maximum=30)
    assert [backoff.next() for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_fractional_first_wait_reaches_the_cap_exactly():
    backoff = Backoff(initial=0.5, maximum=30)
    assert [backoff.next() for _ in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_a_long_outage_stays_at_the_cap_without_overflow():
    assert backoff_delay(10_000, 0.05, 1.0) == 1.0


def test_reset_starts_over():
    backoff = Backoff(initial=0.1, maximum=1)
    backoff.next(), backoff.next()
    backoff.reset()
    assert backoff.next() == 0.1


def test_a_first_wait_above_the_cap_waits_the_cap_as_kafka_does():
    assert [backoff_delay(n, 5, 2, jitter=0.2) for n in range(3)] == [2, 2, 2]


def test_no_first_wait_means_no_wait():
    assert [backoff_delay(n, 0, 30) for n in range(3)] == [0, 0, 0]


def test_jitter_spreads_the_wait_around_the_exponential_and_never_past_the_cap():
    rng = random.Random(7)
    waits = [backoff_delay(2, 1, 30, jitter=0.2, rng=rng) for _ in range(200)]
    assert all(3.2 <= w <= 4.8 for w in waits)
    assert len(set(waits)) > 100
    capped = [backoff_delay(20, 1, 30, jitter=0.2, rng=rng) for _ in range(200)]
    assert all(24 <= w <= 30 for w in capped)
    assert min(capped) < 29


@pytest.mark.parametrize("uptime, expected", [(59, 16), (60, 1)])
def test_after_run_starts_over_once_a_run_lasted_stable_after(uptime, expected):
    backoff = Backoff(initial=1, maximum=30, stable_after=60)
    for _ in range(4):
        backoff.after_run(uptime=1)
    assert backoff.after_run(uptime=uptime) == expected


def test_without_stable_after_a_long_run_does_not_start_over():
    backoff = Backoff(initial=1, maximum=30)
    backoff.after_run(uptime=1)
    assert backoff.after_run(uptime=10_000) == 2
