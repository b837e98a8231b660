"""`tcp` source: lines over TCP, newline-framed or syslog octet-counted (RFC 6587).

Theory of operation. Each connection is one task: read up to `read_bytes` (with
`idle_timeout`), frame, `await emit(batch)`, and only then read again. While the
channel is full, emit waits, the socket is not read, the kernel buffers fill and
the sender's writes block: backpressure reaches the client. Framing is detected
per connection from its first bytes (`framing: auto`): `<digits> <` starts an
octet-counted stream (`123 <14>1 ...`), anything else is newline-delimited. Lines
longer than `max_line_bytes` are cut and counted; the rest of them is skipped.
Connections beyond `max_connections` are closed on accept and counted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Literal

from agent.api import Context, Duration, Emit, Event, Size, Source, register
from common.aio import within
from common.hostport import parse_hostport
from sources._lines import LineSplitter, base_headers
from sources._tls import ServerTlsConfig, server_context
from sources._tls import check as tls_check

_OCTET_START = re.compile(rb"[1-9][0-9]{0,8} <")
_UNDECIDED = re.compile(rb"[1-9][0-9]{0,8} ?\Z")
FRAMINGS = ("auto", "newline", "octet_counting")


class FramingError(ValueError):
    pass


class OctetCounter:
    """RFC 6587 octet-counting frames `<len> <msg>`; one per connection."""

    __slots__ = ("max_line", "truncated", "_buf", "_skip")

    def __init__(self, max_line: int):
        self.max_line = max_line
        self.truncated = 0
        self._buf = b""
        self._skip = 0  # bytes of a cut frame still to discard

    def feed(self, data: bytes) -> list[bytes]:
        if self._skip:
            n = min(self._skip, len(data))
            self._skip -= n
            data = data[n:]
        buf = self._buf + data if self._buf else data
        out, pos, end = [], 0, len(buf)
        while pos < end:
            sp = buf.find(b" ", pos, pos + 11)
            if sp < 0:
                if end - pos > 10:
                    raise FramingError(f"bad frame length {buf[pos : pos + 12]!r}")
                break
            digits = buf[pos:sp]
            if not digits.isdigit():
                raise FramingError(f"bad frame length {digits[:12]!r}")
            length = int(digits)
            start = sp + 1
            if length > self.max_line:
                take = min(length, end - start)
                if take >= self.max_line:
                    out.append(buf[start : start + self.max_line])
                    self.truncated += 1
                    self._skip = length - take
                    pos = start + take
                    continue
                break  # wait until the capped head is complete
            if start + length > end:
                break
            out.append(buf[start : start + length])
            pos = start + length
        self._buf = buf[pos:]
        return out

    def flush(self) -> bytes | None:
        return None


@dataclasses.dataclass
class TcpConfig:
    listen: str = "127.0.0.1:5140"  # host:port to accept connections on
    framing: Literal["auto", "newline", "octet_counting"] = "auto"  # auto: detected per connection
    max_line_bytes: Size = Size(1024 * 1024)  # longer lines are cut; the rest is skipped
    idle_timeout: Duration = Duration(300.0)  # a connection silent this long is closed
    max_connections: int = 256  # connections beyond this are closed on accept
    read_bytes: Size = Size(64 * 1024)  # most read from a connection at a time
    batch_size: int = 1000  # most events per batch put into the channels
    add_host: bool = False  # add header `host`: this machine's name, as `${HOST}`
    tls: ServerTlsConfig | None = None  # accept TLS connections only; null: plain TCP


@register("source", "tcp")
class TcpSource(Source):
    """A TCP listener; one task per connection, all on the agent's loop."""

    Config = TcpConfig
    signals_ready = True  # after binding its socket

    @classmethod
    def validate(cls, config: TcpConfig) -> list[str]:
        errors = [] if config.idle_timeout > 0 else ["idle_timeout: must be more than 0"]
        try:
            parse_hostport(config.listen, "listen")
        except ValueError as exc:
            errors.append(str(exc))
        if config.framing not in FRAMINGS:
            errors.append(f"framing: must be one of {', '.join(FRAMINGS)}, got {config.framing!r}")
        errors += tls_check(config.tls)
        for key in ("max_line_bytes", "max_connections", "read_bytes", "batch_size"):
            value = getattr(config, key)
            if not isinstance(value, int) or value < 1:
                errors.append(f"{key}: must be a positive integer, got {value!r}")
        return errors

    @classmethod
    def listen_ports(cls, config: TcpConfig) -> list[tuple[str, int]]:
        return [("tcp", parse_hostport(config.listen, "listen")[1])]

    def __init__(self, config: TcpConfig, context: Context):
        super().__init__(config, context)
        self._idle = float(config.idle_timeout)
        self._headers = base_headers(context.name, config.add_host)
        self._conns: set[asyncio.Task] = set()
        m, labels = context.metrics, {"component": context.name}
        self._m_lines = m.counter("logflume_agent_tcp_lines_total", "Lines received", **labels)
        self._m_truncated = m.counter(
            "logflume_agent_tcp_truncated_lines_total", "Lines cut to max_line_bytes", **labels
        )
        self._m_rejected = m.counter(
            "logflume_agent_tcp_rejected_connections_total",
            "Connections refused: max_connections reached",
            **labels,
        )
        self._m_errors = m.counter(
            "logflume_agent_tcp_framing_errors_total", "Connections closed on bad framing", **labels
        )
        self._m_conns = m.gauge("logflume_agent_tcp_connections", "Open connections", **labels)

    async def run(self, emit: Emit, offer) -> None:
        host, port = parse_hostport(self.config.listen, "listen")

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
            if len(self._conns) >= self.config.max_connections:
                self._m_rejected.inc()
                writer.close()
                return
            task = asyncio.current_task()
            assert task is not None  # on_connect runs in the connection's task
            self._conns.add(task)
            self._m_conns.set(len(self._conns))
            try:
                await self._serve(reader, writer, emit)
            finally:
                self._conns.discard(task)
                self._m_conns.set(len(self._conns))
                writer.close()

        ctx = server_context(self.config.tls) if self.config.tls is not None else None
        server = await asyncio.start_server(
            on_connect, host, port, limit=self.config.read_bytes, ssl=ctx
        )
        self.ready()
        try:
            await asyncio.Future()
        finally:
            server.close()
            for task in list(self._conns):
                task.cancel()
            if self._conns:
                await asyncio.wait(list(self._conns), timeout=5.0)
            await within(server.wait_closed(), 5.0)

    async def _serve(self, reader: asyncio.StreamReader, writer, emit: Emit) -> None:
        peer = writer.get_extra_info("peername")
        headers = self._headers
        framer = None
        framing = self.config.framing
        head = b""
        while True:
            try:
                data = await within(reader.read(self.config.read_bytes), self._idle)
            except TimeoutError:
                self.context.log.info("tcp: closing idle connection from %s", peer)
                return
            except ConnectionError:
                return
            if framer is None:
                head += data
                if framing == "auto" and data and _UNDECIDED.match(head):
                    continue  # too short to tell "12 <..." from "12 apples"
                octets = framing == "octet_counting" or (
                    framing == "auto" and _OCTET_START.match(head) is not None
                )
                framer = (
                    OctetCounter(self.config.max_line_bytes)
                    if octets
                    else LineSplitter(self.config.max_line_bytes)
                )
                data, head = head, b""
            if not data:
                last = framer.flush()
                if last is not None:
                    await self._emit([last], headers, emit)
                return
            try:
                lines = framer.feed(data)
            except FramingError as exc:
                self._m_errors.inc()
                self.context.log.warning("tcp: closing connection from %s: %s", peer, exc)
                return
            if framer.truncated:
                self._m_truncated.inc(framer.truncated)
                framer.truncated = 0
            if lines:
                await self._emit(lines, headers, emit)

    async def _emit(self, lines: list[bytes], headers: dict, emit: Emit) -> None:
        if b"" in lines:
            lines = [line for line in lines if line]
        self._m_lines.inc(len(lines))
        size = self.config.batch_size
        for i in range(0, len(lines), size):
            await emit([Event(line, headers) for line in lines[i : i + size]])
