"""The nginx access-record parser, on Arrow record batches (vectorized, no per-line Python).

`transforms.parse_access` runs `parse_batch` over a DataFrame with `mapInArrow`. The
same parse as Spark SQL expressions (a regex and a timestamp pattern per row, many
conditional expressions Spark cannot share) cost ~60 us of JVM CPU per line; here it
is a handful of Arrow kernels over the whole batch, a few microseconds per line
including the JVM <-> Python hop.

A raw line is nginx's `combined` format, optionally followed by `$request_time` and
`$upstream_response_time`, as `LINE_SPEC` (anchored at the start; anything after the
fields is ignored) defines it:

    client ident user [time_local] "request" status bytes "referrer" "user_agent" rt urt

`LINE_SPEC` decides whether a line has the format (RE2 matching without captures,
which is fast); the fields of a matching line are then cut out with splits, which
is exact because the specification leaves no choice of where a field ends: the
three first fields hold no blank, time_local no `]`, the quoted fields no `"` (nginx
writes `"` as \\x22). The fields after user_agent are separated by single blanks.
The tests check the splits against `LINE_SPEC`'s own capture groups.

A record whose text starts with `{` (after blanks) is the agent's JSON form, one
object with the keys of `JSON_KEYS`; any JSON scalar is accepted for any key (a
number's text is its value), so one odd field nulls that field only. Those records
are decoded one by one (orjson); they are the rare path.

Values "-" and "" mean absent (null). `bytes` absent is 0. `time` comes from a JSON
`ts` (epoch milliseconds), else its `time` (ISO 8601; naive means UTC), else the
line's time_local. A record is `parse_ok` when it has a time and a status in
100..599; the original text is kept in `raw` only when it is not.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

_NOBLANK = r"[^ \t\n\v\f\r]+"
LINE_SPEC = (
    rf"^({_NOBLANK}) {_NOBLANK} ({_NOBLANK}) \[([^\]]+)\] "
    r'"([^"]*)" ([0-9]{3}) ([0-9]+|-) "([^"]*)" "([^"]*)"(?: ([^ ]*))?(?: ([^ ]*))?'
)
# The same without capture groups (RE2 matches it without extracting anything), and
# without the optional fields at the end, which cannot change whether a line matches.
_LINE_MATCH = LINE_SPEC.split("(?: ")[0].replace("(", "(?:").replace("(?:?:", "(?:")
_EMPTY_LINE = '- - - [] "" 000 - "" ""'
TIME_LOCAL_FORMAT = "%d/%b/%Y:%H:%M:%S %z"
_NUMBER = r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_INTEGER = r"^-?[0-9]{1,18}$"
# Where LINE_SPEC already checked that a field holds digits, only its length is checked
# (the longest integer any int64 holds).
_DIGITS_MAX = 18

JSON_KEYS = (
    "time", "ts", "client", "user", "method", "path", "protocol", "status", "bytes",
    "referrer", "user_agent", "request_time", "upstream_response_time", "host",
)  # fmt: skip
TIMESTAMP = pa.timestamp("us", tz="UTC")
PARSED_TYPES = {
    "time": TIMESTAMP,
    "client": pa.string(),
    "user": pa.string(),
    "method": pa.string(),
    "path": pa.string(),
    "protocol": pa.string(),
    "status": pa.int32(),
    "bytes": pa.int64(),
    "referrer": pa.string(),
    "user_agent": pa.string(),
    "request_time": pa.float64(),
    "upstream_response_time": pa.float64(),
    "host": pa.string(),
}
PASSTHROUGH_TYPES = {
    "topic": pa.string(),
    "partition": pa.int32(),
    "offset": pa.int64(),
    "ingest_time": TIMESTAMP,
}
# The first `host` header's value, where the caller picked it out of `headers`.
HOST_HEADER = "host_header"
_SOURCE = {"ingest_time": "timestamp"}  # output column <- input column, where they differ
_STRINGS = ("client", "user", "method", "path", "protocol", "referrer", "user_agent", "host")


def passthrough_columns(names: list[str]) -> list[str]:
    """The PASSTHROUGH_TYPES columns that input with columns `names` gives."""
    return [c for c in PASSTHROUGH_TYPES if _SOURCE.get(c, c) in names]


def output_schema(passthrough: list[str]) -> pa.Schema:
    """The schema `parse_batch` yields for input holding the `passthrough` columns."""
    fields = [(c, PASSTHROUGH_TYPES[c]) for c in passthrough]
    fields += list(PARSED_TYPES.items()) + [("parse_ok", pa.bool_()), ("raw", pa.string())]
    return pa.schema(fields)


def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: each batch's `value` (and `headers` or `host_header`) parsed."""
    for batch in batches:
        yield parse_batch(batch)


def parse_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Parse `batch.value`; keep the columns of PASSTHROUGH_TYPES it holds (the record
    timestamp arrives as `timestamp` and leaves as `ingest_time`)."""
    names = batch.schema.names
    passthrough = passthrough_columns(names)
    out = {c: batch.column(_SOURCE.get(c, c)).cast(PASSTHROUGH_TYPES[c]) for c in passthrough}
    text = _text(batch.column("value"))
    is_json = pc.fill_null(pc.starts_with(pc.utf8_ltrim(text, characters=" "), "{"), False)
    cols = _parse_lines(text, is_json)
    if pc.any(is_json).as_py():
        _merge_json(cols, text, is_json)
    if HOST_HEADER in names:
        header_host = _text(batch.column(HOST_HEADER))
    else:
        header_host = _header_host(batch.column("headers")) if "headers" in names else None
    if header_host is not None:
        cols["host"] = pc.coalesce(cols["host"], header_host)
    status = cols["status"]
    ok = pc.fill_null(
        pc.and_(
            pc.is_valid(cols["time"]),
            pc.and_(pc.greater_equal(status, 100), pc.less_equal(status, 599)),
        ),
        False,
    )
    out.update((name, cols[name]) for name in PARSED_TYPES)
    out["parse_ok"] = ok
    out["raw"] = pc.if_else(ok, pa.scalar(None, pa.string()), text)
    return pa.RecordBatch.from_arrays(list(out.values()), schema=output_schema(passthrough))


def _text(value: pa.Array) -> pa.Array:
    """The record values as UTF-8 text; invalid sequences become U+FFFD (as rare as
    they are, they must not fail the batch)."""
    try:
        return value.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") for v in value.to_pylist()],
            pa.string(),
        )


def _absent_as_null(values: pa.Array) -> pa.Array:
    """ "-" and "" mean absent."""
    absent = pc.fill_null(
        pc.or_(pc.equal(values, "-"), pc.equal(pc.binary_length(values), 0)), False
    )
    if not pc.any(absent).as_py():
        return values
    return pc.if_else(absent, pa.scalar(None, pa.string()), values)


def _number(values: pa.Array, pattern: str, to: pa.DataType) -> pa.Array:
    """`values` that match `pattern` cast to `to`, others null. Each distinct text is
    checked and cast once (request times repeat: a few thousand distinct values in
    100,000 lines)."""
    distinct = pc.dictionary_encode(values)
    words = distinct.dictionary
    good = pc.fill_null(pc.match_substring_regex(words, pattern), False)
    return pc.if_else(good, words, pa.scalar(None, pa.string())).cast(to).take(distinct.indices)


def _digits(values: pa.Array, to: pa.DataType) -> pa.Array:
    """Digit strings cast to `to`, those too long for it null."""
    short = pc.fill_null(pc.less_equal(pc.binary_length(values), _DIGITS_MAX), True)
    if not pc.all(short).as_py():
        values = pc.if_else(short, values, pa.scalar(None, pa.string()))
    return values.cast(to)


def _parse_lines(text: pa.Array, is_json: pa.Array) -> dict[str, pa.Array]:
    """The columns of PARSED_TYPES from the lines matching LINE_SPEC that are not
    JSON records (`is_json`); absent elsewhere (null, `bytes` 0)."""
    matched = pc.and_not(pc.fill_null(pc.match_substring_regex(text, _LINE_MATCH), False), is_json)
    # Other lines are replaced by one whose fields all read as absent (status masked).
    lines = pc.if_else(matched, text, pa.scalar(_EMPTY_LINE, pa.string()))
    head = pc.split_pattern(lines, " ", max_splits=3)
    rest = pc.split_pattern(pc.list_element(head, 3), "]", max_splits=1)
    quoted = pc.split_pattern(pc.list_element(rest, 1), '"', max_splits=6)
    codes = pc.list_element(quoted, 2)  # ' 404 512 '
    tail = pc.split_pattern(pc.list_element(quoted, 6), " ", max_splits=3)
    timed = pc.equal(pc.list_element(tail, 0), "")  # the tail starts with a blank
    padded_tail = _padded(tail, 3)
    no_text = pa.scalar(None, pa.string())

    def tail_field(i: int) -> pa.Array:
        longer = pc.and_(timed, pc.greater(pc.list_value_length(tail), i))
        return pc.if_else(longer, pc.list_element(padded_tail, i), no_text)

    # A request of three words is method, path and protocol; any other has none of
    # them, and is replaced by one of three empty (absent) words before the split.
    request = pc.list_element(quoted, 1)
    three = pc.equal(pc.count_substring(request, " "), 2)
    word = pc.split_pattern(pc.if_else(three, request, pa.scalar("  ", pa.string())), " ")
    fields = {
        "client": pc.list_element(head, 0),
        "user": pc.list_element(head, 2),
        "time_local": pc.utf8_slice_codeunits(pc.list_element(rest, 0), 1),
        "method": pc.list_element(word, 0),
        "path": pc.list_element(word, 1),
        "protocol": pc.list_element(word, 2),
        "status": pc.utf8_slice_codeunits(codes, 1, 4),
        "bytes": pc.utf8_slice_codeunits(codes, 5, -1),
        "referrer": pc.list_element(quoted, 3),
        "user_agent": pc.list_element(quoted, 5),
        "request_time": tail_field(1),
        "upstream_response_time": tail_field(2),
    }
    fields["host"] = pa.nulls(len(text), pa.string())
    cols = _typed(fields, digits=True)
    cols["status"] = pc.if_else(matched, cols["status"], None)
    cols["time"] = _time_local(fields["time_local"])
    return cols


def _typed(texts: dict[str, pa.Array], digits: bool = False) -> dict[str, pa.Array]:
    """The columns of PARSED_TYPES but `time` from their texts ("-" and "" absent).
    `digits`: status and bytes hold only digits where present (LINE_SPEC's fields)."""
    text = {k: _absent_as_null(texts[k]) for k in PARSED_TYPES if k != "time"}
    integer = _digits if digits else functools.partial(_number, pattern=_INTEGER)
    return {
        **{k: text[k] for k in _STRINGS},
        "status": integer(text["status"], to=pa.int32()),
        "bytes": pc.fill_null(integer(text["bytes"], to=pa.int64()), 0),
        "request_time": _number(text["request_time"], _NUMBER, pa.float64()),
        "upstream_response_time": _number(text["upstream_response_time"], _NUMBER, pa.float64()),
    }


def _time_local(values: pa.Array) -> pa.Array:
    """nginx's $time_local as timestamps. Lines of the same second share the text,
    so each distinct text is parsed once."""
    distinct = pc.dictionary_encode(values)
    parsed = pc.strptime(
        distinct.dictionary, format=TIME_LOCAL_FORMAT, unit="us", error_is_null=True
    )
    return parsed.cast(TIMESTAMP).take(distinct.indices)


def _padded(lists: pa.Array, n: int) -> pa.Array:
    """The first `n` elements of `lists`, shorter lists padded with nulls, so that
    list_element(i < n) never fails; callers mask those rows out."""
    return pc.list_slice(lists, 0, n, return_fixed_size_list=True)


def _merge_json(cols: dict[str, pa.Array], text: pa.Array, is_json: pa.Array) -> None:
    """Put the decoded values of the JSON records in `cols` (where they are absent).
    A column that no JSON record of the batch sets is left as it is."""
    docs = [_json_fields(t) for t in text.filter(is_json).to_pylist()]
    values = _typed({k: pa.array([d.get(k) for d in docs], pa.string()) for k in PARSED_TYPES})
    values["time"] = pa.array([_json_time(d) for d in docs], TIMESTAMP)
    keys = set().union(*docs)
    if "ts" in keys:
        keys.add("time")
    for name in keys.intersection(values):
        cols[name] = pc.replace_with_mask(cols[name], is_json, values[name])


def _json_fields(text: str) -> dict[str, str]:
    """The JSON_KEYS of one JSON object as text (numbers keep their JSON text)."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {
        k: v if isinstance(v, str) else orjson.dumps(v).decode()
        for k in JSON_KEYS
        if (v := doc.get(k)) is not None
    }


def _json_time(doc: dict[str, str]) -> datetime | None:
    ts = doc.get("ts")
    try:
        if ts is not None and ts.lstrip("-").isdigit() and len(ts) <= 18:
            return datetime.fromtimestamp(int(ts) / 1000, UTC)
        text = doc.get("time")
        if text is None:
            return None
        t = datetime.fromisoformat(text)
    except (ValueError, OverflowError, OSError):
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _header_host(headers: pa.Array) -> pa.Array:
    """The value of each record's first `host` header as text, null without one."""
    n = len(headers)
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return pa.nulls(n, pa.string())
    parents = pc.list_parent_indices(headers).to_numpy()
    is_host = pc.fill_null(pc.equal(flat.field("key"), "host"), False).to_numpy(
        zero_copy_only=False
    )
    hits = np.flatnonzero(is_host)[::-1]  # reversed: the first hit of a record wins
    return _text(flat.field("value").take(_gather(n, parents[hits], hits)))


def _gather(n: int, rows: np.ndarray, sources: np.ndarray) -> pa.Array:
    """Take indices for `n` rows: row rows[i] takes sources[i], the others null."""
    index = np.full(n, -1, dtype=np.int64)
    index[rows] = sources
    return pa.array(index, mask=index < 0)
