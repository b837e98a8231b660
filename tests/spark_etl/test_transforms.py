"""Pure transforms on small local DataFrames (no broker)."""

from datetime import datetime

import orjson

from spark_etl import transforms as T

LINE = (
    '203.0.113.7 - alice [01/May/2024:10:15:30 +0200] "GET /a/b?x=1 HTTP/1.1" 404 512 '
    '"https://ref.example/" "curl/8.5.0" 0.125 -'
)
COMBINED_ONLY = '10.0.0.1 - - [01/May/2024:08:00:00 +0000] "-" 400 0 "-" "-"'
RECORD = {
    "time": "2024-05-01T08:30:00+00:00", "ts": 1714552200000, "client": "10.0.0.2",
    "user": None, "method": "POST", "path": "/api", "protocol": "HTTP/2.0", "status": 201,
    "bytes": 10, "referrer": None, "user_agent": "ua", "request_time": 0.5,
    "upstream_response_time": "-", "host": "web9",
}  # fmt: skip


def _parse(spark, values, headers=None):
    rows = [(v.encode(), headers) for v in values]
    schema = "value binary, headers array<struct<key: string, value: binary>>"
    return {
        r.raw or r.client: r for r in T.parse_access(spark.createDataFrame(rows, schema)).collect()
    }


def test_parses_lines_json_and_flags_garbage(spark):
    got = _parse(
        spark,
        [LINE, COMBINED_ONLY, orjson.dumps(RECORD).decode(), "garbage", '{"not": "a record"}'],
        headers=[("host", b"from-header")],
    )
    line = got["203.0.113.7"]
    assert line.time == datetime(2024, 5, 1, 8, 15, 30)  # UTC session time zone
    assert (line.user, line.method, line.path, line.protocol) == (
        "alice",
        "GET",
        "/a/b?x=1",
        "HTTP/1.1",
    )
    assert (line.status, line.bytes, line.referrer, line.user_agent) == (
        404,
        512,
        "https://ref.example/",
        "curl/8.5.0",
    )
    assert (line.request_time, line.upstream_response_time, line.host) == (
        0.125,
        None,
        "from-header",
    )
    bare = got["10.0.0.1"]
    assert (
        bare.parse_ok and bare.status == 400 and bare.method is None and bare.request_time is None
    )
    rec = got["10.0.0.2"]
    assert rec.time == datetime(2024, 5, 1, 8, 30) and rec.status == 201 and rec.host == "web9"
    assert rec.upstream_response_time is None and rec.request_time == 0.5
    assert not got["garbage"].parse_ok and not got['{"not": "a record"}'].parse_ok
    assert sum(r.parse_ok for r in got.values()) == 3


def test_accepted_and_rejected_rows_parse_each_row_once(spark):
    # A filter on parse_ok must not make Spark parse a row more than once (with
    # the parse in SQL expressions, the optimizer once inlined it 17 times).
    raw = spark.createDataFrame([(LINE.encode(),)], "value binary")
    parsed = T.parse_access(raw)
    for df in (T.minute_rows(parsed), T.accepted(parsed), T.rejected(parsed)):
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert plan.count("MapInArrow") == 1, plan
    assert [r.parse_ok for r in T.minute_rows(parsed).collect()] == [True]
    assert T.rejected(parsed).count() == 0
