"""`nginx` interceptor: access-log lines -> records.

Formats. `combined` is nginx's predefined format

    $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
    "$http_referer" "$http_user_agent"

optionally followed by ` $request_time $upstream_response_time` (the common
`combined_timed` extension; `combined` accepts it when present, `combined_timed`
requires it). `regex` takes a custom `pattern` with named groups; groups named like
the record fields below are converted the same way.

Record: time (ISO 8601 with offset), ts (epoch ms; also the event's `time`), client, user, method, path,
protocol, status (int), bytes (int; "-" is 0), referrer, user_agent, request_time
(float|None), upstream_response_time (float|None; several upstreams are summed).
"-" in user, referrer and user_agent becomes None.

Speed: where the optional `logflume-nginxparse` distribution is installed
(native/nginxparse; install-agent.sh builds it where it can), its C parser takes the
plainly shaped `combined` lines of a batch at about half the reference's cost per line,
and leaves every other line to the code below, the reference, which decides it (parsed,
or flagged with its reason): the records are the same either way
(tests/agent/interceptors/test_nginx_native.py).
The reference: one compiled regex match per line (a second, escape-aware one only for
lines with backslash-escaped quotes), and `$time_local` conversions cached per
distinct string (all lines of one second share it).
"""

from __future__ import annotations

import calendar
import dataclasses
import re
from collections.abc import Callable
from typing import Literal

from agent.api import Context, Event, Interceptor, register
from agent.interceptors._common import flag, parse_error_counter

NativeParser = Callable[[list[Event], bool], list[int]]
native_combined: NativeParser | None
try:
    from logflume_nginxparse import parse_combined as native_combined
except ImportError:  # a pure-Python agent: every line through the reference
    native_combined = None


def _combined(quoted: str) -> re.Pattern:
    return re.compile(
        r"([^ ]+) [^ ]+ ([^ ]+) \[([^\]]*)\] "
        + quoted
        + r" (\d{3}) (\d+|-) "
        + quoted
        + " "
        + quoted
        # optional $request_time and $upstream_response_time ("0.004, 0.002" or "-")
        + r"(?: ([\d.]+|-)(?: ([-\d.]+(?:(?:, | : )[-\d.]+)*))?)?[ \t\r]*\Z"
    )


# nginx writes '"' inside fields as \x22, so quoted fields rarely hold a quote: try
# the plain pattern first, then the one that allows backslash-escaped quotes.
COMBINED = _combined(r'"([^"]*)"')
COMBINED_ESCAPED = _combined(r'"([^"\\]*(?:\\.[^"\\]*)*)"')
MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_TIME_CACHE_MAX = 4096


def parse_time_local(text: str) -> tuple[str, int]:
    """'10/Oct/2000:13:55:36 -0700' -> ('2000-10-10T13:55:36-07:00', 971211336000)."""
    if len(text) != 26 or text[2] != "/" or text[6] != "/" or text[11] != ":" or text[20] != " ":
        raise ValueError(text)
    day, month, year = int(text[0:2]), MONTHS[text[3:6]], int(text[7:11])
    hh, mm, ss = int(text[12:14]), int(text[15:17]), int(text[18:20])
    sign, tzh, tzm = text[21], int(text[22:24]), int(text[24:26])
    if sign not in "+-" or hh > 23 or mm > 59 or ss > 60 or not 1 <= day <= 31:
        raise ValueError(text)
    offset = (tzh * 3600 + tzm * 60) * (1 if sign == "+" else -1)
    ts = (calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0)) - offset) * 1000
    iso = f"{year:04d}-{month:02d}-{day:02d}T{hh:02d}:{mm:02d}:{ss:02d}{sign}{tzh:02d}:{tzm:02d}"
    return iso, ts


def parse_seconds(text: str | None) -> float | None:
    """'0.123' -> 0.123; '0.004, 0.002' or '0.1 : 0.2' -> their sum; '-' or None -> None."""
    if text is None or text == "-":
        return None
    try:
        return float(text)
    except ValueError:
        parts = [p.strip() for p in text.replace(":", ",").split(",")]
        values = [float(p) for p in parts if p and p != "-"]
        return round(sum(values), 6) if values else None


@dataclasses.dataclass
class NginxConfig:
    format: Literal["combined", "combined_timed", "regex"] = "combined"  # log_format of the lines
    pattern: str | None = None  # format: regex only: a regex with named groups, one per field


@register("interceptor", "nginx")
class NginxParser(Interceptor):
    """Parses access-log lines; owned by one source's pipeline (single task)."""

    Config = NginxConfig

    @classmethod
    def validate(cls, config: NginxConfig) -> list[str]:
        if config.format != "regex":
            return ["pattern: only used with format: regex"] if config.pattern else []
        if not config.pattern:
            return ["pattern: required with format: regex"]
        try:
            compiled = re.compile(config.pattern)
        except re.error as exc:
            return [f"pattern: invalid regex ({exc})"]
        return [] if compiled.groupindex else ["pattern: needs named groups, e.g. (?P<status>\\d+)"]

    def __init__(self, config: NginxConfig, context: Context):
        super().__init__(config, context)
        self._errors = parse_error_counter(context, "nginx")
        self._times: dict[str, tuple[str, int]] = {}
        self._timed = config.format == "combined_timed"
        self._custom = (
            re.compile(config.pattern) if config.format == "regex" and config.pattern else None
        )
        self._native = native_combined

    def _time(self, text: str) -> tuple[str, int]:
        cached = self._times.get(text)
        if cached is None:
            if len(self._times) >= _TIME_CACHE_MAX:
                self._times.clear()
            cached = self._times[text] = parse_time_local(text)
        return cached

    def intercept(self, events: list[Event]) -> list[Event]:
        if self._custom is not None:
            return self._intercept_custom(events)
        if self._native is None:
            self._intercept_combined(events)
        else:
            left = self._native(events, self._timed)
            if left:
                self._intercept_combined([events[i] for i in left])
        return events

    def _intercept_combined(self, events: list[Event]) -> None:
        """The reference parser of the combined formats (see the module docstring)."""
        match, timed, times, errors = COMBINED.match, self._timed, self._times, 0
        for e in events:
            line = e.body.decode("utf-8", "backslashreplace")
            m = match(line) or COMBINED_ESCAPED.match(line)
            if m is None:
                flag(e, "nginx: line does not match the format")
                errors += 1
                continue
            client, user, time_local, request, status, size, ref, agent, rt, urt = m.groups()
            if timed and rt is None:
                flag(e, "nginx: request_time missing")
                errors += 1
                continue
            try:
                iso, ts = times.get(time_local) or self._time(time_local)
            except (ValueError, KeyError):
                flag(e, "nginx: bad time_local")
                errors += 1
                continue
            try:
                request_time = None if rt is None or rt == "-" else float(rt)
                if urt is None or urt == "-":
                    upstream = None
                elif "," in urt or ":" in urt:
                    upstream = parse_seconds(urt)
                else:
                    upstream = float(urt)
            except ValueError:
                flag(e, "nginx: bad request_time or upstream_response_time")
                errors += 1
                continue
            parts = request.split(" ")
            if len(parts) == 3:
                method, path, protocol = parts
            elif len(parts) == 2:
                (method, path), protocol = parts, None
            else:
                method, path, protocol = None, request, None
            e.record = {
                "time": iso,
                "ts": ts,
                "client": client,
                "user": None if user == "-" else user,
                "method": method,
                "path": path,
                "protocol": protocol,
                "status": int(status),
                "bytes": 0 if size == "-" else int(size),
                "referrer": None if ref == "-" else ref,
                "user_agent": None if agent == "-" else agent,
                "request_time": request_time,
                "upstream_response_time": upstream,
            }
            e.time = ts
        if errors:
            self._errors.inc(errors)

    def _intercept_custom(self, events: list[Event]) -> list[Event]:
        assert self._custom is not None  # format: regex
        errors = 0
        for e in events:
            m = self._custom.match(e.body.decode("utf-8", "backslashreplace"))
            if m is None:
                flag(e, "nginx: line does not match the pattern")
                errors += 1
                continue
            try:
                e.record = convert_fields(m.groupdict(), self._time)
            except (ValueError, KeyError) as exc:
                flag(e, f"nginx: bad field value ({exc})"[:120])
                errors += 1
                continue
            e.time = e.record.get("ts")
        if errors:
            self._errors.inc(errors)
        return events


def convert_fields(rec: dict, parse_time) -> dict:
    """Give custom-pattern groups the same types as the combined format's record."""
    for key in ("status", "bytes"):
        if key in rec and rec[key] is not None:
            rec[key] = 0 if rec[key] == "-" else int(rec[key])
    for key in ("request_time", "upstream_response_time"):
        if key in rec:
            rec[key] = parse_seconds(rec[key])
    if rec.get("time") is not None:
        rec["time"], rec["ts"] = parse_time(rec["time"])
    if rec.get("request") is not None and "method" not in rec:
        parts = rec.pop("request").split(" ")
        if len(parts) == 3:
            rec["method"], rec["path"], rec["protocol"] = parts
    return rec
