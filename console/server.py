"""The console's aiohttp server.

Theory of operation: one `Console` per process keeps a snapshot of everything the page
shows, refreshed every `refresh` seconds by one background task (so any number of
browser tabs cost the cluster nothing more): the cluster (metadata, controller,
offsets; partition sizes from the brokers' /metrics when given; rates from the
change of high watermarks), the consumer groups with their lag, the agents'
/metrics and /health, the folded nginx-stats rows, and the audit's verdicts per
host and minute (the agents' counts against the Spark jobs'). confluent-kafka calls block:
they run in a worker thread, each with its own timeout, and a part that fails keeps
its last data and carries the error, which the page shows. The message browser is
read on demand, also in a thread.

Routes: `/` (static/index.html), `/static/*` (the page's CSS and JS, package files:
nothing comes from the internet), `/health`, and the JSON the page polls:
`/api/cluster`, `/api/groups`, `/api/agents`, `/api/stats`, `/api/audit` (each
`{"data", "error", "updated"}`), and on demand `/api/messages?topic=&partition=&n=`
(with `from=offset|timestamp&at=`), `/api/configs?type=topic|broker&name=` and
`/api/session`. With an auth file (console/auth.py) every route but `/health`,
`/login` and `/static/*` needs a login; `serve` listens with TLS when given an
SSL context.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import ssl
import threading
import time
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

from common.aio import within
from console.auth import AuthFile, Gate
from console.groups import GroupsReadError
from console.kafka import AUDIT_MINUTES, KafkaView
from console.model import Rates, agent_summary, audit_grid, parse_timestamp, partition_sizes

log = logging.getLogger("console")

STATIC = Path(__file__).parent / "static"
REFRESH_SECONDS = 2.0
HTTP_TIMEOUT = 3.0
PARTS = ("cluster", "groups", "agents", "stats", "audit")
MAX_MESSAGES = 500
CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def _dumps(value) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def describe(exc: BaseException) -> str:
    """A short message for the page: a KafkaError's text, else the exception's."""
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, GroupsReadError):
        return str(exc)
    err = exc.args[0] if exc.args else None
    if err is not None and hasattr(err, "str"):
        return err.str()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Console:
    """The snapshot and its refresh task. Owned by the server's event loop; the
    KafkaView is used from one worker thread at a time (`_kafka_lock`)."""

    def __init__(
        self,
        view: KafkaView,
        agents: list[str],
        broker_metrics: list[str],
        refresh: float = REFRESH_SECONDS,
    ):
        self.view = view
        self.agents = agents
        self.broker_metrics = broker_metrics
        self.refresh = refresh
        self.parts: dict[str, dict] = {
            p: {"data": None, "error": None, "updated": None} for p in PARTS
        }
        self.topic_rates = Rates()
        self.agent_rates = Rates()
        self._kafka_lock = threading.Lock()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task | None = None
        self.refreshed = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
        if self._session is not None:
            await self._session.close()
        try:
            await self._kafka(self.view.close)
        except TimeoutError:
            log.warning("a Kafka read still running at shutdown; its client left to exit")

    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            await self.refresh_once()
            self.refreshed.set()
            await asyncio.sleep(max(0.1, self.refresh - (time.monotonic() - started)))

    def _locked(self, fn, *args):
        with self._kafka_lock:
            return fn(*args)

    async def _kafka(self, fn, *args):
        """`fn(*args)` in a worker thread, one at a time, bounded in time."""
        limit = self.view.timeout * 4 + 5
        return await within(asyncio.to_thread(self._locked, fn, *args), limit)

    def _set(self, part: str, data=None, error: str | None = None) -> None:
        entry = self.parts[part]
        if error is None:
            entry["data"] = data
        entry["error"] = error
        entry["updated"] = time.time()

    async def refresh_once(self) -> None:
        await self._refresh_cluster()
        await self._refresh_groups()
        await self._refresh_agents()
        try:
            self._set("stats", {"points": await self._kafka(self.view.read_stats)})
        except Exception as exc:
            self._set("stats", error=describe(exc))
        try:
            verdicts = await self._kafka(self.view.audit, int(time.time() * 1000))
            self._set("audit", audit_grid(verdicts, AUDIT_MINUTES))
        except Exception as exc:
            self._set("audit", error=describe(exc))

    async def _refresh_cluster(self) -> None:
        try:
            cluster = await self._kafka(self.view.cluster)
        except Exception as exc:
            self._set("cluster", error=describe(exc))
            return
        now = time.monotonic()
        sizes, sizes_error = {}, None
        if self.broker_metrics:
            texts = await asyncio.gather(
                *(self._get_text(f"{u}/metrics") for u in self.broker_metrics),
                return_exceptions=True,
            )
            failed = [
                u for u, t in zip(self.broker_metrics, texts, strict=True) if not isinstance(t, str)
            ]
            if failed:
                sizes_error = "no metrics from " + ", ".join(failed)
            try:
                sizes = partition_sizes([t for t in texts if isinstance(t, str)])
            except ValueError as exc:
                sizes_error = f"bad metrics: {exc}"
        watermarks = {}
        for topic in cluster["topics"]:
            highs = []
            for p in topic["partitions"]:
                p["size"] = sizes.get((topic["name"], p["partition"]))
                if p["high"] is not None:
                    watermarks[(topic["name"], p["partition"])] = p["high"]
                    highs.append(p["high"])
            watermarks[topic["name"]] = sum(highs)
            topic["messages"] = sum(
                p["high"] - p["low"]
                for p in topic["partitions"]
                if p["high"] is not None and p["low"] is not None
            )
            known = [p["size"] for p in topic["partitions"] if p["size"] is not None]
            topic["size"] = sum(known) if known else None
        rates = self.topic_rates.update(now, watermarks)
        self.topic_rates.forget_except(watermarks)
        for topic in cluster["topics"]:
            topic["rate"] = rates.get(topic["name"])
            for p in topic["partitions"]:
                p["rate"] = rates.get((topic["name"], p["partition"]))
        cluster["sizes_from"] = "broker metrics" if self.broker_metrics else None
        cluster["sizes_error"] = sizes_error
        self._set("cluster", cluster)

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        cluster = self.parts["cluster"]["data"] or {"topics": []}
        return {
            (t["name"], p["partition"]): p["high"]
            for t in cluster["topics"]
            for p in t["partitions"]
            if p["high"] is not None
        }

    async def _refresh_groups(self) -> None:
        try:
            groups = await self._kafka(self.view.groups, self.high_watermarks())
            self._set("groups", {"groups": groups})
        except Exception as exc:
            self._set("groups", error=describe(exc))

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=HTTP_TIMEOUT)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def _get_text(self, url: str) -> str:
        async with self._http().get(url) as resp:
            return await resp.text()

    async def _agent(self, url: str) -> dict:
        try:
            async with self._http().get(f"{url}/health") as resp:
                health = await resp.json(content_type=None)
            text = await self._get_text(f"{url}/metrics")
            if not isinstance(health, dict):
                raise ValueError("/health is not a JSON object")
            return agent_summary(url, text, health, self.agent_rates, time.monotonic())
        except Exception as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            return {"url": url, "status": "unreachable", "error": describe(exc), "components": []}

    async def _refresh_agents(self) -> None:
        agents = await asyncio.gather(*(self._agent(u) for u in self.agents))
        self._set("agents", {"agents": list(agents)})

    async def messages(self, topic: str, partition: int, n: int, **seek) -> dict:
        """The browser's read (KafkaView.messages), its own consumer, in a thread."""
        read = functools.partial(self.view.messages, topic, partition, n, **seek)
        return await within(asyncio.to_thread(read), self.view.timeout * 4)

    async def configs(self, kind: str, name: str) -> dict:
        return await within(asyncio.to_thread(self.view.configs, kind, name), self.view.timeout * 2)


def make_app(console: Console, gate: Gate | None = None) -> web.Application:
    """The console's routes; behind `gate`'s login when given."""
    app = web.Application(middlewares=[gate.middleware] if gate is not None else [])
    index = (STATIC / "index.html").read_bytes()

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            body=index,
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-cache"},
        )

    def part(name: str):
        async def handler(request: web.Request) -> web.Response:
            return web.json_response(console.parts[name], dumps=_dumps)

        return handler

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def messages(request: web.Request) -> web.Response:
        query = request.query
        topic = query.get("topic", "")
        start = query.get("from", "last")
        try:
            partition = int(query.get("partition", "0"))
            n = int(query.get("n", "20"))
        except ValueError:
            return _bad("partition and n are numbers")
        if not topic or partition < 0 or not 1 <= n <= MAX_MESSAGES:
            return _bad(f"needs topic, partition >= 0 and 1 <= n <= {MAX_MESSAGES}")
        seek: dict[str, int] = {}
        try:
            if start == "offset":
                seek["offset"] = int(query.get("at", ""))
            elif start == "timestamp":
                seek["timestamp"] = parse_timestamp(query.get("at", ""))
            elif start != "last":
                return _bad("from is last, offset or timestamp")
        except ValueError as exc:
            return _bad("offset: a number" if start == "offset" else str(exc))
        return await _answer(console.messages(topic, partition, n, **seek))

    async def configs(request: web.Request) -> web.Response:
        kind, name = request.query.get("type", ""), request.query.get("name", "")
        if kind not in ("topic", "broker") or not name:
            return _bad("needs type (topic or broker) and name")
        if kind == "broker" and not name.isdigit():
            return _bad("a broker's name is its id")
        return await _answer(console.configs(kind, name))

    async def session(request: web.Request) -> web.Response:
        user = await gate.user(request) if gate is not None else None
        return web.json_response({"login": gate is not None, "user": user})

    async def page_policy(request: web.Request, response: web.StreamResponse) -> None:
        """Every page (the console's, the login form) loads only its own files and
        may not be framed by another site."""
        if response.content_type == "text/html":
            response.headers["Content-Security-Policy"] = CSP

    app.on_response_prepare.append(page_policy)
    app.router.add_get("/", page)
    app.router.add_get("/health", health)
    for name in PARTS:
        app.router.add_get(f"/api/{name}", part(name))
    app.router.add_get("/api/messages", messages)
    app.router.add_get("/api/configs", configs)
    app.router.add_get("/api/session", session)
    app.router.add_static("/static/", STATIC, show_index=False)
    if gate is not None:
        gate.add_routes(app)
    return app


async def _answer(read) -> web.Response:
    """`{"data", "error"}` of an on-demand read: its result, or what failed."""
    try:
        data = await read
    except Exception as exc:
        if isinstance(exc, asyncio.CancelledError):
            raise
        return web.json_response({"data": None, "error": describe(exc)}, dumps=_dumps)
    return web.json_response({"data": data, "error": None}, dumps=_dumps)


def _bad(message: str) -> web.Response:
    return web.json_response({"data": None, "error": message}, status=400, dumps=_dumps)


def login_page() -> bytes:
    return (STATIC / "login.html").read_bytes()


def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    """A server context from PEM files, as the broker's material (`logflume certs`
    writes the key and certificate into one file, given once as --tls-cert).
    Raises ValueError naming the file."""
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{flag} {path}: no such file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as e:
        where = f"--tls-cert {cert}" + (f" / --tls-key {key}" if key else "")
        raise ValueError(
            f"{where}: not a PEM certificate and its private key ({e.reason})"
        ) from None
    except OSError as e:
        raise ValueError(f"--tls-cert {cert}: {e.strerror or e}") from None
    return context


async def serve(
    conf: dict,
    host: str,
    port: int,
    *,
    agents: list[str],
    broker_metrics: list[str],
    stats_topic: str,
    refresh: float = REFRESH_SECONDS,
    auth: AuthFile | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Run the console until SIGTERM or SIGINT."""
    view = KafkaView(conf, stats_topic)
    console = Console(view, agents, broker_metrics, refresh)
    gate = Gate(auth, login_page(), secure_cookie=tls is not None) if auth is not None else None
    runner = web.AppRunner(make_app(console, gate), access_log=None)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await web.TCPSite(runner, host, port, ssl_context=tls).start()
        bound = runner.addresses[0][1] if runner.addresses else port
        shown = f"[{host}]" if ":" in host else host
        scheme = "https" if tls is not None else "http"
        log.info("console on %s://%s:%d/%s", scheme, shown, bound, " (login)" if gate else "")
        await console.start()
        await stop.wait()
        log.info("stopping")
    finally:
        await runner.cleanup()
        await console.stop()
