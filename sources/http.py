"""`http` source (aiohttp): POST lines or JSON arrays, with 503 when the channel is full.

Theory of operation. `POST <path>` with `text/plain` (or anything not JSON) is
split into lines; `application/json` must be an array: strings become lines,
objects become events whose `record` is the object and whose `body` is its
orjson encoding. The batch goes to `offer`, which never waits: on success the put
has committed and the answer is 204; when the channel is full the answer is 503
with `Retry-After`, and the client (which still holds the data) retries. Bodies over
`max_body_bytes` get 413, bodies not read within `read_timeout` get 408.
`GET /health` answers 200. Events carry no Ack.

With `tls:` it serves HTTPS only (sources/_tls.py); with `auth: {bearer_token}` a
POST without `Authorization: Bearer <token>` is answered 401 with
`WWW-Authenticate: Bearer` and counted (the token is compared in constant time and
never shown: give it as `${VAR}` or `${file:/path}`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
from collections.abc import Callable

import orjson
from aiohttp import web

from agent.api import Context, Duration, Emit, Event, Size, Source, register
from common.aio import within
from common.hostport import parse_hostport
from sources._lines import LineSplitter, base_headers
from sources._tls import ServerTlsConfig, server_context
from sources._tls import check as tls_check


@dataclasses.dataclass
class HttpConfig:
    listen: str = "127.0.0.1:8280"  # host:port to serve on
    path: str = "/"  # URL path that takes POST requests (not /health)
    max_body_bytes: Size = Size(10 * 1024 * 1024)  # a larger request body is answered 413
    max_line_bytes: Size = Size(1024 * 1024)  # longer lines (and JSON strings) are cut to this
    read_timeout: Duration = Duration(30.0)  # a body not read within this is answered 408
    retry_after: int = 1  # seconds, sent as Retry-After with 503 (channel full)
    add_host: bool = False  # add header `host`: this machine's name, as `${HOST}`
    tls: ServerTlsConfig | None = None  # serve HTTPS only; null: plain HTTP
    auth: HttpAuth | None = None  # require a bearer token on POST (not /health); null: none


@dataclasses.dataclass(frozen=True)
class HttpAuth:
    bearer_token: str = dataclasses.field(repr=False)  # `Authorization: Bearer <token>` needed


@register("source", "http")
class HttpSource(Source):
    """An aiohttp server on the agent's loop; one instance per pipeline source."""

    Config = HttpConfig
    signals_ready = True  # after binding its socket

    @classmethod
    def validate(cls, config: HttpConfig) -> list[str]:
        errors = [] if config.read_timeout > 0 else ["read_timeout: must be more than 0"]
        try:
            parse_hostport(config.listen, "listen")
        except ValueError as exc:
            errors.append(str(exc))
        if not isinstance(config.path, str) or not config.path.startswith("/"):
            errors.append(f"path: must start with /, got {config.path!r}")
        elif config.path == "/health":
            errors.append("path: /health is reserved for the health check")
        for key in ("max_body_bytes", "max_line_bytes", "retry_after"):
            value = getattr(config, key)
            if not isinstance(value, int) or value < 1:
                errors.append(f"{key}: must be a positive integer, got {value!r}")
        if config.auth is not None and not config.auth.bearer_token:
            errors.append("auth.bearer_token: must not be empty")
        return errors + tls_check(config.tls)

    @classmethod
    def listen_ports(cls, config: HttpConfig) -> list[tuple[str, int]]:
        return [("tcp", parse_hostport(config.listen, "listen")[1])]

    def __init__(self, config: HttpConfig, context: Context):
        super().__init__(config, context)
        self._read_timeout = float(config.read_timeout)
        self._headers = base_headers(context.name, config.add_host)
        self._offer: Callable[[list[Event]], bool] | None = None
        m, labels = context.metrics, {"component": context.name}
        self._m_requests = m.counter(
            "logflume_agent_http_requests_total", "POST requests accepted", **labels
        )
        self._m_events = m.counter("logflume_agent_http_events_total", "Events accepted", **labels)
        self._m_rejected = m.counter(
            "logflume_agent_http_rejected_total", "Requests answered 503: channel full", **labels
        )
        self._m_truncated = m.counter(
            "logflume_agent_http_truncated_lines_total", "Lines cut to max_line_bytes", **labels
        )
        self._m_unauthorized = m.counter(
            "logflume_agent_http_unauthorized_total",
            "Requests answered 401: bearer token missing or wrong",
            **labels,
        )
        self._expected = None
        if config.auth is not None:
            self._expected = f"Bearer {config.auth.bearer_token}".encode()

    async def run(self, emit: Emit, offer) -> None:
        self._offer = offer
        host, port = parse_hostport(self.config.listen, "listen")
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.router.add_post(self.config.path, self._post)
        app.router.add_get("/health", self._health)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
        await runner.setup()
        try:
            ctx = server_context(self.config.tls) if self.config.tls is not None else None
            await web.TCPSite(runner, host, port, ssl_context=ctx).start()
            self.ready()
            await asyncio.Future()
        finally:
            await within(runner.cleanup(), 10.0)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _post(self, request: web.Request) -> web.Response:
        if self._expected is not None and not hmac.compare_digest(
            request.headers.get("Authorization", "").encode(), self._expected
        ):
            self._m_unauthorized.inc()
            return web.Response(
                status=401,
                text="bearer token missing or wrong\n",
                headers={"WWW-Authenticate": 'Bearer realm="logflume"'},
            )
        size = request.content_length or 0
        if size > self.config.max_body_bytes:
            raise web.HTTPRequestEntityTooLarge(
                max_size=self.config.max_body_bytes, actual_size=size
            )
        try:
            body = await within(request.read(), self._read_timeout)
        except TimeoutError:
            raise web.HTTPRequestTimeout() from None
        if request.content_type == "application/json":
            events = self._json_events(body)
        else:
            events = self._line_events(body)
        if events:
            assert self._offer is not None  # serving since run()
            if not self._offer(events):
                self._m_rejected.inc()
                return web.Response(
                    status=503,
                    text="channel full, retry later\n",
                    headers={"Retry-After": str(self.config.retry_after)},
                )
            self._m_events.inc(len(events))
        self._m_requests.inc()
        return web.Response(status=204)

    def _line_events(self, body: bytes) -> list[Event]:
        splitter = LineSplitter(self.config.max_line_bytes)
        lines = splitter.feed(body)
        last = splitter.flush()
        if last is not None:
            lines.append(last)
        if splitter.truncated:
            self._m_truncated.inc(splitter.truncated)
        headers = self._headers
        return [Event(line, headers) for line in lines if line]

    def _json_events(self, body: bytes) -> list[Event]:
        try:
            items = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise web.HTTPBadRequest(text=f"invalid JSON: {exc}\n") from None
        if not isinstance(items, list):
            raise web.HTTPBadRequest(text="expected a JSON array of strings or objects\n")
        headers, cap = self._headers, self.config.max_line_bytes
        events = []
        for item in items:
            if isinstance(item, str):
                line = item.encode()
                if len(line) > cap:
                    line = line[:cap]
                    self._m_truncated.inc()
                events.append(Event(line, headers))
            elif isinstance(item, dict):
                events.append(Event(orjson.dumps(item), headers, item))
            else:
                raise web.HTTPBadRequest(text="array items must be strings or objects\n")
        return events
