"""tests/proxy.py itself: framing, forwarding, swallowed responses, cuts, refusal."""

import queue
import socket
import struct
import threading
import time

import pytest

from tests.proxy import TcpProxy, _Frames


def request(api_key: int, corr: int, payload: bytes = b"") -> bytes:
    body = struct.pack(">hhi", api_key, 0, corr) + payload
    return struct.pack(">i", len(body)) + body


def test_frames_split_at_any_chunk_boundary_and_taint():
    a, b, c = request(0, 1, b"x" * 10), request(3, 2), struct.pack(">i", 0)
    data = a + b + c
    for step in (1, 3, 7, len(data)):
        frames = _Frames()
        done = []
        for i in range(0, len(data), step):  # chunks starting inside b or c are dropped
            done += frames.feed(data[i : i + step], dropped=i >= len(a))
        assert [h for h, _ in done] == [a[:8], b[:8], c]
        assert [t for _, t in done] == [False, step < len(data), step < len(data)]
        assert not frames.partial


class GatedEcho:
    """A loopback server echoing each chunk once `gate` is set; `received` gets every
    chunk as it arrives. Owned by one test; its threads are daemons."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.gate = threading.Event()
        self.gate.set()
        self.received: queue.Queue = queue.Queue()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn):
        try:
            while data := conn.recv(65536):
                self.received.put(data)
                assert self.gate.wait(30)
                conn.sendall(data)
        except OSError:
            pass

    def close(self):
        self.server.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def echo():
    server = GatedEcho()
    yield server
    server.close()


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_swallowed_response_counts_as_lost_and_cut_resets(echo):
    with TcpProxy(echo.port) as proxy:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        first = request(0, 1, b"payload")
        client.sendall(first)
        assert recv_exact(client, len(first)) == first
        assert echo.received.get(timeout=10) == first
        assert proxy.live() == 1

        echo.gate.clear()
        client.sendall(request(0, 2))  # reaches the server, which holds its answer
        echo.received.get(timeout=10)
        client.sendall(request(1, 3))  # will never be answered
        wait_until(lambda: proxy.stats().requests[1] == 1)
        proxy.swallow()
        echo.gate.set()
        wait_until(lambda: proxy.stats().lost_responses[0] == 1)
        assert proxy.cut() == 1
        with pytest.raises(ConnectionResetError):
            client.recv(100)
        client.close()
        stats = proxy.stats()
        assert (stats.accepted, stats.cuts, stats.connections_cut) == (1, 1, 1)
        assert stats.requests == {0: 2, 1: 1}
        assert stats.lost_responses[0] == 1 and stats.unanswered[0] == 0
        # the answer to request 3 is swallowed too if it came back before the cut
        assert stats.lost_responses[1] + stats.unanswered[1] == 1

        again = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        again.sendall(first)
        assert recv_exact(again, len(first)) == first
        again.close()


def test_refuse_resets_new_connections_for_a_while(echo):
    with TcpProxy(echo.port) as proxy:
        assert proxy.cut(refuse_s=60) == 0
        with pytest.raises(OSError):  # the reset may even beat connect() returning
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
                client.sendall(request(0, 1))
                assert client.recv(100) == b"never"
        wait_until(lambda: proxy.stats().refused == 1)
        assert proxy.stats().accepted == 0
