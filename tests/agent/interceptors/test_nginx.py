"""nginx access-log parser: golden lines, failures kept and flagged, random input; each
test twice, with the C parser of plain lines (native/nginxparse) and without it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.api import Event
from agent.interceptors import nginx
from agent.interceptors.nginx import NginxParser, parse_seconds, parse_time_local
from tests.sources.harness import FakeMetrics, make_context


@pytest.fixture(autouse=True, params=["native", "reference"])
def implementation(request, monkeypatch):
    """Parsers made in the test use the C parser first, or the reference alone."""
    assert nginx.native_combined is not None, "make test installs native/nginxparse"
    if request.param == "reference":
        monkeypatch.setattr(nginx, "native_combined", None)
    return request.param


UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"


def parser(metrics=None, **config):
    return NginxParser(NginxParser.Config(**config), make_context("/nonexistent", "p", metrics))


def parse_one(line: bytes, **config) -> Event:
    return parser(**config).intercept([Event(line)])[0]


def test_combined_line():
    e = parse_one(
        b'203.0.113.9 - alice [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?a=1 HTTP/1.0" '
        b'200 2326 "http://www.example.com/start.html" "' + UA.encode() + b'"'
    )
    assert e.record == {
        "time": "2000-10-10T13:55:36-07:00",
        "ts": 971211336000,
        "client": "203.0.113.9",
        "user": "alice",
        "method": "GET",
        "path": "/apache_pb.gif?a=1",
        "protocol": "HTTP/1.0",
        "status": 200,
        "bytes": 2326,
        "referrer": "http://www.example.com/start.html",
        "user_agent": UA,
        "request_time": None,
        "upstream_response_time": None,
    }
    assert e.time == 971211336000, "the line's own time: its record's timestamp"
    assert "parse_error" not in e.headers


def test_timed_line_with_dashes_and_ipv6():
    e = parse_one(
        b'2001:db8::1 - - [01/Jan/2024:00:00:00 +0000] "POST /api/v1/items HTTP/2.0" 201 - '
        b'"-" "-" 0.250 0.004, 0.002',
        format="combined_timed",
    )
    r = e.record
    assert r["client"] == "2001:db8::1" and r["user"] is None and r["referrer"] is None
    assert r["user_agent"] is None and r["bytes"] == 0 and r["status"] == 201
    assert r["ts"] == 1704067200000 and r["time"] == "2024-01-01T00:00:00+00:00"
    assert r["request_time"] == 0.25 and r["upstream_response_time"] == 0.006


def test_upstream_dash_and_single():
    base = b'1.2.3.4 - - [01/Jan/2024:00:00:00 +0100] "GET / HTTP/1.1" 304 0 "-" "curl/8"'
    assert parse_one(base + b" 0.000 -").record["upstream_response_time"] is None
    assert parse_one(base + b" 0.010 0.009").record["upstream_response_time"] == 0.009
    assert parse_one(base).record["ts"] == 1704063600000


def test_escaped_quotes_in_user_agent_and_request():
    apache_style = parse_one(
        b'1.2.3.4 - - [01/Jan/2024:00:00:00 +0000] "GET /q?x=\\"y\\" HTTP/1.1" 200 5 '
        b'"-" "Agent \\"quoted\\" v1" 0.001 0.001'
    )
    assert apache_style.record["user_agent"] == 'Agent \\"quoted\\" v1'
    assert apache_style.record["path"] == '/q?x=\\"y\\"'
    nginx_style = parse_one(
        b'1.2.3.4 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "A \\x22q\\x22"'
    )
    assert nginx_style.record["user_agent"] == "A \\x22q\\x22"


def test_odd_requests_are_kept():
    line = b'1.2.3.4 - - [01/Jan/2024:00:00:00 +0000] "\\x16\\x03\\x01" 400 150 "-" "-"'
    r = parse_one(line).record
    assert r["method"] is None and r["path"] == "\\x16\\x03\\x01" and r["status"] == 400


def test_garbage_is_flagged_and_kept():
    metrics = FakeMetrics()
    events = [Event(b"garbage line"), Event(b"")]
    events.append(Event(b'1.2.3.4 - - [99/Foo/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "-"'))
    out = parser(metrics).intercept(events)
    assert out == events
    assert all(e.record is None and e.headers["parse_error"].startswith("nginx:") for e in out)
    assert "time" in out[2].headers["parse_error"]
    assert metrics.value("logflume_agent_parse_errors_total", parser="nginx") == 3


def test_combined_timed_requires_the_timing_fields():
    e = parse_one(
        b'1.2.3.4 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "-"',
        format="combined_timed",
    )
    assert e.record is None and "request_time" in e.headers["parse_error"]


def test_custom_regex_format():
    p = parser(format="regex", pattern=r"(?P<client>\S+) (?P<status>\d+) (?P<request_time>\S+)")
    r = p.intercept([Event(b"10.0.0.1 503 0.5")])[0].record
    assert r == {"client": "10.0.0.1", "status": 503, "request_time": 0.5}
    assert NginxParser.validate(NginxParser.Config(format="regex"))[0].startswith("pattern")
    assert NginxParser.validate(NginxParser.Config(format="regex", pattern="(x)"))


def test_helpers():
    assert parse_time_local("10/Oct/2000:13:55:36 -0700")[1] == 971211336000
    assert parse_seconds("0.1 : 0.2") == 0.3 and parse_seconds("-") is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_input_never_raises(data):
    e = parser().intercept([Event(data)])[0]
    assert e.record is not None or "parse_error" in e.headers


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"\A[0-9a-f:.]{1,39}\Z"),
    st.text(alphabet=st.characters(blacklist_characters='"\\\n', codec="utf-8"), max_size=80),
    st.integers(100, 599),
    st.integers(0, 10**9),
)
def test_generated_valid_lines_parse(client, agent, status, size):
    line = (
        f'{client} - - [05/Mar/2023:07:08:09 +0530] "GET /x HTTP/1.1" {status} {size} "-" "{agent}"'
    )
    r = parser().intercept([Event(line.encode())])[0].record
    assert r is not None
    assert (r["client"], r["status"], r["bytes"]) == (client, status, size)
    assert r["user_agent"] == (None if agent == "-" else agent)


def test_matches_the_traffic_generator_ground_truth():
    from datetime import UTC, datetime, timedelta

    from spark_etl.loggen import Access, generate

    start = datetime(2024, 10, 10, 13, 0, tzinfo=UTC)
    items = list(
        generate(
            start, start + timedelta(hours=1), 3000, seed=7, bad_ratio=0.05, tz_offset_minutes=330
        )
    )
    out = parser().intercept([Event(item.line().encode()) for item in items])
    for item, e in zip(items, out, strict=True):
        if isinstance(item, Access):
            assert e.record == item.record(), item.line()
        else:
            assert e.record is None and "parse_error" in e.headers, item.line()
