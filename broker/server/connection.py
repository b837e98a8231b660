"""One client connection: framing, dispatch, and responses in request order.

Theory of operation:

- `data_received` appends to a buffer and cuts complete frames (int32 size prefix).
  A size above `socket.request.max.bytes` (or negative) closes the connection at
  once, before the body is buffered; so does one above `sasl.server.max.receive.size`
  (512 KiB) on a SASL connection not authenticated yet, as in Kafka.
- Each frame is decoded and handed to its handler immediately, in arrival order.
  Handlers do their synchronous work (e.g. the log append) before their first
  await, so requests on one connection take effect in the order they were sent.
- Every request that expects an answer gets a slot in `_pending` (a FIFO). A slot is
  done when its handler returned a body or its awaitable resolved. `_pump` writes
  the done slots from the head of the FIFO and stops at the first one still waiting,
  so a long-polling Fetch holds back the responses of requests sent after it:
  responses leave in request order, as Kafka clients require.
- Fetch responses carry FetchSlice parts (ranges of segment files). After the bytes
  before a slice are handed to the transport and its buffer is empty, the slice goes
  out with os.sendfile on the socket directly (zero copy); whatever the socket did
  not take is finished by `loop.sendfile` (stdlib loop) or a buffered copy, while
  `_pump` waits. Nothing is ever written between a header and its slice.
  A TLS connection cannot sendfile (the bytes must be encrypted in this process):
  its response's slices are read with os.preadv into one buffer, written with the
  rest of the response.
- Backpressure: reading pauses while too many responses are queued or the transport
  asked us to stop writing; it resumes when both drain.
- SASL listeners: until the connection's `Authenticator` (broker.sasl) is complete,
  frames go to `_sasl_request` instead of the handlers: ApiVersions, SaslHandshake
  and SaslAuthenticate are answered here (after a v0 handshake, bare size-prefixed
  tokens), anything else closes the connection. A failed authentication is answered
  (SASL_AUTHENTICATION_FAILED with Kafka's message), then reading stops and the
  connection closes after `connection.failed.authentication.delay.ms`. Success sets
  `principal` to `User:<name>`.
- Errors: an undecodable frame, an unknown API or version (other than ApiVersions,
  which gets the v0 fallback answer), a handler that raises: the connection closes
  and the reason is logged. Other connections are unaffected.
- EOF from the client (it shut down its sending side) closes the connection at once:
  what is buffered still goes out, responses still waiting are dropped. Nothing is
  written to a transport that is closing (asyncio would drop the bytes but not the
  sendfile slices, leaving records without their frame on the wire).

Owned by the server; used only on its event loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from asyncio import Transport
from collections.abc import Callable

from broker.protocol import (
    ApiKey,
    EncodeError,
    ErrorCode,
    InvalidRequest,
    UnsupportedVersion,
    api_versions_body,
    api_versions_fallback,
    decode_request,
    encode_response,
)
from broker.sasl.authenticator import Authenticator, Event, IllegalSaslState, State
from broker.sasl.scram import AuthenticationFailed
from broker.server.dispatch import CloseConnection, RequestContext, lookup
from broker.server.principal import ANONYMOUS, NoMatchingRule

log = logging.getLogger(__name__)

MAX_QUEUED_RESPONSES = 256
_BYTES = (bytes, bytearray, memoryview)
_NOT_READY = object()


class _Slot:
    __slots__ = ("header", "body", "future", "started")

    def __init__(self, header, body=_NOT_READY, future=None, started=0.0):
        self.header = header
        self.body = body
        self.future = future
        self.started = started  # time.perf_counter() at arrival, for the latency metric


def _read_slices(parts: list) -> bytearray:
    """A response with its file slices read in: one buffer, each part copied once.
    OSError if a segment file is shorter than its slice."""
    out = bytearray(sum(len(p) for p in parts))
    pos = 0
    with memoryview(out) as view:
        for part in parts:
            if isinstance(part, _BYTES):
                view[pos : pos + len(part)] = part
                pos += len(part)
                continue
            start = pos
            while pos < start + part.length:
                target = view[pos : start + part.length]
                n = os.preadv(part.file.fileno(), [target], part.position + pos - start)
                if n == 0:
                    raise OSError(f"segment file ends inside a fetched slice at {pos - start}")
                pos += n
    return out


class Connection(asyncio.Protocol):
    """A client connection. Owned by the BrokerServer; event-loop only."""

    def __init__(self, server, listener: str, identify: Callable[[Transport], str] | None = None):
        """`identify` (TLS connections: `TlsListener.identify`) gives the principal
        once the handshake is done; without it the client is User:ANONYMOUS."""
        self.server = server
        self.listener = listener  # name of the listener it arrived on
        self.principal = ANONYMOUS  # "User:...", for authorization (later)
        self._identify = identify
        factories = server.sasl_factories.get(listener)
        self.sasl = Authenticator(factories) if factories is not None else None
        self.sendfile = identify is None  # TLS: slices are read, not sendfile'd
        self.core = server.core
        self.metrics = server.core.metrics
        self.max_request = server.core.config["socket.request.max.bytes"]
        self.max_sasl_receive = server.core.config["sasl.server.max.receive.size"]
        self.transport: asyncio.Transport | None = None
        self.peer = ("?", 0)
        self._buf = bytearray()
        self._pending: collections.deque[_Slot] = collections.deque()
        self._sending = False
        self._write_paused = False
        self._read_paused = False
        self._stopped = False
        self._fd = -1
        self._drain_waiter: asyncio.Future | None = None
        self.closed = False
        self.last_active = time.monotonic()

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (peer[0], peer[1])
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None and self.sendfile else -1
        if self.server.fenced:  # reset at once (BrokerServer._fenced), logged there once
            self.closed = True
            transport.abort()
            return
        if self._identify is not None:
            try:
                self.principal = self._identify(transport)
            except NoMatchingRule as e:
                self.metrics.tls_handshake_failures += 1
                log.warning("refusing %s:%d on %s: %s", *self.peer, self.listener, e)
                self.closed = True
                transport.abort()
                return
            log.debug("TLS client %s:%d on %s is %s", *self.peer, self.listener, self.principal)
        self.server.connections.add(self)
        self.metrics.connections_created += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for slot in self._pending:
            if slot.future is not None:
                slot.future.cancel()
        self._pending.clear()
        self._notify_drained()

    def eof_received(self) -> bool:
        """The client shut down its sending side. asyncio closes the transport when
        this returns False, and a closing transport silently drops every later
        write; responses still waiting (a long-poll fetch, a join) would then lose
        their plain-bytes parts while their FetchSlice parts still went out by
        os.sendfile on the socket: record bytes without a frame around them. So the
        connection counts as closed from here on; what is already buffered still
        goes out."""
        self.close("client closed its sending side", graceful=True)
        return False

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pump()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        buf = self._buf
        buf += data
        while len(buf) >= 4 and not self.closed:
            size = int.from_bytes(buf[:4], "big", signed=True)
            if size < 0 or size > self.max_request:
                self.metrics.invalid_requests += 1
                self.close(
                    f"request size {size} exceeds socket.request.max.bytes={self.max_request}"
                )
                return
            if size > self.max_sasl_receive and self.sasl is not None and not self.sasl.complete:
                self.metrics.invalid_requests += 1
                self.close(
                    f"request size {size} before authentication exceeds "
                    f"sasl.server.max.receive.size={self.max_sasl_receive}"
                )
                return
            if len(buf) < 4 + size:
                break
            with memoryview(buf) as view:
                frame = bytes(view[4 : 4 + size])
            del buf[: 4 + size]
            self._handle_frame(frame)
        self._update_reading()

    # -- requests --------------------------------------------------------------------

    def _handle_frame(self, frame: bytes) -> None:
        started = time.perf_counter()
        sasl = self.sasl
        if sasl is not None and not sasl.complete:
            if sasl.state is State.FAILED:
                return  # closing after the failed-authentication delay
            if sasl.state is State.RAW_TOKENS:
                self._sasl_authenticate(None, frame)
                return
        try:
            header, body = decode_request(frame)
        except UnsupportedVersion as e:
            if e.api_key == ApiKey.API_VERSIONS:
                self._pending.append(_Slot(e.header, api_versions_fallback(e.header)))
                self._pump()
            else:
                self.metrics.invalid_requests += 1
                self.close(str(e))
            return
        except InvalidRequest as e:
            self.metrics.invalid_requests += 1
            self.close(f"invalid request: {e}")
            return
        if sasl is not None and not sasl.complete:
            self._sasl_request(header, body, started)
            return
        handler = lookup(header.api_key)
        if handler is None:
            self.metrics.invalid_requests += 1
            self.close(f"no handler for api key {header.api_key}")
            return
        ctx = RequestContext(
            self.core, header, self.peer[0], self.peer[1], self.listener, self.principal
        )
        try:
            result = handler(ctx, body)
        except CloseConnection as e:
            self.close(f"{ApiKey(header.api_key).name}: {e}")
            return
        except Exception:
            log.exception(
                "handler for %s v%d failed", ApiKey(header.api_key).name, header.api_version
            )
            self.close("handler error")
            return
        if result is None or isinstance(result, dict):
            self.metrics.request_done(header.api_key, started, result)
            if result is not None:
                self._pending.append(_Slot(header, result))
                self._pump()
            return
        future = asyncio.ensure_future(result)
        slot = _Slot(header, future=future, started=started)
        self._pending.append(slot)
        future.add_done_callback(lambda f: self._on_future_done(slot, f))

    def _sasl_request(self, header, body: dict, started: float) -> None:
        """A request on a SASL connection that is not authenticated yet."""
        try:
            event = self.sasl.check(header.api_key)
        except IllegalSaslState as e:
            self.metrics.invalid_requests += 1
            self.close(f"{e} (IllegalSaslStateException)")
            return
        if event is Event.AUTHENTICATE:
            self._sasl_authenticate(header, body["auth_bytes"])
            return
        if event is Event.API_VERSIONS:
            self.sasl.api_versions()
            response = api_versions_body()
        else:
            response = self.sasl.handshake(body["mechanism"], header.api_version)
        self.metrics.request_done(header.api_key, started, response)
        self._pending.append(_Slot(header, response))
        self._pump()
        if self.sasl.state is State.FAILED:
            self.close(f"SASL mechanism {body['mechanism']!r} is not enabled", graceful=True)

    def _sasl_authenticate(self, header, token: bytes) -> None:
        """One SASL token: SaslAuthenticate's auth_bytes, or (header None) a bare
        frame after a v0 handshake, answered the same way."""
        sasl = self.sasl
        try:
            out = sasl.authenticate(token, raw=header is None)
        except IllegalSaslState as e:
            self.close(f"{e} (IllegalSaslStateException)")
            return
        except AuthenticationFailed as e:
            self._authentication_failed(header, e)
            return
        if sasl.complete:
            self.principal = sasl.principal
            self.metrics.authentications[(self.listener, sasl.mechanism, True)] += 1
            log.debug(
                "%s:%d on %s authenticated as %s (%s)",
                *self.peer,
                self.listener,
                self.principal,
                sasl.mechanism,
            )
        if header is None:
            self._pending.append(_Slot(None, [len(out).to_bytes(4, "big"), out]))
        else:
            response = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "auth_bytes": out,
                "session_lifetime_ms": 0,
            }
            self._pending.append(_Slot(header, response))
        self._pump()

    def _authentication_failed(self, header, error: AuthenticationFailed) -> None:
        """Answer (SaslAuthenticate only: the v0 path has no way to), stop reading,
        close after connection.failed.authentication.delay.ms (Kafka's default 100)."""
        mechanism = self.sasl.mechanism
        self.metrics.authentications[(self.listener, mechanism, False)] += 1
        log.info(
            "failed authentication of user %r from %s:%d on %s (%s): %s",
            error.user,
            *self.peer,
            self.listener,
            mechanism,
            error,
        )
        if header is not None:
            response = {
                "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                "error_message": str(error),
                "auth_bytes": error.server_final,
                "session_lifetime_ms": 0,
            }
            self._pending.append(_Slot(header, response))
            self._pump()
        self._stopped = True
        self._update_reading()
        delay = self.core.config["connection.failed.authentication.delay.ms"] / 1000
        asyncio.get_running_loop().call_later(delay, self.close, "authentication failed", True)

    def _on_future_done(self, slot: _Slot, future: asyncio.Future) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if isinstance(exc, CloseConnection):
            self.close(str(exc))
        elif exc is not None:
            log.error("request failed", exc_info=exc)
            self.close("handler error")
        else:
            self.metrics.request_done(slot.header.api_key, slot.started, future.result())
            self._pump()

    # -- responses -------------------------------------------------------------------

    def _pump(self) -> None:
        """Write finished responses from the head of the queue, in order."""
        while self._pending and not self._sending and not self.closed:
            slot = self._pending[0]
            if slot.future is not None:
                if not slot.future.done():
                    break
                body = slot.future.result()
            else:
                body = slot.body
            self._pending.popleft()
            if body is None:
                continue
            try:
                parts = body if isinstance(body, list) else encode_response(slot.header, body)
            except EncodeError:
                log.exception("cannot encode the response to %s", slot.header)
                self.close("response encoding failed")
                return
            self._write_parts(parts)
        self.last_active = time.monotonic()
        self._update_reading()
        self._notify_drained()

    def _write_parts(self, parts: list) -> None:
        transport = self.transport
        if transport.is_closing():  # writes would be dropped, sendfile would not
            self.close("transport closed")
            return
        if not self.sendfile:
            try:
                transport.write(_read_slices(parts))
            except OSError as e:
                self.close(f"reading a fetched slice failed: {e}")
            return
        chunk: list = []
        for i, part in enumerate(parts):
            if isinstance(part, _BYTES):
                chunk.append(part)
                continue
            if chunk:
                transport.writelines(chunk)
                chunk = []
            sent = self._sendfile_now(part)
            if sent < part.length:
                self._sending = True
                task = asyncio.ensure_future(self._send_rest(part, sent, parts[i + 1 :]))
                task.add_done_callback(self._on_send_done)
                return
        if chunk:
            transport.writelines(chunk)

    def _sendfile_now(self, part) -> int:
        """os.sendfile as much of the slice as the socket takes without blocking."""
        if (
            self._fd < 0
            or self.transport.get_write_buffer_size()
            or not self.server.direct_sendfile
        ):
            return 0
        sent = 0
        src = part.file.fileno()
        try:
            while sent < part.length:
                n = os.sendfile(self._fd, src, part.position + sent, part.length - sent)
                if n == 0:
                    break
                sent += n
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self.close(f"sendfile failed: {e}")
            return part.length
        return sent

    async def _send_rest(self, part, sent: int, rest: list) -> None:
        loop = asyncio.get_running_loop()
        remaining = part.length - sent
        if self.server.loop_sendfile:
            await loop.sendfile(self.transport, part.file, part.position + sent, remaining)
        else:
            self.transport.write(os.pread(part.file.fileno(), remaining, part.position + sent))
        self._sending = False
        if rest and not self.closed:
            self._write_parts(rest)

    def _on_send_done(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            self.close(f"sendfile failed: {task.exception()}")
            return
        self._pump()

    # -- flow control and closing ------------------------------------------------------

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        should_pause = (
            self._stopped or self._write_paused or len(self._pending) >= MAX_QUEUED_RESPONSES
        )
        if should_pause and not self._read_paused:
            self.transport.pause_reading()
            self._read_paused = True
        elif not should_pause and self._read_paused:
            self.transport.resume_reading()
            self._read_paused = False

    @property
    def busy(self) -> bool:
        return bool(self._pending) or self._sending

    def wait_drained(self) -> asyncio.Future:
        """A future that resolves once no response is queued or being sent."""
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = asyncio.get_running_loop().create_future()
        self._notify_drained()
        return self._drain_waiter

    def _notify_drained(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done() and (self.closed or not self.busy):
            waiter.set_result(None)

    def stop_reading(self) -> None:
        """Shutdown: take no new requests; queued ones still get their responses."""
        self._stopped = True
        self._update_reading()

    def close(self, reason: str, graceful: bool = False) -> None:
        """Drop the connection; `graceful` lets already-buffered responses go out first."""
        if self.closed:
            return
        log.log(
            logging.DEBUG if graceful else logging.INFO,
            "closing connection from %s:%d: %s",
            self.peer[0],
            self.peer[1],
            reason,
        )
        self.closed = True
        if self.transport is not None:
            if graceful:
                self.transport.close()
            else:
                self.transport.abort()
