"""Deterministic generator of realistic nginx access-log traffic.

Used by the tests (as ground truth: every generated `Access` carries the exact
values its line encodes), the demo and the benchmarks. Same seed, same arguments,
same output, on any machine.

Lines use nginx's `combined` format followed by `$request_time
$upstream_response_time` (the common "timed combined" extension the agent's tail
source reads):

    203.0.113.7 - alice [10/Oct/2024:13:55:36 +0000] "GET /a?b=1 HTTP/1.1" 200 512 "-" "curl/8.0" 0.012 0.010

`Access.record()` gives the agent's JSON form of the same request. A fraction
`bad_ratio` of the items are `Garbage`: lines no parser accepts, to exercise the
"counted, not lost" path.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

METHODS = ("GET",) * 16 + ("POST",) * 3 + ("HEAD", "PUT", "DELETE")
STATUSES: tuple[int, ...] = (
    (200,) * 70 + (204, 206, 301, 302, 304) * 2 + (400, 401, 403, 404, 404, 404, 429)
)
STATUSES += (500, 502, 503, 504)
PATHS = (
    ["/", "/index.html", "/favicon.ico", "/robots.txt", "/login", "/logout", "/search"]
    + [f"/api/v1/items/{i}" for i in range(40)]
    + [f"/static/js/app.{i}.js" for i in range(10)]
    + [f"/static/img/photo{i}.jpg" for i in range(30)]
    + [f"/blog/{y}/{m:02d}/post-{n}" for y in (2023, 2024) for m in range(1, 13) for n in (1, 2)]
)
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "curl/8.5.0",
    "Googlebot/2.1 (+http://www.google.com/bot.html)",
    "python-requests/2.32.3",
)
REFERRERS = ("-",) * 6 + (
    "https://www.google.com/",
    "https://example.com/",
    "https://news.ycombinator.com/",
)
GARBAGE = (
    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    "GET / HTTP/1.1",
    "-- MARK --",
    '127.0.0.1 - - [not a date] "GET / HTTP/1.1" 200 1 "-" "-"',
    "",
    '{"json": "but not an access record"}',
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclasses.dataclass(frozen=True, slots=True)
class Access:
    """One generated request; immutable, safe to share."""

    time: datetime  # tz-aware, whole seconds (nginx's $time_local resolution)
    client: str
    user: str | None
    method: str
    path: str
    protocol: str
    status: int
    bytes: int
    referrer: str | None
    user_agent: str
    request_time: float  # seconds, 3 decimals like nginx
    upstream_response_time: float | None
    host: str | None

    def line(self) -> str:
        t = self.time
        stamp = f"{t.day:02d}/{MONTHS[t.month - 1]}/{t.year}:{t:%H:%M:%S} {t:%z}"
        upstream = (
            "-" if self.upstream_response_time is None else f"{self.upstream_response_time:.3f}"
        )
        return (
            f"{self.client} - {self.user or '-'} [{stamp}] "
            f'"{self.method} {self.path} {self.protocol}" {self.status} {self.bytes} '
            f'"{self.referrer or "-"}" "{self.user_agent}" {self.request_time:.3f} {upstream}'
        )

    def record(self) -> dict:
        """The agent's JSON record for this request."""
        rec = {
            "time": self.time.isoformat(),
            "ts": int(self.time.timestamp() * 1000),
            "client": self.client,
            "user": self.user,
            "method": self.method,
            "path": self.path,
            "protocol": self.protocol,
            "status": self.status,
            "bytes": self.bytes,
            "referrer": self.referrer,
            "user_agent": self.user_agent,
            "request_time": self.request_time,
            "upstream_response_time": self.upstream_response_time,
        }
        if self.host is not None:
            rec["host"] = self.host
        return rec


@dataclasses.dataclass(frozen=True, slots=True)
class Garbage:
    """A line no parser accepts; `time` is when it was "written"."""

    time: datetime
    text: str

    def line(self) -> str:
        return self.text

    def record(self) -> None:
        return None


def generate(
    start: datetime,
    end: datetime,
    count: int,
    *,
    seed: int = 0,
    hosts: tuple[str, ...] = (),
    clients: int = 500,
    bad_ratio: float = 0.0,
    tz_offset_minutes: int = 0,
) -> Iterator[Access | Garbage]:
    """Yield `count` items with non-decreasing times spread over [start, end).

    `hosts` empty gives records without a host. `clients` is the size of the client
    IP population (Zipf-like popularity, so some clients are much busier). Times are
    rendered in the zone `tz_offset_minutes` east of UTC.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("start and end must be timezone-aware")
    rng = random.Random(seed)
    zone = timezone(timedelta(minutes=tz_offset_minutes))
    span = (end - start).total_seconds()
    ips = [_ip(rng) for _ in range(clients)]
    weights = [1.0 / (i + 1) for i in range(clients)]
    path_weights = [1.0 / (i + 1) ** 0.8 for i in range(len(PATHS))]
    base = start.timestamp()
    for i in range(count):
        offset = int((i + rng.random() * 0.5) * span / count)
        when = datetime.fromtimestamp(base + offset, UTC).astimezone(zone)
        if bad_ratio and rng.random() < bad_ratio:
            yield Garbage(when, rng.choice(GARBAGE))
            continue
        status = rng.choice(STATUSES)
        method = rng.choice(METHODS)
        path = rng.choices(PATHS, path_weights)[0]
        if method == "GET" and rng.random() < 0.1:
            path += f"?q={rng.randrange(1000)}"
        rt = round(rng.lognormvariate(-3.5, 1.2), 3)
        yield Access(
            time=when,
            client=rng.choices(ips, weights)[0],
            user=rng.choice(("alice", "bob")) if rng.random() < 0.05 else None,
            method=method,
            path=path,
            protocol="HTTP/2.0" if rng.random() < 0.3 else "HTTP/1.1",
            status=status,
            bytes=0
            if status in (204, 304) or method == "HEAD"
            else int(rng.lognormvariate(8, 1.5)),
            referrer=None if (r := rng.choice(REFERRERS)) == "-" else r,
            user_agent=rng.choice(AGENTS),
            request_time=rt,
            upstream_response_time=None if path.startswith("/static") else round(rt * 0.9, 3),
            host=rng.choice(hosts) if hosts else None,
        )


def lines(start: datetime, end: datetime, count: int, **kwargs) -> Iterator[str]:
    """The nginx lines of `generate(...)` (garbage included)."""
    for item in generate(start, end, count, **kwargs):
        yield item.line()


def _ip(rng: random.Random) -> str:
    first = rng.choice((10, 172, 192, 203))
    return f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
