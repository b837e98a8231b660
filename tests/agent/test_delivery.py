"""Unit tests of agent/delivery.py: the batch encoder gives what the per-event one
does, for every format."""

import orjson
import pytest

from agent.api import Event
from agent.delivery import encode_all, encoder

HEADERS = {"source": "logs", "host": "web1"}


def events() -> list[Event]:
    return [
        Event(b"GET /a 200", HEADERS, {"path": "/a", "status": 200}),
        Event(b"not a line \xff", HEADERS),  # unparsed, and not UTF-8
        Event(b"GET /b 404", HEADERS, {"path": "/b", "status": 404, "ts": 1_728_518_400_000}),
    ]


@pytest.mark.parametrize("fmt", ["raw", "auto", "json"])
def test_a_batch_is_encoded_as_each_event_is(fmt):
    batch = events()
    one = encoder(fmt)
    assert encode_all(fmt, batch) == [one(e) for e in batch]


def test_json_wraps_an_unparsed_line_with_its_headers():
    out = encode_all("json", events())
    assert orjson.loads(out[0]) == {"path": "/a", "status": 200}
    assert orjson.loads(out[1]) == {"message": "not a line \ufffd", **HEADERS}


def test_raw_and_auto_keep_the_line_when_nothing_parsed_it():
    batch = events()
    assert encode_all("raw", batch) == [e.body for e in batch]
    assert encode_all("auto", batch)[1] == batch[1].body
    assert orjson.loads(encode_all("auto", batch)[2])["status"] == 404
