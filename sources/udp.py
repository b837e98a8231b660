"""`udp` source: newline-separated lines in datagrams (`echo hi | nc -u -w1 host 8285`;
not `-w0`, with which nc can quit before echo has written the line).

Theory of operation. The socket is non-blocking and registered with the loop's
`add_reader`; each time it is readable the source drains up to `batch_size`
datagrams with plain `recv` calls (no per-datagram protocol callbacks), splits
them into lines (a datagram without a newline is one line; empty lines are
skipped) and hands the whole batch to `offer`. UDP cannot push back, so when the
channel is full the batch is dropped and counted (`..._dropped_total`). Events
carry no Ack.

Receive buffer. While the loop is busy (a big batch in an interceptor, a slow
scheduler on a loaded host) datagrams queue in the kernel, each costing its skb
"truesize" (~1 KiB for a 200-byte line), not its payload. The default, 64 MiB,
holds ~1 s of 50,000 lines/s: measured with zero loss at 50k/s for 30 s at load
average 7-10 on 2 cores, where 8 MiB lost 14 %. It is set with SO_RCVBUFFORCE when
privileged (root or CAP_NET_ADMIN); otherwise SO_RCVBUF is capped by the kernel
at net.core.rmem_max (often 4 MiB, ~80 ms at that rate), and a warning says so.
The buffer granted is exported as `logflume_agent_udp_rcvbuf_bytes`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket

from agent.api import Context, Emit, Event, Size, Source, register
from common.hostport import parse_hostport
from sources._lines import base_headers

MAX_DATAGRAM = 65535
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


@dataclasses.dataclass
class UdpConfig:
    listen: str = "127.0.0.1:8285"  # host:port to receive datagrams on
    rcvbuf_bytes: Size = Size(64 * 1024 * 1024)  # socket receive buffer (SO_RCVBUF): holds bursts
    max_line_bytes: Size = Size(MAX_DATAGRAM)  # longer lines are cut to this
    batch_size: int = 1000  # datagrams drained per wake-up, offered as one batch
    add_host: bool = False  # add header `host`: this machine's name, as `${HOST}`


@register("source", "udp")
class UdpSource(Source):
    """Receives datagrams; one instance per pipeline source, all on the agent's loop."""

    Config = UdpConfig
    signals_ready = True  # after binding its socket

    @classmethod
    def validate(cls, config: UdpConfig) -> list[str]:
        errors = []
        try:
            parse_hostport(config.listen, "listen")
        except ValueError as exc:
            errors.append(str(exc))
        for key in ("rcvbuf_bytes", "max_line_bytes", "batch_size"):
            value = getattr(config, key)
            if not isinstance(value, int) or value < 1:
                errors.append(f"{key}: must be a positive integer, got {value!r}")
        return errors

    @classmethod
    def listen_ports(cls, config: UdpConfig) -> list[tuple[str, int]]:
        return [("udp", parse_hostport(config.listen, "listen")[1])]

    def __init__(self, config: UdpConfig, context: Context):
        super().__init__(config, context)
        self._headers = base_headers(context.name, config.add_host)
        m, labels = context.metrics, {"component": context.name}
        self._m_datagrams = m.counter(
            "logflume_agent_udp_datagrams_total", "Datagrams received", **labels
        )
        self._m_lines = m.counter("logflume_agent_udp_lines_total", "Lines received", **labels)
        self._m_dropped = m.counter(
            "logflume_agent_udp_dropped_total", "Lines dropped: channel full", **labels
        )
        self._m_truncated = m.counter(
            "logflume_agent_udp_truncated_lines_total", "Lines cut to max_line_bytes", **labels
        )
        self._m_rcvbuf = m.gauge(
            "logflume_agent_udp_rcvbuf_bytes", "Socket receive buffer granted", **labels
        )
        self._sock: socket.socket | None = None

    def _open(self) -> socket.socket:
        host, port = parse_hostport(self.config.listen, "listen")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        size = int(self.config.rcvbuf_bytes)
        try:
            try:  # privileged: may exceed net.core.rmem_max
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, size)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
                granted = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
                if granted < size:
                    self.context.log.warning(
                        "udp: receive buffer capped at %d bytes, not %d: bursts may be "
                        "lost (sysctl -w net.core.rmem_max=%d, or run with CAP_NET_ADMIN)",
                        granted,
                        size,
                        size,
                    )
            sock.bind((host, port))
            sock.setblocking(False)
            self._m_rcvbuf.set(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        except OSError:
            sock.close()
            raise
        return sock

    async def run(self, emit: Emit, offer) -> None:
        loop = asyncio.get_running_loop()
        self._sock = sock = self._open()
        loop.add_reader(sock.fileno(), self._on_readable, offer)
        self.ready()
        try:
            await asyncio.Future()
        finally:
            loop.remove_reader(sock.fileno())
            sock.close()

    def _on_readable(self, offer) -> None:
        assert self._sock is not None  # reading since run() opened it
        recv, headers, cap = self._sock.recv, self._headers, self.config.max_line_bytes
        events: list[Event] = []
        datagrams = truncated = 0
        for _ in range(self.config.batch_size):
            try:
                data = recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # e.g. ICMP errors surfaced on the socket
                self.context.log.debug("udp: recv failed: %s", exc)
                break
            datagrams += 1
            if b"\n" in data:
                for line in data.split(b"\n"):
                    if line:
                        if len(line) > cap:
                            line = line[:cap]
                            truncated += 1
                        events.append(Event(line, headers))
            elif data:
                if len(data) > cap:
                    data = data[:cap]
                    truncated += 1
                events.append(Event(data, headers))
        self._m_datagrams.inc(datagrams)
        if truncated:
            self._m_truncated.inc(truncated)
        if events:
            self._m_lines.inc(len(events))
            if not offer(events):
                self._m_dropped.inc(len(events))
