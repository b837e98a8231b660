"""Pure DataFrame -> DataFrame transforms of the nginx ETL (no reads, no writes).

Everything here is built from Spark SQL expressions (no Python UDFs), so the work
stays in the JVM and the same functions serve batch and streaming DataFrames.

Times are in UTC: the jobs' SparkSession sets `spark.sql.session.timeZone=UTC`, so
`date`/`hour` partitions and minute windows are UTC wall-clock.

Accuracy of the approximate figures (documented contract, checked by the tests):
- `unique_clients` is `approx_count_distinct(client, rsd=UNIQUE_RSD)`: HyperLogLog++
  with a relative standard deviation of 2 %; exact for small counts in practice.
- `rt_p50/p95/p99` are `percentile_approx(request_time, ..., PERCENTILE_ACCURACY)`:
  the returned value is an actual sample whose rank is within
  `n / PERCENTILE_ACCURACY` of the exact percentile's rank (n = rows in the group),
  i.e. within 0.01 % of the rows with the default accuracy of 10,000.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

UNIQUE_RSD = 0.02
PERCENTILE_ACCURACY = 10_000
TOP_PATHS = 20

# nginx combined + optional "$request_time $upstream_response_time"; anything after
# them (custom trailing fields) is ignored. nginx writes a `"` inside a field as \x22,
# so a quoted field never contains one.
_Q = r'"([^"]*)"'
LINE_RE = (
    r"^(\S+) \S+ (\S+) \[([^\]]+)\] "
    + _Q
    + r" (\d{3}) (\d+|-) "
    + _Q
    + " "
    + _Q
    + r"(?: (\S+))?(?: (\S+))?.*$"
)
_SEP = "\u0001"
_FIELDS = (
    "client", "user", "time_local", "request", "status", "bytes",
    "referrer", "user_agent", "request_time", "upstream_response_time",
)  # fmt: skip
_REPLACEMENT = _SEP.join(f"${i}" for i in range(1, len(_FIELDS) + 1))
TIME_LOCAL_FORMAT = "dd/MMM/yyyy:HH:mm:ss Z"

JSON_KEYS = (
    "time", "ts", "client", "user", "method", "path", "protocol", "status", "bytes",
    "referrer", "user_agent", "request_time", "upstream_response_time", "host",
)  # fmt: skip
# All strings: from_json then keeps any JSON scalar's text, and try_cast types it, so
# one odd field (e.g. "-" for a number) nulls that field only, never the record.
_JSON_SCHEMA = StructType([StructField(k, StringType()) for k in JSON_KEYS])

PARSED_COLUMNS = (
    "time", "client", "user", "method", "path", "protocol", "status", "bytes",
    "referrer", "user_agent", "request_time", "upstream_response_time", "host",
)  # fmt: skip
KAFKA_COLUMNS = ("topic", "partition", "offset")


def _dash_null(c: Column) -> Column:
    return F.when((c == "-") | (c == ""), None).otherwise(c)


def parse_access(df: DataFrame) -> DataFrame:
    """Parse `value` (raw nginx line or agent JSON record) into typed columns.

    Output: the Kafka coordinates present in the input (topic, partition, offset)
    plus `ingest_time` (the record timestamp, when present), PARSED_COLUMNS,
    `parse_ok` (false for lines neither parser accepts: no valid time or status) and
    `raw` (the original text, kept only when parse_ok is false). Host comes from the
    JSON `host`, else from a record header named `host`.
    """
    # Three projections, so that each costly expression (from_json, the regex) runs
    # once per row: Spark does not merge projections that would repeat them.
    keep = [c for c in KAFKA_COLUMNS if c in df.columns]
    if "timestamp" in df.columns:
        keep.append(F.col("timestamp").alias("ingest_time"))
    if "headers" in df.columns:
        keep.append("headers")
    staged = df.select(*keep, F.col("value").cast("string").alias("_text"))
    staged = staged.withColumn("_is_json", F.ltrim("_text").startswith("{"))
    staged = staged.select(
        "*",
        F.when(F.col("_is_json"), F.from_json("_text", _JSON_SCHEMA)).alias("_j"),
        F.when(
            ~F.col("_is_json"), F.split(F.regexp_replace("_text", LINE_RE, _REPLACEMENT), _SEP)
        ).alias("_parts"),
    )
    is_json, j, parts = F.col("_is_json"), F.col("_j"), F.col("_parts")
    line_ok = F.size(parts) == len(_FIELDS)

    def part(name: str) -> Column:
        return F.when(line_ok, F.get(parts, _FIELDS.index(name)))

    request = F.split(part("request"), " ")
    req_ok = F.size(request) == 3

    def pick(key: str, from_line: Column) -> Column:
        return F.when(is_json, _dash_null(j[key])).otherwise(_dash_null(from_line))

    json_time = F.coalesce(
        F.timestamp_millis(j["ts"].try_cast("long")), F.try_to_timestamp(j["time"])
    )
    line_time = F.try_to_timestamp(part("time_local"), F.lit(TIME_LOCAL_FORMAT))
    header_host = F.lit(None).cast("string")
    if "headers" in df.columns:
        host_header = F.filter("headers", lambda h: h["key"] == "host")
        header_host = F.get(host_header, 0)["value"].cast("string")
    cols = {
        "time": F.when(is_json, json_time).otherwise(line_time),
        "client": pick("client", part("client")),
        "user": pick("user", part("user")),
        "method": pick("method", F.when(req_ok, F.get(request, 0))),
        "path": pick("path", F.when(req_ok, F.get(request, 1))),
        "protocol": pick("protocol", F.when(req_ok, F.get(request, 2))),
        "status": pick("status", part("status")).try_cast("int"),
        "bytes": F.coalesce(pick("bytes", part("bytes")).try_cast("long"), F.lit(0)),
        "referrer": pick("referrer", part("referrer")),
        "user_agent": pick("user_agent", part("user_agent")),
        "request_time": pick("request_time", part("request_time")).try_cast("double"),
        "upstream_response_time": pick(
            "upstream_response_time", part("upstream_response_time")
        ).try_cast("double"),
        "host": F.coalesce(F.when(is_json, _dash_null(j["host"])), header_host),
    }
    passthrough = [c for c in (*KAFKA_COLUMNS, "ingest_time") if c in staged.columns]
    out = staged.select(*passthrough, "_text", *[v.alias(k) for k, v in cols.items()])
    ok = F.col("time").isNotNull() & F.col("status").between(100, 599)
    return (
        out.withColumn("parse_ok", F.coalesce(ok, F.lit(False)))
        .select("*", F.when(~F.col("parse_ok"), F.col("_text")).alias("raw"))
        .drop("_text")
    )


def accepted(parsed: DataFrame) -> DataFrame:
    return _where_parsed(parsed, F.col("parse_ok"))


def rejected(parsed: DataFrame) -> DataFrame:
    return _where_parsed(parsed, ~F.col("parse_ok"))


def _where_parsed(parsed: DataFrame, keep: Column) -> DataFrame:
    """`parsed.where(keep)` without parsing again.

    Spark's optimizer pushes a filter below the projections it reads from,
    replacing each column by the expression that computes it, whatever its cost: a
    plain `where(parse_ok)` would run the regex and from_json inside the filter,
    several times per row (17 regexp_replace in the physical plan instead of 1, and
    about 3x the CPU of the parse itself). A filter never moves below a projection
    holding a nondeterministic column, so one is put there (`spark_partition_id()`,
    a field read) and the filter refers to it so that column pruning keeps it.
    """
    barrier = "_parsed_barrier"
    return (
        parsed.withColumn(barrier, F.spark_partition_id())
        .where(keep & (F.col(barrier) >= 0))
        .drop(barrier)
    )


def with_hour(parsed: DataFrame) -> DataFrame:
    """Add `date` (yyyy-MM-dd) and `hour` (0-23) of `time`: the output partitioning."""
    return parsed.withColumn("date", F.date_format("time", "yyyy-MM-dd")).withColumn(
        "hour", F.hour("time")
    )


def _plain_counts() -> list[Column]:
    """requests, status_2xx..status_5xx, bytes: a few longs of state per group."""
    status = F.col("status")
    classes = [
        F.count(F.when(status.between(c * 100, c * 100 + 99), 1)).alias(f"status_{c}xx")
        for c in (2, 3, 4, 5)
    ]
    return [F.count(F.lit(1)).alias("requests"), *classes, F.sum("bytes").alias("bytes")]


def _counts() -> list[Column]:
    pct = F.percentile_approx("request_time", [0.5, 0.95, 0.99], PERCENTILE_ACCURACY)
    return [
        *_plain_counts(),
        F.approx_count_distinct("client", UNIQUE_RSD).alias("unique_clients"),
        pct.alias("_rt"),
    ]


def _split_percentiles(df: DataFrame) -> DataFrame:
    return (
        df.withColumn("rt_p50", F.col("_rt")[0])
        .withColumn("rt_p95", F.col("_rt")[1])
        .withColumn("rt_p99", F.col("_rt")[2])
        .drop("_rt")
    )


def hourly_stats(parsed: DataFrame) -> DataFrame:
    """Per UTC hour and host: requests, status classes, bytes, unique clients, p50/95/99.

    Unparsable rows are excluded. Columns: date, hour, host, hour_start, requests,
    status_2xx..status_5xx, bytes, unique_clients, rt_p50, rt_p95, rt_p99.
    """
    agg = (
        with_hour(accepted(parsed))
        .groupBy("date", "hour", "host")
        .agg(F.date_trunc("hour", F.min("time")).alias("hour_start"), *_counts())
    )
    return _split_percentiles(agg)


def top_paths(parsed: DataFrame, n: int = TOP_PATHS) -> DataFrame:
    """The `n` most requested paths (query string stripped) per UTC hour and host.

    Columns: date, hour, host, rank (1 = busiest; ties broken by path), path, requests.
    """
    counts = (
        with_hour(accepted(parsed))
        .where(F.col("path").isNotNull())
        .withColumn("path", F.regexp_replace("path", r"\?.*$", ""))
        .groupBy("date", "hour", "host", "path")
        .agg(F.count(F.lit(1)).alias("requests"))
    )
    order = Window.partitionBy("date", "hour", "host").orderBy(F.desc("requests"), "path")
    return (
        counts.withColumn("rank", F.row_number().over(order))
        .where(F.col("rank") <= n)
        .select("date", "hour", "host", "rank", "path", "requests")
    )


MINUTE_ROW_COLUMNS = ("minute", "host", "status", "bytes", "client", "request_time")


def minute_rows(parsed: DataFrame) -> DataFrame:
    """What the realtime job keeps of each parsed row: `parse_ok`, `minute` (the
    start of its one-minute window, epoch seconds), `time_ms` (event time, epoch
    milliseconds), then host, status, bytes, client and request_time (what the
    final figures need). Unparsable rows keep parse_ok false and nulls. No filter, so
    nothing here makes Spark parse a row twice."""
    return parsed.select(
        "parse_ok",
        F.unix_seconds(F.date_trunc("minute", "time")).alias("minute"),
        F.unix_millis("time").alias("time_ms"),
        *MINUTE_ROW_COLUMNS[1:],
    )


def to_json_value(stats: DataFrame) -> DataFrame:
    """One JSON document per row in a `value` column (and `key` = host), for a topic."""
    return stats.select(
        F.col("host").alias("key"), F.to_json(F.struct(*stats.columns)).alias("value")
    )
