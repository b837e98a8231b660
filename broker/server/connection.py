"""One client connection: the asyncio shell around framing, the SASL gate, dispatch
and response ordering, each of which is sans-I/O and tested without sockets.

Theory of operation:

- `data_received` feeds the connection's `RequestFramer` (broker.server.framing)
  and takes the complete frames it cuts. A size prefix it refuses (above
  `socket.request.max.bytes`, negative, or above `sasl.server.max.receive.size`
  before SASL authentication) closes the connection before the body is buffered.
- Each frame is decoded and handed to its handler (broker.server.dispatch)
  immediately, in arrival order. Handlers do their synchronous work (e.g. the log
  append) before their first await, so requests on one connection take effect in
  the order they were sent.
- Every request that expects an answer has its place in the connection's
  `ResponseOrder` (broker.server.ordering): answered at once, or filed when its
  handler's awaitable resolves. `_pump` writes what the order releases, which stops
  at the first request still waiting, so a long-polling Fetch holds back the
  responses of requests sent after it: responses leave in request order, as Kafka
  clients require.
- The connection's `ResponseWriter` (broker.server.response_writer) writes each
  response, its FetchSlice parts zero-copy with sendfile (on TLS, read by the
  transport as it encrypts them). While it finishes a slice in the background
  `_pump` waits: nothing is ever written between a header and its records.
- Backpressure: reading pauses while the response order is full or the transport
  asked us to stop writing; it resumes when both drain.
- SASL listeners: until the connection's `SaslGate` (broker.server.sasl_gate) has
  passed, frames go to it instead of the handlers, and the connection carries out
  its decisions: queue the answer, close on an illegal request, and after a failed
  authentication stop reading and close after
  `connection.failed.authentication.delay.ms`. Success sets `principal` to
  `User:<name>` (TLS listeners: from the client certificate); every handler's ACL
  authorization (broker.server.authz) checks that principal.
- Quotas (KIP-219): a handler that found its client over its byte-rate quota
  (broker.quotas) sets `ctx.throttle_ms`; the response carries it as
  throttle_time_ms and the connection reads no further request for that long
  (muted), starting when the response is released; frames already received wait
  in the framer. Clients of the versions that
  throttle themselves (Produce v6+, Fetch v8+) get the response at once; older ones
  get it when the throttle time has passed, as Kafka delays it. An acks=0 produce
  only mutes.
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
import logging
import time
from asyncio import Transport
from collections.abc import Callable

from broker.protocol import (
    ApiKey,
    EncodeError,
    InvalidRequest,
    RequestHeader,
    UnsupportedVersion,
    api_versions_fallback,
    decode_request,
    encode_response,
)
from broker.quotas.manager import client_throttles
from broker.sasl.scram import AuthenticationFailed
from broker.server.dispatch import CloseConnection, RequestContext, lookup
from broker.server.framing import FrameTooLarge, RequestFramer
from broker.server.ordering import ResponseOrder
from broker.server.principal import ANONYMOUS, NoMatchingRule
from broker.server.response_writer import ResponseWriter
from broker.server.sasl_gate import Decision, SaslGate

log = logging.getLogger(__name__)

# What the response order holds: the request's header and its response body (a dict
# to encode), or (header None) the parts of an already framed answer.
Response = tuple[RequestHeader | None, dict | list]


class Connection(asyncio.Protocol):
    """A client connection. Owned by the BrokerServer; event-loop only."""

    def __init__(self, server, listener: str, identify: Callable[[Transport], str] | None = None):
        """`identify` (TLS connections: `TlsListener.identify`) gives the principal
        once the handshake is done; without it the client is User:ANONYMOUS."""
        self.server = server
        self.listener = listener  # name of the listener it arrived on
        self.principal = ANONYMOUS  # "User:...", checked by the handlers' ACL authorization
        self.client_software: tuple[str, str] | None = None  # from ApiVersions v3+ (KIP-511)
        self._identify = identify
        config = server.core.config
        factories = server.sasl_factories.get(listener)
        self.gate = (
            SaslGate(factories, server.core.features.api_versions_fields)
            if factories is not None
            else None
        )
        self.framer = RequestFramer(
            config["socket.request.max.bytes"],
            config["sasl.server.max.receive.size"] if self.gate is not None else None,
        )
        self._writer = ResponseWriter(
            direct_sendfile=server.direct_sendfile,
            loop_sendfile=server.loop_sendfile,
            close=self.close,
            sent=self._pump,
        )
        self.core = server.core
        self.metrics = server.core.metrics
        self.transport: asyncio.Transport | None = None
        self.peer = ("?", 0)
        self._order: ResponseOrder[Response] = ResponseOrder()
        self._waiting: set[asyncio.Future] = set()  # handlers' awaitables not done yet
        self._write_paused = False
        self._read_paused = False
        self._stopped = False
        self._muted: asyncio.TimerHandle | None = None  # quota throttle: unmutes when it fires
        self._drain_waiter: asyncio.Future | None = None
        self.closed = False
        self.last_active = time.monotonic()

    # -- asyncio.Protocol ------------------------------------------------------------

    # a stream protocol is given a Transport; typeshed's base says BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (peer[0], peer[1])
        self._writer.connect(transport)
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
        if self._muted is not None:
            self._muted.cancel()
        self.server.connections.discard(self)
        for future in self._waiting:
            future.cancel()
        self._waiting.clear()
        self._order.clear()
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
        self.framer.receive_data(data)
        self._handle_frames()
        self._update_reading()

    def _handle_frames(self) -> None:
        """Handle the complete frames buffered, in order; a muted connection (quota
        throttle) leaves the rest buffered until it is unmuted, as a muted Kafka
        channel reads nothing more."""
        framer = self.framer
        while not self.closed and self._muted is None:
            try:
                frame = framer.next_frame()
            except FrameTooLarge as e:
                self.metrics.invalid_requests += 1
                self.close(str(e))
                return
            if frame is None:
                break
            self._handle_frame(frame)

    # -- requests --------------------------------------------------------------------

    def _handle_frame(self, frame: bytes) -> None:
        started = time.perf_counter()
        gate = self.gate
        if gate is not None and gate.passed:
            gate = None  # authenticated: no longer in the way
        if gate is not None:  # SASL, not authenticated yet
            if gate.failed:
                return  # closing after the failed-authentication delay
            if gate.takes_bare_tokens:
                self._follow(gate.bare_token(frame), started)
                return
        try:
            header, body = decode_request(frame)
        except UnsupportedVersion as e:
            if e.api_key == ApiKey.API_VERSIONS:
                self._order.add((None, api_versions_fallback(e.header)))
                self._pump()
            else:
                self.metrics.invalid_requests += 1
                self.close(str(e))
            return
        except InvalidRequest as e:
            self.metrics.invalid_requests += 1
            self.close(f"invalid request: {e}")
            return
        if header.api_key == ApiKey.API_VERSIONS and header.api_version >= 3:
            self.client_software = (body["client_software_name"], body["client_software_version"])
        if gate is not None:
            self._follow(gate.request(header, body), started)
            return
        handler = lookup(header.api_key)
        if handler is None:
            self.metrics.invalid_requests += 1
            self.close(f"no handler for api key {header.api_key}")
            return
        ctx = RequestContext(
            self.core,
            header,
            self.peer[0],
            self.peer[1],
            self.listener,
            self.principal,
            request_size=len(frame),
            client_software=self.client_software,
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
            self.metrics.request_done(header.api_key, started, result, header.api_version)
            if ctx.throttle_ms:
                self._throttle(header, result, ctx.throttle_ms, None)
            elif result is not None:
                self._order.add((header, result))
                self._pump()
            return
        future = asyncio.ensure_future(result)
        sequence = self._order.expect()
        self._waiting.add(future)
        future.add_done_callback(lambda f: self._on_future_done(f, sequence, ctx, started))

    def _throttle(self, header: RequestHeader, body: dict | None, ms: int, sequence) -> None:
        """Answer a request whose client exceeded its quota, and mute for `ms`."""
        self._mute(ms)
        if body is not None and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], ms)
        response = None if body is None else (header, body)
        if response is not None and not client_throttles(header.api_key, header.api_version):
            if sequence is None:
                sequence = self._order.expect()
            loop = asyncio.get_running_loop()
            loop.call_later(ms / 1000, self._release_late, sequence, response)
            return
        if sequence is not None:
            self._order.complete(sequence, response)
        elif response is not None:
            self._order.add(response)
        self._pump()

    def _release_late(self, sequence: int, response: Response) -> None:
        if not self.closed:
            self._order.complete(sequence, response)
            self._pump()

    def _mute(self, ms: int) -> None:
        if self._muted is not None:
            self._muted.cancel()
        self._muted = asyncio.get_running_loop().call_later(ms / 1000, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self._muted = None
        self._handle_frames()
        self._update_reading()

    def _on_future_done(
        self, future: asyncio.Future, sequence: int, ctx: RequestContext, started: float
    ) -> None:
        header = ctx.header
        self._waiting.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if isinstance(exc, CloseConnection):
            self.close(str(exc))
        elif exc is not None:
            log.error("request failed", exc_info=exc)
            self.close("handler error")
        else:
            body = future.result()
            self.metrics.request_done(header.api_key, started, body, header.api_version)
            if ctx.throttle_ms:
                self._throttle(header, body, ctx.throttle_ms, sequence)
                return
            self._order.complete(sequence, None if body is None else (header, body))
            self._pump()

    def _follow(self, decision: Decision, started: float) -> None:
        """Carry out the SASL gate's decision on a frame before authentication."""
        if decision.refuse is not None:
            self.metrics.invalid_requests += 1
            self.close(decision.refuse)
            return
        if decision.authenticated:
            self._authenticated()
        if decision.failure is not None:
            self._log_failed_authentication(decision.failure)
        if decision.timed:
            assert decision.header is not None  # timed: a request with a header
            header = decision.header
            self.metrics.request_done(
                header.api_key, started, decision.response, header.api_version
            )
        if decision.response is not None:
            if decision.header is not None and decision.header.api_key == ApiKey.API_VERSIONS:
                assert isinstance(decision.response, dict)  # a decoded request's answer
                self.core.telemetry.filter_api_versions(decision.response)
            self._order.add((decision.header, decision.response))
            self._pump()
        if decision.failure is not None:
            self._stopped = True
            self._update_reading()
            delay = self.core.config["connection.failed.authentication.delay.ms"] / 1000
            asyncio.get_running_loop().call_later(delay, self.close, "authentication failed", True)
        if decision.close is not None:
            self.close(decision.close, graceful=True)

    def _authenticated(self) -> None:
        gate = self.gate
        assert gate is not None  # it authenticated
        self.principal = gate.principal
        self.framer.authenticated()
        self.metrics.authentications[(self.listener, gate.mechanism, True)] += 1
        log.debug(
            "%s:%d on %s authenticated as %s (%s)",
            *self.peer,
            self.listener,
            self.principal,
            gate.mechanism,
        )

    def _log_failed_authentication(self, error: AuthenticationFailed) -> None:
        assert self.gate is not None  # it failed the authentication
        mechanism = self.gate.mechanism
        self.metrics.authentications[(self.listener, mechanism, False)] += 1
        log.info(
            "failed authentication of user %r from %s:%d on %s (%s): %s",
            error.user,
            *self.peer,
            self.listener,
            mechanism,
            error,
        )

    # -- responses -------------------------------------------------------------------

    def _pump(self) -> None:
        """Write the responses the order releases, until one is still waiting or a
        slice is being finished in the background."""
        writer = self._writer
        while not writer.sending and not self.closed:
            response = self._order.pop_ready()
            if response is None:
                break
            header, body = response
            try:
                if isinstance(body, list):
                    parts = body
                else:
                    assert header is not None  # only bare SASL tokens (lists) have none
                    parts = encode_response(header, body)
            except EncodeError:
                log.exception("cannot encode the response to %s", header)
                self.close("response encoding failed")
                return
            writer.write(parts)
        self.last_active = time.monotonic()
        self._update_reading()
        self._notify_drained()

    # -- flow control and closing ------------------------------------------------------

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        should_pause = (
            self._stopped or self._write_paused or self._order.full or self._muted is not None
        )
        if should_pause and not self._read_paused:
            self.transport.pause_reading()
            self._read_paused = True
        elif not should_pause and self._read_paused:
            self.transport.resume_reading()
            self._read_paused = False

    @property
    def busy(self) -> bool:
        """Responses are queued or being sent (the idle sweep leaves it alone)."""
        return bool(self._order) or self._writer.sending

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
