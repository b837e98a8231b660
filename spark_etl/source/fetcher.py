"""Fetch requests for the data source's reads: one partition's raw record set at a
time, from its leader.

Why not confluent-kafka's consume(): it makes one Python Message per record (~0.5 us
each), which was most of a read's cost; a Fetch response's `records` field is the
partition's record batches as the broker stored them, which batches.py decodes
straight into Arrow columns.

The client is a minimal blocking one of our own: one socket per broker (TLS with
Python's ssl), ApiVersions, SASL (PLAIN, SCRAM-SHA-256/512), Metadata for the
leaders, and Fetch. kafka-python (3.x) gives the codec of these requests and its
SASL mechanisms; its network client is not used: it reads a socket 4 KiB at a time
and copies each response three times over, 0.3 us of CPU a record of 200 B, against
0.05 us here, where a response is read into one buffer and `records` is one copy of
it. The settings are the source's librdkafka settings, translated as for the
console's kafka-python client (common/kafka_python_config.py): one the fetcher
cannot honour is an error naming it.

A `Fetcher` holds sockets, so it never lives in what Spark pickles: `borrowed` takes
one from a per-process pool keyed by its settings (pool.py).

`prefetch` sends the next Fetch of a read before the caller decodes the last answer
(a connection's requests are answered in order): the broker reads and sends the next
records meanwhile, where a read otherwise waited for each answer.

`fetch` answers with the partition's data or OFFSET_OUT_OF_RANGE (the caller decides
what that means); a partition whose leader moved or is gone (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE, a refused or dropped connection, ...) is
asked again, after a fresh Metadata, until the caller's deadline; any other error
is a FetchError with Kafka's error name.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import socket
import ssl
import struct
import time
from collections.abc import Hashable, Iterator
from typing import Any

from common.kafka_python_config import KafkaPythonConfigError, client_settings
from spark_etl.source.pool import ClientPool

TP = tuple[str, int]

# A partition's bytes per Fetch: big enough that a request's round trip is small
# next to decoding what it brings, small enough to stay in the caches.
PARTITION_MAX_BYTES = 4 << 20
# How long the broker may hold a Fetch that finds nothing new: a read asks only for
# offsets it knows exist, so this bounds the wait of the rare empty answer.
MAX_WAIT_MS = 100
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.2
POOL_IDLE_S = 300.0
# The largest response frame accepted. A Fetch brings a partition's first batch whole
# however large it is (KIP-74: a topic's max.message.bytes may be far above
# PARTITION_MAX_BYTES); this only guards against a peer that is not a Kafka broker.
MAX_FRAME_BYTES = 1 << 28

# Fetch v4 brought isolation_level; v13 replaced topic names by topic ids, used when
# the metadata has the topic's id. Kafka 3.9 serves up to v17.
FETCH_VERSIONS = (4, 17)
FETCH_MAX_VERSION_BY_NAME = 12
METADATA_VERSIONS = (1, 12)  # v10+ has topic ids
SASL_AUTHENTICATE_MAX_VERSION = 2

NONE = 0
OFFSET_OUT_OF_RANGE = 1
LEADER_NOT_AVAILABLE = 5
TOPIC_AUTHORIZATION_FAILED = 29
UNSUPPORTED_VERSION = 35
API_VERSIONS_KEY = 18
API_VERSIONS_VERSION = 3
# Answers that mean "ask the partition's current leader again" (Kafka's consumer
# refreshes its metadata and retries on each).
_LEADER_MOVED = {
    3,  # UNKNOWN_TOPIC_OR_PARTITION (metadata not yet propagated to this broker)
    LEADER_NOT_AVAILABLE,
    6,  # NOT_LEADER_OR_FOLLOWER
    9,  # REPLICA_NOT_AVAILABLE
    56,  # KAFKA_STORAGE_ERROR
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
    100,  # UNKNOWN_TOPIC_ID
    103,  # INCONSISTENT_TOPIC_ID
}
_NO_TOPIC_ID = "00000000-0000-0000-0000-000000000000"
_SIZE = struct.Struct(">i")

log = logging.getLogger("spark_etl.source")


class FetchError(RuntimeError):
    """An answer a read cannot retry (an authorization or login failure, a broker
    without the versions needed); the message has Kafka's error name and code."""


class _Lost(Exception):
    """A connection failed (refused, dropped, timed out): worth asking again."""


@dataclasses.dataclass(frozen=True)
class PartitionData:
    """One partition's part of a Fetch response."""

    error: int  # NONE or OFFSET_OUT_OF_RANGE
    records: bytes  # the raw record batches (the last one may be cut short)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # read_committed: (producer id, first offset) of the aborted transactions among
    # the records; None in read_uncommitted
    aborted: list[tuple[int, int]] | None


def error_name(code: int) -> str:
    """Kafka's name of an error code (NOT_LEADER_FOR_PARTITION)."""
    from kafka.errors import for_code

    return getattr(for_code(code), "message", f"error {code}")


def _failed(what: str, code: int, message: str | None = None) -> FetchError:
    detail = f": {message}" if message else ""
    return FetchError(f"logflume: {what}: {error_name(code)} ({code}){detail}")


def check_settings(conf: dict) -> dict:
    """kafka-python's settings for the source's librdkafka settings `conf`; a
    ValueError naming the option the fetcher cannot honour."""
    try:
        return client_settings(conf, "logflume-spark", REQUEST_TIMEOUT_S)
    except KafkaPythonConfigError as e:
        raise ValueError(f"logflume: the source's Fetch requests: {e}") from None


def _tls_context(settings: dict[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.get("ssl_cafile"))
    if settings.get("ssl_certfile"):
        context.load_cert_chain(
            settings["ssl_certfile"], settings.get("ssl_keyfile"), settings.get("ssl_password")
        )
    if settings.get("ssl_crlfile"):
        context.load_verify_locations(settings["ssl_crlfile"])
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    context.check_hostname = settings.get("ssl_check_hostname", True)
    return context


@dataclasses.dataclass(frozen=True, eq=False)
class _Sent:
    """A request sent on a connection, its answer to be read."""

    correlation: int
    key: Hashable
    response_class: Any
    version: int


class _Connection:
    """One blocking connection to a broker, ready for requests once made: TLS,
    ApiVersions and the SASL exchange done. Requests may be sent ahead of reading
    the answers to earlier ones (`send`, `receive`)."""

    def __init__(self, host: str, port: int, settings: dict[str, Any]):
        from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

        self._client_id = settings["client_id"]
        self._correlation = 0
        self._in_flight: collections.deque[_Sent] = collections.deque()
        self.throttled_until = 0.0
        try:
            sock = socket.create_connection((host, port), timeout=REQUEST_TIMEOUT_S)
        except OSError as e:
            raise _Lost(f"cannot connect to {host}:{port}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock: socket.socket = sock
        try:
            if settings["security_protocol"].endswith("SSL"):
                try:
                    self._sock = _tls_context(settings).wrap_socket(sock, server_hostname=host)
                except ssl.SSLCertVerificationError as e:
                    raise FetchError(f"logflume: TLS with {host}:{port}: {e}") from None
                except (ssl.SSLError, OSError) as e:
                    raise _Lost(f"TLS with {host}:{port}: {e}") from None
            answer = self.request(
                ApiVersionsRequest(client_software_name="logflume", client_software_version="1"),
                ApiVersionsResponse,
                API_VERSIONS_VERSION,
            )
            if answer.error_code == UNSUPPORTED_VERSION:
                # an older broker: it answered in v0 with the versions it speaks
                served = {k.api_key: k.max_version for k in answer.api_keys}
                version = min(API_VERSIONS_VERSION, served.get(ApiVersionsRequest.API_KEY, 0))
                answer = self.request(ApiVersionsRequest(), ApiVersionsResponse, version)
            if answer.error_code:
                raise _failed(f"ApiVersions of {host}:{port}", answer.error_code)
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
            if settings["security_protocol"].startswith("SASL_"):
                self._login(settings, host)
        except BaseException:
            self.close()
            raise

    def version(self, request_class, lowest: int, highest: int) -> int:
        """The highest version of `request_class` both sides speak, at most `highest`."""
        low, high = self.versions.get(request_class.API_KEY, (0, -1))
        version = min(high, highest, request_class.max_version)
        if version < max(low, lowest):
            raise FetchError(
                f"logflume: the broker serves {request_class.__name__[:-7]} "
                f"v{low}-v{high}; the source needs v{lowest} or later"
            )
        return version

    def _login(self, settings: dict[str, Any], host: str) -> None:
        from kafka.net.sasl import get_sasl_mechanism
        from kafka.protocol.sasl import (
            SaslAuthenticateRequest,
            SaslAuthenticateResponse,
            SaslHandshakeRequest,
            SaslHandshakeResponse,
        )

        name = settings["sasl_mechanism"]
        handshake = self.request(SaslHandshakeRequest(mechanism=name), SaslHandshakeResponse, 1)
        if handshake.error_code:
            raise _failed(
                f"SASL mechanism {name} (the broker offers {', '.join(handshake.mechanisms)})",
                handshake.error_code,
            )
        mechanism = get_sasl_mechanism(name)(host=host, **settings)
        version = self.version(SaslAuthenticateRequest, 0, SASL_AUTHENTICATE_MAX_VERSION)
        while not mechanism.is_done():
            answer = self.request(
                SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes()),
                SaslAuthenticateResponse,
                version,
            )
            if answer.error_code:
                user = settings.get("sasl_plain_username")
                raise _failed(
                    f"SASL {name} login as {user!r}", answer.error_code, answer.error_message
                )
            mechanism.receive(answer.auth_bytes)

    def request(self, request, response_class, version: int):
        """Send `request` as `version`, wait for its response and decode it."""
        return self.receive(self.send(request, response_class, version))

    def send(self, request, response_class, version: int, key: Hashable = None) -> _Sent:
        """Send `request` as `version` without waiting: `receive` reads its answer.
        `key` names it for `sent_for`."""
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        request.API_VERSION = version
        request.with_header(correlation_id=self._correlation, client_id=self._client_id)
        wait = self.throttled_until - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the broker asked for it (quotas, KIP-219)
        try:
            self._sock.sendall(request.encode(framed=True, header=True))
        except OSError as e:  # timeouts, resets, TLS errors
            raise _Lost(str(e) or type(e).__name__) from None
        sent = _Sent(self._correlation, key, response_class, version)
        self._in_flight.append(sent)
        return sent

    def sent_for(self, key: Hashable) -> _Sent | None:
        """The request sent with `key` whose answer is not read yet, if any."""
        return next((sent for sent in self._in_flight if sent.key == key), None)

    def receive(self, sent: _Sent):
        """The answer to `sent`, decoded. A broker answers a connection's requests in
        order: the answers to requests sent before it, which nobody waits for any
        more (a read given up after asking ahead), are read and dropped."""
        if sent not in self._in_flight:
            raise ValueError(f"no request in flight with correlation id {sent.correlation}")
        while True:
            first = self._in_flight.popleft()
            try:
                (size,) = _SIZE.unpack(self._read(4))
                if not 4 <= size <= MAX_FRAME_BYTES:
                    raise FetchError(f"logflume: a response frame of {size} bytes: not Kafka's")
                frame = memoryview(self._read(size))
            except OSError as e:  # timeouts, resets, TLS errors
                raise _Lost(str(e) or type(e).__name__) from None
            (correlation,) = _SIZE.unpack_from(frame)
            if correlation != first.correlation:
                raise _Lost(f"correlation id {correlation}, expected {first.correlation}")
            if first is sent:
                break
        response_class, version = sent.response_class, sent.version
        pos = 4
        if (
            response_class.flexible_version_q(version)
            and response_class.API_KEY != API_VERSIONS_KEY
        ):
            pos = _skip_tagged_fields(frame, pos)  # ApiVersions' header is never flexible
        try:
            answer = response_class.decode(frame[pos:], version=version)
        except Exception as e:  # noqa: BLE001 - any decoding failure: not a Kafka answer
            raise _Lost(f"an undecodable {response_class.__name__}: {e}") from None
        throttle = getattr(answer, "throttle_time_ms", 0) or 0
        if throttle:
            self.throttled_until = time.monotonic() + throttle / 1000
        return answer

    def _read(self, n: int) -> bytearray:
        """Exactly `n` bytes, read into one buffer."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if not k:
                raise _Lost("connection closed by the broker")
            got += k
        return buf

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


class Fetcher:
    """A client of the cluster of one set of settings: Fetch requests to the
    partitions' leaders. Used by one thread at a time (the pool hands it out)."""

    def __init__(self, conf: dict):
        self._settings = check_settings(conf)
        self._conns: dict[int, _Connection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[TP, int] = {}
        self._topic_ids: dict[str, Any] = {}
        self._topic_errors: dict[str, int] = {}  # the last Metadata's error of each topic

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _connection(self, node: int) -> _Connection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self._brokers[node]
            conn = self._conns[node] = _Connection(host, port, self._settings)
        return conn

    def _drop(self, node: int) -> None:
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()

    def _metadata_sources(self) -> Iterator[tuple[int | None, _Connection]]:
        """Connections to ask for Metadata, in turn: the open ones, then the known
        brokers', then the bootstrap servers' (node None: closed after use)."""
        failures = []
        for node in [*self._conns, *(n for n in self._brokers if n not in self._conns)]:
            try:
                yield node, self._connection(node)
            except _Lost as e:
                failures.append(str(e))
        for server in self._settings["bootstrap_servers"]:
            host, _, port = server.rpartition(":")
            try:
                yield None, _Connection(host.strip("[]"), int(port), self._settings)
            except _Lost as e:
                failures.append(str(e))
        raise _Lost("; ".join(failures) or "no broker to ask")

    def refresh_metadata(self, topic: str) -> None:
        """Ask for `topic`'s metadata now: the brokers and its partitions' leaders,
        from the first broker that answers."""
        from kafka.protocol.metadata import MetadataRequest, MetadataResponse

        for node, conn in self._metadata_sources():
            try:
                version = conn.version(MetadataRequest, *METADATA_VERSIONS)
                answer = conn.request(
                    MetadataRequest(
                        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                        allow_auto_topic_creation=False,
                    ),
                    MetadataResponse,
                    version,
                )
                break
            except _Lost:
                if node is not None:
                    self._drop(node)
            finally:
                if node is None:
                    conn.close()
        self._brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        for gone in set(self._conns) - set(self._brokers):
            self._drop(gone)
        for about in answer.topics:
            if about.name != topic:
                continue
            if about.error_code == TOPIC_AUTHORIZATION_FAILED:
                raise _failed(f"metadata of topic {topic!r}", about.error_code)
            self._topic_errors[topic] = about.error_code
            topic_id = getattr(about, "topic_id", None)
            self._topic_ids[topic] = (
                topic_id if str(topic_id or _NO_TOPIC_ID) != _NO_TOPIC_ID else None
            )
            for p in about.partitions:
                self._leaders[(topic, p.partition_index)] = p.leader_id

    def fetch(self, tp: TP, offset: int, read_committed: bool, deadline: float) -> PartitionData:
        """`tp`'s records from `offset` on (up to PARTITION_MAX_BYTES), asked of its
        leader, again after a leader change or a lost connection until `deadline`
        (time.monotonic()), then TimeoutError."""
        while True:
            leader = self._leaders.get(tp, -1)
            try:
                if leader < 0:
                    self.refresh_metadata(tp[0])
                    leader = self._leaders.get(tp, -1)
                if leader >= 0:
                    answer, code = self._fetch_once(leader, tp, offset, read_committed)
                    if answer is not None:
                        return answer
                    why = error_name(code)
                    self._leaders.pop(tp, None)
                else:
                    code = self._topic_errors.get(tp[0], NONE)
                    why = f"no leader ({error_name(code)})" if code else "no leader"
            except _Lost as e:
                why = str(e)
                if leader >= 0:
                    self._drop(leader)
                self._leaders.pop(tp, None)
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"logflume: cannot fetch {tp[0]}-{tp[1]} at offset {offset}: {why}"
                )
            log.info("logflume: fetch of %s-%d: %s; asking again", tp[0], tp[1], why)
            time.sleep(RETRY_BACKOFF_S)

    def prefetch(self, tp: TP, offset: int, read_committed: bool) -> None:
        """Ask `tp`'s leader for its records from `offset` now, without waiting: the
        broker reads and sends them while the caller decodes the last ones, and the
        `fetch` that asks for the same reads the answer. Nothing is sent without a
        known leader and an open connection to it; a failed send drops the
        connection (the `fetch` connects and asks again)."""
        leader = self._leaders.get(tp, -1)
        conn = self._conns.get(leader)
        if conn is None or leader not in self._brokers:
            return
        try:
            self._send_fetch(conn, tp, offset, read_committed)
        except _Lost:
            self._drop(leader)

    def _send_fetch(self, conn: _Connection, tp: TP, offset: int, read_committed: bool) -> _Sent:
        from kafka.protocol.consumer import FetchRequest, FetchResponse

        topic, partition = tp
        topic_id = self._topic_ids.get(topic)
        highest = FETCH_VERSIONS[1] if topic_id is not None else FETCH_MAX_VERSION_BY_NAME
        version = conn.version(FetchRequest, FETCH_VERSIONS[0], highest)
        fetched = FetchRequest.FetchTopic(
            topic=topic,
            partitions=[
                FetchRequest.FetchTopic.FetchPartition(
                    partition=partition,
                    current_leader_epoch=-1,
                    fetch_offset=offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=PARTITION_MAX_BYTES,
                )
            ],
        )
        if topic_id is not None:
            fetched.topic_id = topic_id
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=PARTITION_MAX_BYTES,
            isolation_level=1 if read_committed else 0,
            session_id=0,
            session_epoch=-1,  # no fetch session (KIP-227): a full request each time
            topics=[fetched],
            forgotten_topics_data=[],
            rack_id="",
        )
        return conn.send(request, FetchResponse, version, key=(tp, offset, read_committed))

    def _fetch_once(
        self, leader: int, tp: TP, offset: int, read_committed: bool
    ) -> tuple[PartitionData | None, int]:
        """(the partition's data, NONE), or (None, the code of a leader change)."""
        if leader not in self._brokers:
            return None, LEADER_NOT_AVAILABLE  # a leader not among the brokers listed
        conn = self._connection(leader)
        topic, partition = tp
        sent = conn.sent_for((tp, offset, read_committed))
        if sent is None:
            sent = self._send_fetch(conn, tp, offset, read_committed)
        response = conn.receive(sent)
        if response.error_code:
            raise _failed(f"fetch of {topic}-{partition}", response.error_code)
        part = response.responses[0].partitions[0]
        code = part.error_code
        if code in _LEADER_MOVED:
            return None, code
        if code not in (NONE, OFFSET_OUT_OF_RANGE):
            raise _failed(f"fetch of {topic}-{partition} at offset {offset}", code)
        aborted = None
        if read_committed:
            aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
        return PartitionData(
            code,
            part.records or b"",
            part.high_watermark,
            part.last_stable_offset,
            part.log_start_offset,
            aborted,
        ), NONE


_fetchers: ClientPool[Fetcher] = ClientPool(Fetcher, POOL_IDLE_S)


def borrowed(conf: dict):
    """A Fetcher for librdkafka settings `conf`, from the pool (or new), given back
    after use; one whose use raised is closed instead."""
    return _fetchers.borrowed(conf)


def close_pooled() -> None:
    """Close every idle pooled fetcher (their connections)."""
    _fetchers.close_all()
