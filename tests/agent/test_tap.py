"""agent/tap.py without sockets: who may tap, what the hot path checks, and that a
slow reader loses samples instead of holding the pipeline."""

from agent.api import Event
from agent.metrics import Registry
from agent.tap import QUEUE_EVENTS, Taps, is_loopback


def test_only_loopback_listeners_may_serve_the_tap():
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "web1.example.com", ""):
        assert not is_loopback(host), host


def test_nobody_tapping_is_one_false_attribute():
    registry = Registry()
    taps = Taps(registry)
    assert taps.active is False
    client = taps.subscribe("source", "udp")
    assert taps.active is True
    assert registry.value("logflume_agent_tap_clients") == 1
    taps.unsubscribe(client)
    assert taps.active is False
    assert registry.value("logflume_agent_tap_clients") == 0


def test_a_slow_reader_loses_samples_and_they_are_counted():
    registry = Registry()
    taps = Taps(registry)
    client = taps.subscribe("source", "udp")
    other = taps.subscribe("channel", "c")
    events = [Event(b"line %d" % i) for i in range(QUEUE_EVENTS + 10)]
    taps.sample("source", "udp", events)  # returns at once, whatever the client reads
    taps.sample("source", "udp", events[:5])
    assert [e.body for e in client.queue] == [e.body for e in events[:QUEUE_EVENTS]]
    assert client.dropped == 15 and client.wake.is_set()
    assert not other.queue and other.dropped == 0
    assert registry.value("logflume_agent_tap_dropped_total") == 15
    assert registry.value("logflume_agent_tap_clients") == 2
