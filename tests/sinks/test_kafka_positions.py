"""The exactly-once sink's positions: what a transaction records with its records,
and how the committed ones are read back (sinks/kafka/positions.py, pure parts)."""

import orjson

from agent.api import Ack, Event
from sinks.kafka import KafkaSink
from sinks.kafka.positions import CommittedPositions, last_marks, position_key
from tests.agent.helpers import context


class _Take:
    def __init__(self, events, end_seq=None):
        self.events, self.end_seq = events, end_seq


def _unit(n, source, key, offset):
    ack = Ack(lambda: None, n, (source, key, [offset, 16, 1234, "/var/log/a.log"]))
    return [Event(b"x", ack=ack) for _ in range(n)]


def test_last_mark_per_source_and_key_wins():
    events = (
        _unit(2, "tail", "8:1", 100) + _unit(3, "tail", "8:2", 50) + _unit(1, "tail", "8:1", 180)
    )
    events += [Event(b"no ack")]
    assert last_marks(events) == {
        ("tail", "8:1"): [180, 16, 1234, "/var/log/a.log"],
        ("tail", "8:2"): [50, 16, 1234, "/var/log/a.log"],
    }


def test_records_round_trip_through_the_topic_and_ignore_other_ids():
    mine = CommittedPositions("logflume-a-k", "chan-1")
    take = _Take(_unit(2, "tail", "8:1", 100), end_seq=42)
    records = mine.records_for(take)
    assert sorted(k for k, _ in records) == sorted(
        [
            position_key("logflume-a-k", "channel"),
            position_key("logflume-a-k", "mark", "tail", "8:1"),
        ]
    )
    reread = CommittedPositions("logflume-a-k", "chan-1")
    other = CommittedPositions("logflume-b-k", "chan-1")
    wiped = CommittedPositions("logflume-a-k", "chan-2")  # the channel was made again
    for key, value in records:
        for p in (reread, other, wiped):
            p.load(key, value)
    assert reread.end_seq == 42
    assert wiped.end_seq is None and wiped.marks == reread.marks
    assert reread.marks == {"tail": {"8:1": [100, 16, 1234, "/var/log/a.log"]}}
    assert (other.end_seq, other.marks) == (None, {})


def test_later_records_replace_earlier_ones_and_junk_is_ignored():
    p = CommittedPositions("t", "c")
    key = orjson.dumps(["t", "channel"])
    p.load(b"not json", b"1")
    p.load(None, b"a record without a key")  # someone else's: ignored, not a crash
    p.load(key, orjson.dumps({"identity": "c", "end_seq": 10}))
    p.apply([(key, orjson.dumps({"identity": "c", "end_seq": 20}))])
    p.load(key, None)  # a tombstone keeps the last value
    assert p.end_seq == 20


def test_the_default_transactional_id_holds_the_host_name(tmp_path, monkeypatch):
    """Hosts installed from one pipelines.yaml get ids of their own (so positions of
    their own: the keys above start with the id), unless the file names one."""
    config = KafkaSink.Config(topic="t", delivery="exactly_once")
    sink = KafkaSink(config, context(tmp_path, "k"))
    monkeypatch.setenv("HOST", "web7")
    assert sink.transactional_id == "logflume-web7-test-k"
    monkeypatch.setenv("HOST", "web8")
    assert sink.transactional_id == "logflume-web8-test-k"
    config.transactional_id = "logflume-test-k"  # an upgraded agent keeping its old id
    assert sink.transactional_id == "logflume-test-k"
