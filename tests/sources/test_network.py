"""UDP, TCP and HTTP sources on real loopback sockets."""

import asyncio
import logging
import socket
import subprocess

import aiohttp
import orjson

from common.aio import within
from common.ports import free_port
from sources.tcp import OctetCounter
from tests.sources.harness import FakeMetrics, Harness, build


def udp_source(tmp_path, port, metrics=None, **config):
    return build(("source", "udp"), tmp_path, metrics, listen=f"127.0.0.1:{port}", **config)


async def started(h: Harness, port: int, kind: str) -> Harness:
    """Start the source and wait for its readiness signal, which must come only
    once its socket is bound (a probe can no longer bind the port)."""
    ready = asyncio.Event()
    h.source.on_ready = ready.set
    h.start()
    await h.wait_for(ready.is_set, what="ready")
    family_type = socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
    with socket.socket(socket.AF_INET, family_type) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return h
    raise AssertionError(f"{kind} source signalled ready before binding port {port}")


def nc_send(path, port: int) -> None:
    with open(path, "rb") as stdin:
        subprocess.run(["nc", "-u", "-w0", "127.0.0.1", str(port)], stdin=stdin, check=True)


async def test_udp_lines_from_nc(tmp_path):
    port = free_port()
    h = await started(Harness(udp_source(tmp_path, port, add_host=True)), port, "udp")
    for i, text in enumerate((b"hello\n", b"one\ntwo\nthree\n", b"no newline")):
        # stdin from a file, as from `echo ... |`: with -w0, nc sends what stdin
        # holds when it starts, so the data must be there already.
        (tmp_path / f"in{i}").write_bytes(text)
        await asyncio.to_thread(nc_send, tmp_path / f"in{i}", port)
    await h.wait_lines(5)
    await h.stop()
    assert h.bodies() == [b"hello", b"one", b"two", b"three", b"no newline"]
    assert h.events[0].headers["source"] == "src" and h.events[0].headers["host"]
    assert h.events[0].ack is None


async def test_udp_counts_drops_when_full(tmp_path):
    port = free_port()
    metrics = FakeMetrics()
    h = await started(Harness(udp_source(tmp_path, port, metrics)), port, "udp")
    h.full = True
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(20):
            s.sendto(b"drop %d\n" % i, ("127.0.0.1", port))
        await h.wait_for(
            lambda: metrics.value("logflume_agent_udp_dropped_total") == 20, what="20 drops"
        )
        h.full = False
        s.sendto(b"kept\n", ("127.0.0.1", port))
        await h.wait_lines(1)
    await h.stop()
    assert h.bodies() == [b"kept"]
    assert metrics.value("logflume_agent_udp_lines_total") == 21


async def test_udp_receive_buffer_default_is_64_mib_and_reported(tmp_path, caplog):
    port = free_port()
    metrics = FakeMetrics()
    src = udp_source(tmp_path, port, metrics)
    assert src.config.rcvbuf_bytes == 64 * 1024 * 1024
    with caplog.at_level(logging.WARNING):
        h = await started(Harness(src), port, "udp")
    granted = metrics.value("logflume_agent_udp_rcvbuf_bytes")
    await h.stop()
    # Linux doubles the value asked for (bookkeeping); a capped buffer is warned about
    assert granted > 0
    assert (granted < 64 * 1024 * 1024) == ("receive buffer capped" in caplog.text)


def tcp_source(tmp_path, port, metrics=None, **config):
    return build(("source", "tcp"), tmp_path, metrics, listen=f"127.0.0.1:{port}", **config)


async def send_tcp(port: int, data: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def test_tcp_newline_and_octet_counting(tmp_path):
    port = free_port()
    h = await started(Harness(tcp_source(tmp_path, port)), port, "tcp")
    await send_tcp(port, b"12 apples\nsecond line\nunterminated")
    await h.wait_lines(3)
    frames = [
        b"<14>1 2024-01-01T00:00:00Z host app - - - hello\nworld",
        b"<13>Jan  1 00:00:00 h t: x",
    ]
    await send_tcp(port, b"".join(b"%d %s" % (len(f), f) for f in frames))
    await h.wait_lines(5)
    await h.stop()
    assert h.bodies() == [b"12 apples", b"second line", b"unterminated"] + frames


def test_octet_counter_split_and_cut():
    oc = OctetCounter(max_line=5)
    stream = b"3 abc" + b"10 0123456789" + b"2 ok"
    out = []
    for i in range(len(stream)):  # one byte at a time
        out += oc.feed(stream[i : i + 1])
    assert out == [b"abc", b"01234", b"ok"] and oc.truncated == 1


async def test_tcp_backpressure_stops_reading_socket(tmp_path):
    port = free_port()
    metrics = FakeMetrics()
    h = Harness(tcp_source(tmp_path, port, metrics, read_bytes=4096))
    h.gate = asyncio.Event()
    await started(h, port, "tcp")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    line = b"x" * 99 + b"\n"
    sent = 0
    blocked = False
    for _ in range(2000):  # 200 MB if nothing pushes back
        writer.write(line * 1000)
        sent += 1000
        try:
            await within(writer.drain(), 1.0)
        except TimeoutError:
            blocked = True
            break
    assert blocked, "the sender was never blocked"
    read = metrics.value("logflume_agent_tcp_lines_total")
    assert read <= 4096 // 100 + 1  # one read, parked in emit
    h.gate.set()
    writer.close()
    await h.wait_lines(sent, limit=30)
    await h.stop()
    assert len(h.events) == sent


async def test_tcp_connection_limit_and_idle_timeout(tmp_path):
    port = free_port()
    metrics = FakeMetrics()
    src = tcp_source(tmp_path, port, metrics, max_connections=1, idle_timeout=0.3)
    h = await started(Harness(src), port, "tcp")
    r1, w1 = await asyncio.open_connection("127.0.0.1", port)
    w1.write(b"first\n")
    await h.wait_lines(1)
    r2, w2 = await asyncio.open_connection("127.0.0.1", port)
    assert await within(r2.read(), 5) == b""  # refused: closed at once
    assert await within(r1.read(), 5) == b""  # idle: closed by the server
    await h.wait_for(lambda: metrics.value("logflume_agent_tcp_rejected_connections_total") == 1)
    w1.close()
    w2.close()
    await h.stop()


def http_source(tmp_path, port, **config):
    return build(("source", "http"), tmp_path, None, listen=f"127.0.0.1:{port}", **config)


async def test_http_lines_json_full_and_too_large(tmp_path):
    port = free_port()
    h = await started(Harness(http_source(tmp_path, port, max_body_bytes=1000)), port, "tcp")
    url = f"http://127.0.0.1:{port}/"
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        async with s.get(f"http://127.0.0.1:{port}/health") as r:
            assert r.status == 200
        async with s.post(url, data=b"a\nb\n", headers={"Content-Type": "text/plain"}) as r:
            assert r.status == 204
        async with s.post(url, json=["s1", "s2"]) as r:
            assert r.status == 204
        async with s.post(url, json=[{"k": 1}, {"k": "v"}]) as r:
            assert r.status == 204
        async with s.post(url, json={"not": "an array"}) as r:
            assert r.status == 400
        async with s.post(url, data=b"x" * 2000) as r:
            assert r.status == 413
        h.full = True
        async with s.post(url, data=b"refused\n") as r:
            assert r.status == 503 and r.headers["Retry-After"] == "1"
    await h.stop()
    assert h.bodies()[:4] == [b"a", b"b", b"s1", b"s2"]
    assert [e.record for e in h.events[4:]] == [{"k": 1}, {"k": "v"}]
    assert orjson.loads(h.events[4].body) == {"k": 1}


async def test_validate_and_listen_ports(tmp_path):
    from sources.http import HttpSource
    from sources.tcp import TcpSource
    from sources.udp import UdpSource

    assert UdpSource.listen_ports(UdpSource.Config(listen="0.0.0.0:8285")) == [("udp", 8285)]
    assert TcpSource.listen_ports(TcpSource.Config(listen=":5140")) == [("tcp", 5140)]
    assert "listen" in UdpSource.validate(UdpSource.Config(listen="nope"))[0]
    errors = TcpSource.validate(TcpSource.Config(framing="x", idle_timeout=0))
    assert any("framing" in e for e in errors) and any("idle_timeout" in e for e in errors)
    assert any("path" in e for e in HttpSource.validate(HttpSource.Config(path="/health")))
