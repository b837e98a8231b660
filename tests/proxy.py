"""A TCP proxy for tests that can cut every live connection on demand.

    with TcpProxy(broker.port) as proxy:          # listens on 127.0.0.1:proxy.port
        ...clients connect to proxy.address...
        proxy.cut(swallow_s=0.1)                   # lose responses, then reset everything
        proxy.stats().lost_responses[0]            # Produce responses the client never got

Theory of operation: an asyncio event loop in one daemon thread accepts connections
and opens one upstream connection to `127.0.0.1:target_port` for each; two pump
tasks copy bytes in each direction. `cut()` aborts both sides of every live
connection at once (with SO_LINGER 0 when `rst`, so the peers see a reset rather
than an orderly close, and buffered bytes are discarded). Optionally it first
*swallows* for `swallow_s` seconds: requests still reach the server but its
answers are dropped, so the server has acted on requests whose responses are lost;
and `refuse_s` makes the proxy reset new connections for a while after the cut.

For Kafka clients the proxy also reads the protocol's framing (an int32 size, then
the frame; a request starts with its int16 api key and responses come back in
request order on a connection): it counts requests by api key, and a request whose
response the server sent (all or part of it) but the client did not fully get
(swallowed, or cut mid-frame) counts in `lost_responses`: the server acted on it.
Requests with no byte of response yet at a cut count in `unanswered`; the server
may or may not have acted on those. (acks=0 Produce requests get no response and
would throw this bookkeeping off; the bytes are forwarded all the same.) A Kafka client only learns the proxy's address if the broker advertises
it (`logflume broker --advertised 127.0.0.1:<proxy.port>`).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import socket
import struct
import threading

from common.aio import within
from common.ports import free_port

_LINGER_RST = struct.pack("ii", 1, 0)
_IDLE_S = 600.0  # an idle connection is closed after this long
_CHUNK = 65536


@dataclasses.dataclass
class ProxyStats:
    """A snapshot of the proxy's counters (`TcpProxy.stats()`)."""

    accepted: int = 0
    cuts: int = 0
    connections_cut: int = 0
    refused: int = 0
    requests: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    lost_responses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unanswered: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def copy(self) -> ProxyStats:
        return dataclasses.replace(
            self,
            requests=collections.Counter(self.requests),
            lost_responses=collections.Counter(self.lost_responses),
            unanswered=collections.Counter(self.unanswered),
        )


class _Frames:
    """Splits one direction of a Kafka connection into size-prefixed frames, chunk by
    chunk. `feed` returns (first 8 bytes, tainted) of each frame it completes; a
    frame is tainted if any of its bytes came in a chunk fed with `dropped=True`."""

    def __init__(self):
        self.head = bytearray()
        self.left = 0
        self.tainted = False

    def feed(self, data: bytes, dropped: bool = False) -> list[tuple[bytes, bool]]:
        done = []
        i, n = 0, len(data)
        while i < n:
            self.tainted |= dropped
            if len(self.head) < 4:
                take = min(4 - len(self.head), n - i)
                self.head += data[i : i + take]
                if len(self.head) == 4:
                    self.left = max(0, int.from_bytes(self.head, "big", signed=True))
            else:
                take = min(self.left, n - i)
                self.head += data[i : i + min(take, 8 - len(self.head))]
                self.left -= take
            i += take
            if len(self.head) >= 4 and self.left == 0:
                done.append((bytes(self.head), self.tainted))
                self.head = bytearray()
                self.tainted = False
        return done

    @property
    def partial(self) -> bool:
        return bool(self.head)


class _Connection:
    """One proxied client connection and its upstream; owned by the proxy's loop."""

    def __init__(self, proxy: TcpProxy, client: asyncio.StreamWriter):
        self.proxy = proxy
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.pending: collections.deque[int] = collections.deque()  # api keys awaiting answers
        self.requests = _Frames()
        self.responses = _Frames()
        self.swallowing = False
        self.tasks: list[asyncio.Task] = []

    async def run(self, reader: asyncio.StreamReader) -> None:
        try:
            up_reader, self.upstream = await within(
                asyncio.open_connection("127.0.0.1", self.proxy.target_port), 10
            )
        except (TimeoutError, OSError):
            self.abort()
            return
        self.tasks = [
            asyncio.create_task(self._pump(reader, self.upstream, self._on_request)),
            asyncio.create_task(self._pump(up_reader, self.client, self._on_response)),
        ]
        try:
            await asyncio.gather(*self.tasks)
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise
        finally:
            self.close()

    async def _pump(self, reader, writer, on_data) -> None:
        try:
            while data := await within(reader.read(_CHUNK), _IDLE_S):
                if on_data(data):
                    writer.write(data)
                    await within(writer.drain(), 30)
        except (TimeoutError, OSError):
            pass
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()

    def _on_request(self, data: bytes) -> bool:
        for head, _ in self.requests.feed(data):
            api_key = struct.unpack_from(">h", head, 4)[0] if len(head) >= 6 else -1
            self.pending.append(api_key)
            self.proxy._stats.requests[api_key] += 1
        return True

    def _on_response(self, data: bytes) -> bool:
        for _, tainted in self.responses.feed(data, dropped=self.swallowing):
            api_key = self.pending.popleft() if self.pending else -1
            if tainted:
                self.proxy._stats.lost_responses[api_key] += 1
        return not self.swallowing

    def close(self) -> None:
        """One side ended the connection (or the pumps failed): close the other side
        in an orderly way, unless it was already cut."""
        if self not in self.proxy._live:
            return
        self.proxy._live.discard(self)
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.close()
        for task in self.tasks:
            task.cancel()

    def abort(self) -> None:
        """Reset both sides now (idempotent); what was in flight is accounted for."""
        if self not in self.proxy._live:
            return
        self.proxy._live.discard(self)
        if self.responses.partial and self.pending:  # the server had started to answer
            self.proxy._stats.lost_responses[self.pending.popleft()] += 1
        for api_key in self.pending:
            self.proxy._stats.unanswered[api_key] += 1
        self.pending.clear()
        for writer in (self.client, self.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if self.proxy.rst and sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
                except OSError:
                    pass
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class TcpProxy:
    """A loopback TCP proxy to `127.0.0.1:target_port`, listening on `port` (a free
    one by default). Owned by the test that creates it; use it as a context manager
    or call `start()` / `close()`.

    Thread-safety: all connection state lives in the proxy's own event-loop thread.
    `swallow`, `cut`, `stats`, `live` and `close` may be called from any thread (they hand the work to
    that loop and wait for it); `stats()` returns a copy.
    """

    def __init__(self, target_port: int, port: int | None = None, rst: bool = True):
        self.target_port = target_port
        self.port = port or free_port()
        self.rst = rst
        self._stats = ProxyStats()
        self._live: set[_Connection] = set()
        self._refuse_until = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="proxy")
        self._thread.start()
        self._call(self._listen())
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def swallow(self) -> None:
        """From now on drop what the server sends on every live connection (until it
        is cut); requests still reach the server."""
        self._call(self._swallow())

    def cut(self, swallow_s: float = 0.0, refuse_s: float = 0.0) -> int:
        """Swallow server-to-client bytes for `swallow_s`, then reset every live
        connection; new connections are reset on arrival for `refuse_s` after that.
        Returns how many connections were cut."""
        return self._call(self._cut(swallow_s, refuse_s), timeout=swallow_s + 10)

    def stats(self) -> ProxyStats:
        return self._call(self._snapshot())

    def live(self) -> int:
        return self._call(self._count_live())

    # -- on the proxy's loop ----------------------------------------------------------

    def _call(self, coro, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(self, writer)
        self._live.add(conn)
        self._handlers.add(asyncio.current_task())
        asyncio.current_task().add_done_callback(self._handlers.discard)
        if asyncio.get_running_loop().time() < self._refuse_until:
            self._stats.refused += 1
            conn.abort()
            return
        self._stats.accepted += 1
        await conn.run(reader)

    async def _cut(self, swallow_s: float, refuse_s: float) -> int:
        if swallow_s > 0:
            await self._swallow()
            await asyncio.sleep(swallow_s)
        victims = list(self._live)
        for conn in victims:
            conn.abort()
        self._stats.cuts += 1
        self._stats.connections_cut += len(victims)
        self._refuse_until = asyncio.get_running_loop().time() + refuse_s
        return len(victims)

    async def _swallow(self) -> None:
        for conn in self._live:
            conn.swallowing = True

    async def _snapshot(self) -> ProxyStats:
        return self._stats.copy()

    async def _count_live(self) -> int:
        return len(self._live)

    async def _shutdown(self) -> None:
        self._server.close()
        for conn in list(self._live):
            conn.abort()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)
        await self._server.wait_closed()
