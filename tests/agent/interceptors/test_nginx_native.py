"""The C parser of plain `combined` lines (native/nginxparse) against the reference
(agent/interceptors/nginx.py): every line gets the same record, time and parse error
from both, whichever of the two took it; and the C parser does take the plain lines."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from logflume_nginxparse import parse_combined

from agent.api import Event
from agent.interceptors.nginx import NginxParser
from spark_etl.loggen import lines
from tests.sources.harness import make_context

PLAIN = (
    b'203.0.113.9 - alice [10/Oct/2000:13:55:36 -0700] "GET /a.gif?a=1 HTTP/1.0" 200 2326 '
    b'"http://www.example.com/start.html" "Mozilla/5.0 (X11)"'
)


def outcome(lines: list[bytes], native: bool, fmt: str = "combined"):
    """(record, time, headers) of each line through a parser with or without C."""
    p = NginxParser(NginxParser.Config(format=fmt), make_context("/nonexistent", "p"))
    p._native = parse_combined if native else None
    events = p.intercept([Event(line) for line in lines])
    return [(e.record, e.time, e.headers) for e in events]


def same(lines: list[bytes], fmt: str = "combined") -> None:
    native, reference = outcome(lines, True, fmt), outcome(lines, False, fmt)
    for line, a, b in zip(lines, native, reference, strict=True):
        assert a == b, line
        assert [type(v) for v in (a[0] or {}).values()] == [type(v) for v in (b[0] or {}).values()]


def test_the_generators_lines_are_all_taken_and_parsed_alike():
    start = datetime(2024, 10, 10, tzinfo=UTC)
    sample = [line.encode() for line in lines(start, start + timedelta(hours=1), 5000)]
    events = [Event(line) for line in sample]
    left = parse_combined(events, False)
    bad = [i for i, line in enumerate(sample) if b"[" not in line or line.count(b'"') != 6]
    assert set(left) <= set(range(len(sample))) and len(left) <= len(bad) + len(sample) // 100
    same(sample)
    same(sample, "combined_timed")


def test_lines_it_leaves_to_the_reference():
    odd = [
        b"",
        b"garbage",
        PLAIN.replace(b"alice", b"\xc3\xa9"),  # not ASCII: decoded with backslashreplace
        PLAIN.replace(b"Mozilla", b'Mo\\"zilla'),  # an escaped quote: the second regex's
        PLAIN + b" 0.1 0.2, 0.3",  # a list of upstream times
        PLAIN + b" 0.1 0.2 : 0.3",
        PLAIN.replace(b"Oct", b"Foo"),
        PLAIN.replace(b"13:55", b"13x55"),  # the reference does not look at this colon
        PLAIN.replace(b"2000", b"0000"),
        PLAIN + b" 1.2.3",
        PLAIN + b" .",
        PLAIN + b" 0.1 1-2",
        PLAIN.replace(b" 2326 ", b" 1234567890123456789012 "),
    ]
    events = [Event(line) for line in odd]
    assert parse_combined(events, False) == list(range(len(odd)))
    same(odd)


def test_plain_variants_are_taken():
    variants = [
        PLAIN,
        PLAIN + b" 0.017 -",
        PLAIN + b" - -",
        PLAIN + b" 0.5 0.25 \t\r",
        PLAIN + b" 5.",
        PLAIN.replace(b'"GET /a.gif?a=1 HTTP/1.0"', b'"\\x16\\x03"'),  # no method
        PLAIN.replace(b'"GET /a.gif?a=1 HTTP/1.0"', b'"GET /"'),
        PLAIN.replace(b'"GET /a.gif?a=1 HTTP/1.0"', b'"A B C D"'),
        PLAIN.replace(b'"GET /a.gif?a=1 HTTP/1.0"', b'""'),
        PLAIN.replace(b"10/Oct/2000", b"31/Feb/2024").replace(b"13:55:36", b"23:59:60"),
        PLAIN.replace(b"-0700", b"+9999"),
        PLAIN.replace(b" 2326 ", b" - ").replace(b"alice", b"-"),
        PLAIN.replace(b"203.0.113.9", b"2001:db8::1\x00"),
    ]
    events = [Event(line) for line in variants]
    assert parse_combined(events, False) == []
    same(variants)
    assert outcome([PLAIN], True, "combined_timed")[0][0] is None  # no $request_time


FIELDS = {
    "client": ["1.2.3.4", "::1", "-", "", "a b", "x\ty"],
    "ident": ["-", "x", ""],
    "user": ["-", "bob", "", "é"],
    "time": [
        "10/Oct/2000:13:55:36 -0700",
        "01/Jan/1970:00:00:00 +0000",
        "31/Dec/9999:23:59:59 -1200",
        "00/Jan/2024:00:00:00 +0000",
        "32/Jan/2024:00:00:00 +0000",
        "01/jan/2024:00:00:00 +0000",
        "01/Jan/2024:24:00:00 +0000",
        "01/Jan/2024:00:60:00 +0000",
        "01/Jan/2024:00:00:61 +0000",
        "01/Jan/2024:00:00:00 *0000",
        "1_/Jan/2024:00:00:00 +0000",
        " 1/Jan/2024:00:00:00 +0000",
        "01/Jan/2024:00:00:00 +00000",
        "",
    ],
    "request": ["GET / HTTP/1.1", "GET /", "", "X", "A  B", "a]b", 'q\\"', "\\x22"],
    "status": ["200", "404", "99", "1000", "0x1", "-"],
    "bytes": ["0", "123", "-", "007", "", "--", "1e3"],
    "referrer": ["-", "http://x/", "", "\\", "é"],
    "agent": ["-", "curl/8", "", "a\\x22b", "tab\there"],
    "tail": [
        "",
        " ",
        "\t",
        " 0.1",
        " -",
        " 0.1 0.2",
        " - 0.3",
        " 0.1 -",
        " 0.1 0.2, 0.3",
        " 0.1 0.2 : -",
        "  0.1",
        " 0.1  0.2",
        " 0.1 \t0.2",
        " x",
        " 0.1 0.2 0.3",
        " 1..2",
        " 0.1 -1",
        "\r",
        " 0.1\n",
    ],
}


@settings(max_examples=600, deadline=None)
@given(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in FIELDS.items()}), st.data())
def test_generated_lines_agree(f, data):
    line = (
        f'{f["client"]} {f["ident"]} {f["user"]} [{f["time"]}] "{f["request"]}" {f["status"]} '
        f'{f["bytes"]} "{f["referrer"]}" "{f["agent"]}"{f["tail"]}'
    ).encode()
    # and the same line with one byte changed, dropped or added somewhere
    at = data.draw(st.integers(0, len(line)))
    byte = bytes([data.draw(st.integers(0, 255))])
    edits = [
        line[:at] + byte + line[at + 1 :],
        line[:at] + line[at + 1 :],
        line[:at] + byte + line[at:],
    ]
    same([line, *edits])
    same([line, *edits], "combined_timed")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=5))
def test_random_bytes_agree(bodies):
    same(bodies)
