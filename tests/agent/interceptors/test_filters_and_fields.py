"""json parser, add_fields and regex_filter."""

from agent.api import Ack, Event
from agent.interceptors.add_fields import AddFields
from agent.interceptors.jsonparse import JsonParser
from agent.interceptors.regex_filter import RegexFilter
from tests.sources.harness import FakeMetrics, make_context


def ctx(metrics=None):
    return make_context("/nonexistent", "i", metrics)


def test_json_objects_and_failures():
    metrics = FakeMetrics()
    p = JsonParser(JsonParser.Config(), ctx(metrics))
    out = p.intercept([Event(b'{"a": 1}'), Event(b"[1]"), Event(b"{nope"), Event(b"")])
    assert out[0].record == {"a": 1} and "parse_error" not in out[0].headers
    assert out[1].headers["parse_error"] == "json: expected an object, got list"
    assert out[2].headers["parse_error"] == "json: invalid JSON"
    assert len(out) == 4 and metrics.value("logflume_agent_parse_errors_total") == 3


def test_add_fields_headers_and_record():
    cfg = AddFields.Config(
        fields={"env": "prod", "dc": 3}, host=True, timestamp=True, target="both"
    )
    a = AddFields(cfg, ctx())
    parsed = Event(b"x", {}, {"k": 1})
    raw = Event(b"y")
    a.intercept([parsed, raw])
    assert parsed.headers["env"] == "prod" and parsed.headers["dc"] == "3"
    assert parsed.record["dc"] == 3 and parsed.record["host"] == parsed.headers["host"]
    assert parsed.record["timestamp"].endswith("Z") and "T" in parsed.record["timestamp"]
    assert raw.record is None and raw.headers["env"] == "prod"
    assert AddFields.validate(AddFields.Config())


def test_regex_filter_include_exclude_settles_dropped():
    settled = []
    ack = Ack(lambda: settled.append(True), copies=3)
    events = [Event(b"GET /health", ack=ack), Event(b"GET /x", ack=ack), Event(b"POST /y", ack=ack)]
    metrics = FakeMetrics()
    f = RegexFilter(RegexFilter.Config(pattern="/health", mode="exclude"), ctx(metrics))
    kept = f.intercept(events)
    assert [e.body for e in kept] == [b"GET /x", b"POST /y"]
    assert metrics.value("logflume_agent_filtered_out_total") == 1
    for e in kept:
        e.settle()
    assert settled == [True]  # the dropped one was settled by the filter
    inc = RegexFilter(RegexFilter.Config(pattern="^GET"), ctx())
    assert [e.body for e in inc.intercept([Event(b"GET a"), Event(b"PUT b")])] == [b"GET a"]
    by_header = RegexFilter(RegexFilter.Config(pattern="^web", header="host"), ctx())
    out = by_header.intercept(
        [Event(b"1", {"host": "web1"}), Event(b"2", {"host": "db"}), Event(b"3")]
    )
    assert [e.body for e in out] == [b"1"]
    assert RegexFilter.validate(RegexFilter.Config(pattern="("))


def test_shared_headers_are_never_changed_in_place():
    # sources give all events of a batch one headers dict
    shared = {"source": "s", "path": "/var/log/a.log"}
    batch = [Event(b'{"ok": 1}', shared), Event(b"not json", shared), Event(b"{}", shared)]
    JsonParser(JsonParser.Config(), ctx()).intercept(batch)
    assert "parse_error" in batch[1].headers
    assert "parse_error" not in batch[0].headers and "parse_error" not in batch[2].headers
    out = AddFields(AddFields.Config(fields={"env": "prod"}), ctx()).intercept(batch)
    assert shared == {"source": "s", "path": "/var/log/a.log"}
    assert all(e.headers["env"] == "prod" for e in out)
    assert out[0].headers is out[2].headers  # still one dict for the unflagged ones
    assert out[1].headers["parse_error"] == "json: invalid JSON"
