"""`strip_query` interceptor: query strings and fragments cut off request paths."""

import pytest

from agent.api import Event
from agent.interceptors.strip_query import StripQuery, strip
from tests.agent.interceptors.pipelines import FIRST_LINE, WHERE, compile_interceptor
from tests.sources.harness import FakeMetrics, make_context

STRIPPED = "logflume_agent_query_stripped_total"


def stripper(metrics=None, **config) -> StripQuery:
    return StripQuery(StripQuery.Config(**config), make_context("/nonexistent", "sq", metrics))


@pytest.mark.parametrize(
    ("path", "stripped"),
    [
        ("/search?q=me&page=2", "/search"),
        ("/docs#install", "/docs"),
        ("/a?b=1#c", "/a"),
        ("/a#c?b=1", "/a"),
        ("/?", "/"),
        ("?x", ""),
        ("/plain/path", "/plain/path"),
        ("/percent%3Fencoded", "/percent%3Fencoded"),
        ("http://example.com/x?y=1", "http://example.com/x"),
        ("", ""),
    ],
)
def test_strip(path, stripped):
    assert strip(path) == stripped


def test_the_path_field_of_parsed_records_by_default_counted_when_changed():
    metrics = FakeMetrics()
    s = stripper(metrics)
    events = [
        Event(b"1", record={"path": "/login?token=s3cret", "referrer": "https://a.example/?q=1"}),
        Event(b"2", record={"path": "/static/app.js"}),
        Event(b"3", record={"path": None, "method": None}),
        Event(b"4", record={"status": 400}),
        Event(b'5 "GET /raw?x=1"'),
    ]
    out = s.intercept(events)
    assert out == events
    assert [e.record and e.record.get("path") for e in events] == [
        "/login",
        "/static/app.js",
        None,
        None,
        None,
    ]
    assert events[0].record["referrer"] == "https://a.example/?q=1"  # not listed
    assert events[3].record == {"status": 400}
    assert events[4].body == b'5 "GET /raw?x=1"' and events[4].record is None
    assert metrics.value(STRIPPED, component="sq") == 1


def test_several_fields_an_event_counted_once():
    metrics = FakeMetrics()
    s = stripper(metrics, fields=["path", "referrer"])
    e = Event(b"", record={"path": "/a?b", "referrer": "https://x.example/p?utm=1#top", "n": 1})
    keep = Event(b"", record={"path": "/a", "referrer": 7})
    s.intercept([e, keep])
    assert e.record == {"path": "/a", "referrer": "https://x.example/p", "n": 1}
    assert keep.record == {"path": "/a", "referrer": 7}
    assert metrics.value(STRIPPED, component="sq") == 1


def test_validate_and_errors():
    assert StripQuery.validate(StripQuery.Config()) == []
    assert StripQuery.validate(StripQuery.Config(fields=[])) == ["fields: empty: name a field"]
    _, errors = compile_interceptor("type: strip_query\nfields: []")
    assert errors == [f"pipelines.yaml:{FIRST_LINE + 1}:21: {WHERE}.fields: empty: name a field"]
    config, errors = compile_interceptor("type: strip_query\nfields: [path, referrer]")
    assert errors == [] and config.fields == ["path", "referrer"]
