"""The rate and throttle arithmetic (broker.quotas.rate) and the enforcement's
bookkeeping (broker.quotas.manager) with a fake clock: pure code, no broker."""

import pytest

from broker.quotas.entity import DEFAULT, Entity
from broker.quotas.manager import FETCH, PRODUCE, QuotaManager, client_throttles
from broker.quotas.rate import SampledRate, throttle_time_ms


def test_a_young_rate_is_measured_over_at_least_samples_minus_one_windows():
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.rate(0) == 1000.0  # 10 kB over 10 s, not over 0 s
    rate.record(10_000, 500)
    assert rate.window_size_ms(500) == 10_500
    assert rate.rate(500) == pytest.approx(20_000 / 10.5)


def test_windows_roll_and_old_ones_are_forgotten():
    rate = SampledRate(samples=3, window_ms=1000, now_ms=0)
    for t in (0, 1000, 2000):
        rate.record(3000, t)
    # three full windows: 9000 bytes from 0 to 2500 ms, never less than 2 windows
    assert rate.rate(2500) == pytest.approx(9000 / 2.5)
    rate.record(3000, 3000)  # reuses the oldest window (0 ms)
    assert rate.rate(3000) == pytest.approx(9000 / 2.0)
    # long silence: everything older than samples * window is gone
    assert rate.rate(60_000) == 0.0


def test_throttle_time_brings_the_rate_back_to_the_quota():
    assert throttle_time_ms(rate=1000, quota=1000, window_ms=10_000, max_ms=11_000) == 0
    assert throttle_time_ms(rate=900, quota=1000, window_ms=10_000, max_ms=11_000) == 0
    # 50 % over a quota measured over 10 s: 5 s without traffic brings it back
    assert throttle_time_ms(rate=1500, quota=1000, window_ms=10_000, max_ms=11_000) == 5000
    # bounded by the whole measurement span
    assert throttle_time_ms(rate=10**9, quota=1, window_ms=10_000, max_ms=11_000) == 11_000


class FakeStore:
    def __init__(self, quotas=None):
        self.quotas = dict(quotas or {})
        self.version = 0

    def set(self, entity, configs):
        self.quotas[entity] = configs
        self.version += 1


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_no_quota_records_nothing_and_throttles_nobody():
    manager = QuotaManager(FakeStore(), 11, 1)
    assert manager.record(PRODUCE, "User:alice", "app", 10**9) == 0
    assert list(manager.collect())[0].samples == []


def test_over_the_quota_the_throttle_follows_kafkas_formula():
    store = FakeStore({Entity(None, "app"): {"producer_byte_rate": 1000.0}})
    clock = Clock()
    manager = QuotaManager(store, 11, 1, clock=clock)
    assert manager.record(PRODUCE, "User:ANONYMOUS", "app", 10_000) == 0  # 1000 B/s over 10 s
    # 15000 B over 10 s = 1500 B/s: (1500 - 1000) / 1000 * 10 s
    assert manager.record(PRODUCE, "User:ANONYMOUS", "app", 5000) == 5000
    assert manager.record(FETCH, "User:ANONYMOUS", "app", 10**9) == 0  # no consumer quota
    assert manager.record(PRODUCE, "User:ANONYMOUS", "other", 10**9) == 0  # another client
    throttled, rates = manager.collect()
    assert [(s.labels, s.value) for s in throttled.samples] == [
        ({"type": "produce", "user": "", "client_id": "app"}, 5.0)
    ]
    assert rates.samples[0].value == 1500.0


def test_a_user_quota_is_shared_by_its_clients_and_a_default_is_each_ones_own():
    store = FakeStore(
        {Entity("alice", None): {"consumer_byte_rate": 1000.0}, Entity(DEFAULT, None): {}}
    )
    manager = QuotaManager(store, 11, 1, clock=Clock())
    manager.record(FETCH, "User:alice", "a", 8000)
    assert manager.record(FETCH, "User:alice", "b", 8000) > 0  # 16 kB over 10 s, shared
    store.set(Entity(DEFAULT, None), {"consumer_byte_rate": 1000.0})
    manager.record(FETCH, "User:bob", "a", 8000)
    assert manager.record(FETCH, "User:carol", "a", 8000) == 0  # carol's own 1000 B/s


def test_a_changed_quota_applies_at_once_and_unrecord_takes_bytes_back():
    store = FakeStore({Entity(None, "app"): {"consumer_byte_rate": 1000.0}})
    manager = QuotaManager(store, 11, 1, clock=Clock())
    assert manager.record(FETCH, "User:u", "app", 20_000) > 0
    manager.unrecord(FETCH, "User:u", "app", 20_000)
    assert manager.record(FETCH, "User:u", "app", 1) == 0
    store.set(Entity(None, "app"), {"consumer_byte_rate": 0.05})
    assert manager.record(FETCH, "User:u", "app", 1) > 0


def test_which_versions_throttle_themselves():
    assert client_throttles(0, 6) and client_throttles(1, 8)
    assert not client_throttles(0, 5) and not client_throttles(1, 7)
