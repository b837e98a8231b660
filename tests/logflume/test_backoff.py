"""The supervisor's restart delays, as pure code: no process, no clock."""

from logflume.supervisor import Backoff


def test_quick_crashes_double_the_delay_up_to_the_cap():
    backoff = Backoff(first=1, cap=30, stable_after=60)
    assert [backoff.delay(uptime=0.5) for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_child_that_stayed_up_long_enough_starts_over():
    backoff = Backoff(first=1, cap=30, stable_after=60)
    for _ in range(4):
        backoff.delay(uptime=1)
    assert backoff.delay(uptime=60) == 1
    assert backoff.delay(uptime=59) == 2


def test_defaults_are_one_second_doubling_to_thirty():
    backoff = Backoff()
    assert [backoff.delay(uptime=0) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.delay(uptime=backoff.stable_after) == 1
