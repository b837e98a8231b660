"""`syslog` interceptor: RFC 5424 and RFC 3164 (BSD) messages -> records.

    RFC 5424: <PRI>VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA [MSG]
    RFC 3164: <PRI>Mmm dd hh:mm:ss HOSTNAME TAG[PID]: MSG

Record: format ("rfc5424" | "rfc3164"), pri, facility (pri >> 3), severity
(pri & 7), version, timestamp, hostname, app_name, procid, msgid, structured_data
(the raw `[...]` text or None), message. RFC 5424's "-" (nil) becomes None and its
timestamp is kept as written; RFC 3164 has no year and no zone, so its timestamp
becomes ISO 8601 without offset, with the year that puts it nearest to now (not
more than a day ahead). A message that is neither is kept, flagged `parse_error`.
The timestamp, read in the agent's time zone when it has no offset, is also the
event's `time`; a nil or unreadable RFC 5424 timestamp leaves it unset.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import Literal

from agent.api import Context, Event, Interceptor, register
from agent.interceptors._common import flag, parse_error_counter

_SD = r'(?:-|(?:\[[^\]"\\]*(?:(?:"[^"\\]*(?:\\.[^"\\]*)*")[^\]"\\]*)*\])+)'
RFC5424 = re.compile(
    r"<(\d{1,3})>(\d{1,2}) (\S+) (\S+) (\S+) (\S+) (\S+) (" + _SD + r")(?: (.*))?\Z", re.DOTALL
)
RFC3164 = re.compile(
    r"<(\d{1,3})>([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\S+) "
    r"([^:\[\s]+)(?:\[([^\]]*)\])?:? ?(.*)\Z",
    re.DOTALL,
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _nil(value: str) -> str | None:
    return None if value == "-" else value


def bsd_timestamp(month: str, day: str, hh: str, mm: str, ss: str, now: dt.datetime) -> str:
    """ISO 8601 (no offset) for an RFC 3164 date, choosing the year nearest to `now`."""
    m = MONTHS.index(month) + 1
    year = now.year
    stamp = dt.datetime(year, m, int(day), int(hh), int(mm), int(ss))
    if stamp - now > dt.timedelta(days=1):
        stamp = stamp.replace(year=year - 1)
    return stamp.isoformat()


def parse(text: str, now: dt.datetime, only: str = "auto") -> dict | str:
    """A record dict, or a short reason why `text` is not syslog."""
    if only != "rfc3164":
        m = RFC5424.match(text)
        if m is not None:
            pri, version, ts, host, app, procid, msgid, sd, msg = m.groups()
            if int(pri) > 191:
                return "syslog: PRI out of range"
            if msg is not None and msg.startswith("\ufeff"):
                msg = msg[1:]
            return {
                "format": "rfc5424",
                "pri": int(pri),
                "facility": int(pri) >> 3,
                "severity": int(pri) & 7,
                "version": int(version),
                "timestamp": _nil(ts),
                "hostname": _nil(host),
                "app_name": _nil(app),
                "procid": _nil(procid),
                "msgid": _nil(msgid),
                "structured_data": _nil(sd),
                "message": msg,
            }
        if only == "rfc5424":
            return "syslog: not RFC 5424"
    m = RFC3164.match(text)
    if m is None:
        return "syslog: neither RFC 5424 nor RFC 3164"
    pri, month, day, hh, mm, ss, host, tag, pid, msg = m.groups()
    if int(pri) > 191:
        return "syslog: PRI out of range"
    try:
        stamp = bsd_timestamp(month, day.strip(), hh, mm, ss, now)
    except ValueError:
        return "syslog: bad RFC 3164 timestamp"
    return {
        "format": "rfc3164",
        "pri": int(pri),
        "facility": int(pri) >> 3,
        "severity": int(pri) & 7,
        "version": None,
        "timestamp": stamp,
        "hostname": host,
        "app_name": tag,
        "procid": pid,
        "msgid": None,
        "structured_data": None,
        "message": msg,
    }


def epoch_ms(timestamp: str | None) -> int | None:
    """Epoch milliseconds of an ISO 8601 timestamp (local time without an offset)."""
    if timestamp is None:
        return None
    try:
        return int(dt.datetime.fromisoformat(timestamp).timestamp() * 1000)
    except ValueError:
        return None


@dataclasses.dataclass
class SyslogConfig:
    format: Literal["auto", "rfc5424", "rfc3164"] = "auto"  # auto: RFC 5424, else RFC 3164


@register("interceptor", "syslog")
class SyslogParser(Interceptor):
    """Parses syslog lines; owned by one source's pipeline (single task)."""

    Config = SyslogConfig

    def __init__(self, config: SyslogConfig, context: Context):
        super().__init__(config, context)
        self._errors = parse_error_counter(context, "syslog")

    def intercept(self, events: list[Event]) -> list[Event]:
        now = dt.datetime.now()
        errors = 0
        for e in events:
            result = parse(e.body.decode("utf-8", "backslashreplace"), now, self.config.format)
            if isinstance(result, str):
                flag(e, result)
                errors += 1
            else:
                e.record = result
                e.time = epoch_ms(result["timestamp"])
        if errors:
            self._errors.inc(errors)
        return events
