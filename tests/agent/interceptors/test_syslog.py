"""syslog parser: RFC 5424 and RFC 3164 examples, failures kept, random input."""

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.api import Event
from agent.interceptors.syslog import SyslogParser, bsd_timestamp, parse
from tests.sources.harness import FakeMetrics, make_context

NOW = dt.datetime(2024, 6, 15, 12, 0, 0)


def test_rfc5424_examples_from_the_rfc():
    r = parse(
        "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - "
        "\ufeff'su root' failed for lonvick on /dev/pts/8",
        NOW,
    )
    assert r["pri"] == 34 and r["facility"] == 4 and r["severity"] == 2 and r["version"] == 1
    assert r["timestamp"] == "2003-10-11T22:14:15.003Z" and r["hostname"] == "mymachine.example.com"
    assert r["app_name"] == "su" and r["procid"] is None and r["msgid"] == "ID47"
    assert r["structured_data"] is None
    assert r["message"] == "'su root' failed for lonvick on /dev/pts/8"
    r = parse(
        "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 "
        '[exampleSDID@32473 iut="3" eventSource="App\\"lication" eventID="1011"]'
        '[examplePriority@32473 class="high"] An application event',
        NOW,
    )
    assert r["structured_data"].startswith('[exampleSDID@32473 iut="3"')
    assert r["structured_data"].endswith('[examplePriority@32473 class="high"]')
    assert r["message"] == "An application event" and r["severity"] == 5
    r = parse("<13>1 - - - - - -", NOW)
    assert r["timestamp"] is None and r["message"] is None


def test_rfc3164_examples():
    r = parse("<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick", NOW)
    assert r["format"] == "rfc3164" and r["timestamp"] == "2023-10-11T22:14:15"
    assert r["hostname"] == "mymachine" and r["app_name"] == "su" and r["procid"] is None
    assert r["message"] == "'su root' failed for lonvick"
    r = parse("<13>Jun  5 01:02:03 web01 nginx[1234]: worker started", NOW)
    assert r["timestamp"] == "2024-06-05T01:02:03" and r["procid"] == "1234"
    assert r["app_name"] == "nginx" and r["message"] == "worker started"


def test_year_rollover():
    assert bsd_timestamp("Dec", "31", "23", "59", "59", dt.datetime(2024, 1, 1)) == (
        "2023-12-31T23:59:59"
    )


def test_the_event_time_is_the_messages_own():
    p = SyslogParser(SyslogParser.Config(), make_context("/x", "s", FakeMetrics()))
    zoned, nil, bsd, bad = p.intercept(
        [
            Event(b"<34>1 2003-10-11T22:14:15.003Z host su - ID47 - hi"),
            Event(b"<13>1 - - - - - -"),
            Event(b"<13>Jun  5 01:02:03 web01 nginx[1234]: worker started"),
            Event(b"not syslog"),
        ]
    )
    assert zoned.time == 1065910455003
    assert nil.time is None and bad.time is None
    year = dt.datetime.now().year
    stamp = dt.datetime.fromisoformat(bsd.record["timestamp"])  # the agent's time zone
    assert stamp.year in (year - 1, year) and bsd.time == int(stamp.timestamp() * 1000)


def test_failures_flagged_and_counted():
    metrics = FakeMetrics()
    p = SyslogParser(SyslogParser.Config(), make_context("/x", "s", metrics))
    events = [Event(b"no pri here"), Event(b"<999>1 - - - - - -"), Event(b"<13>Foo 1 x")]
    out = p.intercept(events)
    assert all(e.record is None and e.headers["parse_error"].startswith("syslog") for e in out)
    assert metrics.value("logflume_agent_parse_errors_total", parser="syslog") == 3


def test_format_option_restricts():
    line = "<34>Oct 11 22:14:15 mymachine su: x"
    assert isinstance(parse(line, NOW, "rfc5424"), str)
    assert isinstance(parse(line, NOW, "rfc3164"), dict)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_input_never_raises(data):
    p = SyslogParser(SyslogParser.Config(), make_context("/x", "s"))
    e = p.intercept([Event(b"<13>" + data)])[0]
    assert e.record is not None or "parse_error" in e.headers
