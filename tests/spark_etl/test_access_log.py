"""The Arrow access-record parser (pure: no Spark, no broker)."""

import re
from datetime import UTC, datetime

import orjson
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_etl import access_log as A
from spark_etl import loggen

SPEC = re.compile(A.LINE_SPEC)
LINE = (
    '203.0.113.7 - alice [01/May/2024:10:15:30 +0200] "GET /a/b?x=1 HTTP/1.1" 404 512 '
    '"https://ref.example/" "curl/8.5.0" 0.125 -'
)


def parse(values, headers=None):
    arrays = [pa.array(values, pa.binary())]
    names = ["value"]
    if headers is not None:
        arrays.append(pa.array(headers, A_HEADERS))
        names.append("headers")
    return A.parse_batch(pa.RecordBatch.from_arrays(arrays, names=names)).to_pylist()


A_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def absent(v):
    return None if v in ("-", "", None) else v


def expected_from_spec(text: str) -> dict | None:
    """What LINE_SPEC's capture groups say the fields of `text` are (None: no match)."""
    m = SPEC.match(text)
    if m is None:
        return None
    client, user, _time, request, status, size, referrer, agent, rt, urt = m.groups()
    words = request.split(" ")
    method, path, protocol = words if len(words) == 3 else (None, None, None)

    def number(v):
        try:
            return float(v) if re.fullmatch(A._NUMBER, v or "") else None
        except ValueError:
            return None

    return {
        "client": absent(client),
        "user": absent(user),
        "method": absent(method),
        "path": absent(path),
        "protocol": absent(protocol),
        "status": int(status),
        # more digits than any int64 has: unreadable, as absent
        "bytes": 0 if size == "-" or len(size) > 18 else int(size),
        "referrer": absent(referrer),
        "user_agent": absent(agent),
        "request_time": number(rt),
        "upstream_response_time": number(urt),
    }


def test_line_fields_times_and_absent_values():
    row = parse([LINE.encode()])[0]
    assert row["time"] == datetime(2024, 5, 1, 8, 15, 30, tzinfo=UTC)
    assert (row["client"], row["user"], row["method"], row["path"], row["protocol"]) == (
        "203.0.113.7",
        "alice",
        "GET",
        "/a/b?x=1",
        "HTTP/1.1",
    )
    assert (row["status"], row["bytes"], row["referrer"], row["user_agent"]) == (
        404,
        512,
        "https://ref.example/",
        "curl/8.5.0",
    )
    assert (row["request_time"], row["upstream_response_time"]) == (0.125, None)
    assert row["parse_ok"] and row["raw"] is None and row["host"] is None


def test_garbage_is_kept_raw_and_invalid_utf8_does_not_fail_the_batch():
    values = [b"\xff\xfe not text", b"", b"GET / HTTP/1.1", LINE.encode(), b"{broken json"]
    rows = parse(values)
    assert [r["parse_ok"] for r in rows] == [False, False, False, True, False]
    assert rows[0]["raw"] == "\ufffd\ufffd not text" and rows[1]["raw"] == ""
    assert rows[4]["raw"] == "{broken json" and rows[4]["status"] is None


def test_status_out_of_range_or_bad_time_is_unparsable():
    bad_status = LINE.replace(" 404 ", " 999 ")
    bad_time = LINE.replace("01/May/2024", "41/Foo/2024")
    rows = parse([bad_status.encode(), bad_time.encode()])
    assert [r["parse_ok"] for r in rows] == [False, False]
    assert rows[0]["status"] == 999 and rows[1]["time"] is None


def test_json_records_any_scalar_and_time_sources():
    docs = [
        {"ts": 1714552200000, "status": 201, "bytes": "10", "client": "c1", "host": "web9"},
        {"time": "2024-05-01T08:30:00+02:00", "status": "200", "request_time": 0.5},
        {"time": "2024-05-01 08:30:00", "status": 200, "bytes": "-", "user": "-"},
        {"status": 200},
        ["not", "an", "object"],
    ]
    rows = parse([orjson.dumps(d) for d in docs], headers=[[("host", b"hdr")]] * 5)
    assert rows[0]["time"] == datetime(2024, 5, 1, 8, 30, tzinfo=UTC)
    assert (rows[0]["status"], rows[0]["bytes"], rows[0]["host"]) == (201, 10, "web9")
    assert rows[1]["time"] == datetime(2024, 5, 1, 6, 30, tzinfo=UTC)
    assert rows[1]["request_time"] == 0.5 and rows[1]["host"] == "hdr"
    assert rows[2]["time"] == datetime(2024, 5, 1, 8, 30, tzinfo=UTC)
    assert rows[2]["bytes"] == 0 and rows[2]["user"] is None
    assert [r["parse_ok"] for r in rows] == [True, True, True, False, False]


def test_json_records_among_lines_have_only_their_own_fields():
    lookalike = "{x}" + LINE[len("203.0.113.7") :]  # JSON by its first character
    assert SPEC.match(lookalike)
    rows = parse([LINE.encode(), lookalike.encode(), orjson.dumps({"status": 200})])
    assert rows[0] == parse([LINE.encode()])[0]
    assert all(rows[1][k] is None for k in A.PARSED_TYPES if k != "bytes")
    assert (rows[1]["bytes"], rows[1]["parse_ok"], rows[1]["raw"]) == (0, False, lookalike)
    assert (rows[2]["status"], rows[2]["client"], rows[2]["bytes"]) == (200, None, 0)
    assert rows[2]["time"] is None and not rows[2]["parse_ok"]


def test_first_host_header_wins_and_missing_headers_are_null():
    headers = [[("x", b"1"), ("host", b"a"), ("host", b"b")], None, [], [("host", b"c")]]
    rows = parse([LINE.encode()] * 4, headers=headers)
    assert [r["host"] for r in rows] == ["a", None, None, "c"]


def test_passthrough_columns_and_schema():
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([LINE.encode()], pa.binary()),
            pa.array(["t"]),
            pa.array([3], pa.int32()),
            pa.array([7], pa.int64()),
            pa.array([0], pa.timestamp("us", tz="UTC")),
        ],
        names=["value", "topic", "partition", "offset", "timestamp"],
    )
    out = A.parse_batch(batch)
    assert out.schema == A.output_schema(["topic", "partition", "offset", "ingest_time"])
    assert out.to_pylist()[0]["offset"] == 7


def test_loggen_lines_match_the_generator_truth():
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    items = list(
        loggen.generate(
            t0, t0.replace(minute=5), 2000, seed=3, bad_ratio=0.05, tz_offset_minutes=90
        )
    )
    rows = parse([item.line().encode() for item in items])
    for item, row in zip(items, rows, strict=True):
        if isinstance(item, loggen.Garbage):
            assert not row["parse_ok"], item
            continue
        assert row["parse_ok"] and row["time"] == item.time.astimezone(UTC)
        assert (row["status"], row["bytes"], row["client"]) == (
            item.status,
            item.bytes,
            item.client,
        )


BLANKS = st.sampled_from([" ", "  ", "\t", "", "-", '"', "]", "[", "x"])
FIELD = st.text(alphabet=st.sampled_from('ab-"[] \t0.9'), max_size=6)


@settings(max_examples=400, deadline=None)
@given(
    client=FIELD,
    user=FIELD,
    request=FIELD,
    status=st.sampled_from(["200", "404", "99", "2000", "abc"]),
    size=st.sampled_from(["0", "512", "-", "x", "9" * 18, "1" + "0" * 18]),
    referrer=FIELD,
    agent=FIELD,
    tail=st.lists(st.one_of(FIELD, BLANKS), max_size=4).map("".join),
)
def test_splits_agree_with_the_specification(
    client, user, request, status, size, referrer, agent, tail
):
    text = (
        f'{client} - {user} [01/May/2024:10:15:30 +0000] "{request}" {status} {size} '
        f'"{referrer}" "{agent}"{tail}'
    )
    row = parse([text.encode()])[0]
    want = expected_from_spec(text)
    if want is None:
        assert not row["parse_ok"] and row["raw"] == text
        return
    assert {k: row[k] for k in want} == want
