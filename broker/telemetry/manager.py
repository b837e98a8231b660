"""GetTelemetrySubscriptions and PushTelemetry (KIP-714), as Kafka's
ClientMetricsManager serves them; the subscriptions themselves are
broker.telemetry.subscriptions, stored by broker.telemetry.store.

A client first asks for its subscription with the zero instance id: the broker
assigns it a random one, and answers the metric prefixes, push interval and
subscription id of what it matches (no metrics: it pushes nothing and asks again
after the interval). Then it pushes every interval:

- a push before the interval since the previous one (the first push after a
  GetTelemetrySubscriptions excepted: clients add jitter) is THROTTLING_QUOTA_EXCEEDED,
  and so is a GetTelemetrySubscriptions before the interval (unless the last push
  was refused with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE, or the
  subscriptions changed since it asked);
- a subscription id that is not the client's current one (the subscriptions
  changed) is UNKNOWN_SUBSCRIPTION_ID: it asks again;
- an unknown compression type is UNSUPPORTED_COMPRESSION_TYPE, a payload over
  `telemetry.max.bytes` TELEMETRY_TOO_LARGE, one that does not decompress or decode
  INVALID_RECORD (Kafka's answer when its receiver fails); the zero instance id, or
  any push after a terminating one, INVALID_REQUEST.

A terminating push (the client closing) is accepted whenever it comes. An instance
is forgotten max(60 s, 3 push intervals) after its last request (the oldest first
past `MAX_INSTANCES`, as Kafka's cache); its series on
/metrics (broker.telemetry.export) 3 intervals after its last push, 1 after a
terminating one. An instance unknown here (another broker answered its first
request, or this one restarted) is taken up as new, with the same subscription id.

`advertised()` is what ApiVersions asks: whether to list these two APIs. Kafka
lists them when a telemetry receiver plugin is configured; here the receiver is
always there (the /metrics export), so they are listed when at least one
subscription exists, so that a broker without any is asked nothing and clients push
nothing. Event-loop only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric

from broker.protocol import ApiKey, ErrorCode
from broker.telemetry.export import MalformedPayload, TelemetryExport, decode
from broker.telemetry.store import ClientMetricsStore
from broker.telemetry.subscriptions import (
    ClientMetricsConfigError,
    Props,
    Selection,
    Subscription,
    apply_changes,
    parse,
    select,
)
from common.compression import Codec, CorruptRecordError, decompress_bounded

log = logging.getLogger(__name__)

ZERO = uuid.UUID(int=0)
RESERVED = (ZERO, uuid.UUID(int=1))  # Kafka's Uuid.RESERVED: zero and the metadata topic id
# What the broker accepts, Kafka's order: zstd, lz4, gzip, snappy.
ACCEPTED_COMPRESSION = [int(Codec.ZSTD), int(Codec.LZ4), int(Codec.GZIP), int(Codec.SNAPPY)]
TELEMETRY_APIS = (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY)
CACHE_EXPIRY_S = 60.0
MAX_INSTANCES = 16384  # Kafka's: the oldest is forgotten past it
# A decompressed payload may be this many times `telemetry.max.bytes`, no more.
DECOMPRESSION_FACTOR = 32
_SWEEP_EVERY_S = 1.0


@dataclasses.dataclass
class ClientInstance:
    """One client instance's subscription and request times (monotonic seconds)."""

    instance_id: uuid.UUID
    client: dict[str, str | None]
    selection: Selection
    version: int  # the subscriptions' version it was computed from
    last_get: float = -1e18
    last_push: float = -1e18
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    last_seen: float = 0.0

    @property
    def interval_s(self) -> float:
        return self.selection.interval_ms / 1000


class ClientMetricsManager:
    """Subscriptions, client instances and the export of what they push."""

    def __init__(
        self,
        store: ClientMetricsStore,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.max_bytes = max_bytes
        self.clock = clock
        self.configs: dict[str, Props] = {}  # name -> its configs, as stored
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0  # grows with every subscription change
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        self.export = TelemetryExport()
        self._swept = 0.0
        store.on_change = self._changed

    async def start(self) -> None:
        await self.store.load()

    def advertised(self) -> bool:
        """Whether ApiVersions lists GetTelemetrySubscriptions and PushTelemetry."""
        return bool(self.subscriptions)

    def filter_api_versions(self, answer: dict) -> dict:
        """An ApiVersions answer without the two APIs unless `advertised()`."""
        if not self.advertised():
            answer["api_keys"] = [
                k for k in answer["api_keys"] if k["api_key"] not in TELEMETRY_APIS
            ]
        return answer

    # -- subscriptions (client-metrics config resources) --------------------------------

    def _changed(self, name: str, props: Props) -> None:
        if not props:
            self.configs.pop(name, None)
            self.subscriptions.pop(name, None)
        else:
            try:
                sub = parse(name, props)
            except ClientMetricsConfigError as e:
                log.error("client-metrics subscription %r is invalid (%s); ignored", name, e)
                return
            self.configs[name] = dict(props)
            self.subscriptions[name] = sub
        self.version += 1

    def names(self) -> list[str]:
        return sorted(self.configs)

    def describe(self, name: str) -> Props:
        """The configs of the subscription `name` ({} if there is none)."""
        if not name:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty"
            )
        return dict(self.configs.get(name, {}))

    async def alter(
        self, name: str, changes: Iterable[Mapping], incremental: bool, validate_only: bool
    ) -> None:
        """Apply an (Incremental)AlterConfigs resource's changes to the subscription
        `name`; ClientMetricsConfigError as Kafka refuses them."""
        props = apply_changes(self.configs.get(name, {}), changes, incremental)
        parse(name, props)
        if not validate_only:
            await self.store.write(name, props)

    # -- the two APIs -------------------------------------------------------------------

    def get_subscriptions(self, requested: uuid.UUID, client: dict[str, str | None]) -> dict:
        now = self.clock()
        self._sweep(now)
        instance_id = requested if requested != ZERO else self._new_id()
        inst = self._instance(instance_id, client, now)
        body = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "client_instance_id": instance_id,
            "subscription_id": 0,
            "accepted_compression_types": [],
            "push_interval_ms": 0,
            "telemetry_max_bytes": 0,
            "delta_temporality": False,
            "requested_metrics": [],
        }
        retry = inst.last_error in (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        )
        if now - max(inst.last_get, inst.last_push) < inst.interval_s and not retry:
            body["error_code"] = ErrorCode.THROTTLING_QUOTA_EXCEEDED
            return body
        inst.last_get = now
        inst.last_error = ErrorCode.NONE
        sel = inst.selection
        body.update(
            subscription_id=sel.subscription_id,
            accepted_compression_types=ACCEPTED_COMPRESSION,
            push_interval_ms=sel.interval_ms,
            telemetry_max_bytes=self.max_bytes,
            requested_metrics=list(sel.metrics),
        )
        return body

    def push(self, body: dict, client: dict[str, str | None]) -> int:
        """The error code answering a PushTelemetry request `body`."""
        instance_id = body["client_instance_id"]
        if instance_id in RESERVED:
            return ErrorCode.INVALID_REQUEST
        now = self.clock()
        self._sweep(now)
        inst = self._instance(instance_id, client, now)
        code = self._check_push(inst, body, now)
        if body["terminating"]:
            inst.terminating = True
        inst.last_error = code
        if code != ErrorCode.NONE:
            return code
        metrics = body["metrics"]
        if metrics:
            try:
                raw = decompress_bounded(
                    body["compression_type"], metrics, self.max_bytes * DECOMPRESSION_FACTOR
                )
                points = decode(raw, inst.selection.metrics)
            except (CorruptRecordError, MalformedPayload) as e:
                log.debug("telemetry of client %s refused: %s", instance_id, e)
                inst.last_error = ErrorCode.INVALID_RECORD
                return ErrorCode.INVALID_RECORD
            keep = inst.interval_s * (1 if body["terminating"] else 3)
            self.export.record(instance_id, inst.client, points, now + keep)
        return ErrorCode.NONE

    def _check_push(self, inst: ClientInstance, body: dict, now: float) -> int:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST
        first_after_get = inst.last_get > inst.last_push
        if not first_after_get and now - inst.last_push < inst.interval_s:
            if not body["terminating"]:
                return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        else:
            inst.last_push = now
        if body["subscription_id"] != inst.selection.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if body["compression_type"] not in Codec._value2member_map_:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(body["metrics"]) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self.instances and candidate not in RESERVED:
                return candidate

    def _instance(
        self, instance_id: uuid.UUID, client: dict[str, str | None], now: float
    ) -> ClientInstance:
        """The client instance, created (or its subscription recomputed, when the
        subscriptions changed since) from the request's client attributes."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.version != self.version:
            attrs = dict(inst.client) if inst is not None else dict(client)
            attrs["client_instance_id"] = str(instance_id)
            selection = select(self.subscriptions.values(), attrs, instance_id)
            inst = ClientInstance(instance_id, attrs, selection, self.version)
            self.instances.pop(instance_id, None)
            if len(self.instances) >= MAX_INSTANCES:
                del self.instances[next(iter(self.instances))]
            self.instances[instance_id] = inst
        inst.last_seen = now
        return inst

    def _sweep(self, now: float) -> None:
        """Forget instances idle past max(60 s, 3 intervals), at most once a second."""
        if now - self._swept < _SWEEP_EVERY_S:
            return
        self._swept = now
        idle = [
            i
            for i, inst in self.instances.items()
            if now - inst.last_seen > max(CACHE_EXPIRY_S, 3 * inst.interval_s)
        ]
        for i in idle:
            del self.instances[i]
        self.export.expire(now)

    # -- /metrics -----------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        self._sweep(self.clock())
        self.export.expire(self.clock())
        yield GaugeMetricFamily(
            "logflume_broker_client_metrics_instances",
            "Client instances that asked for their telemetry subscription or pushed "
            "metrics recently (KIP-714)",
            len(self.instances),
        )
        yield GaugeMetricFamily(
            "logflume_broker_client_metrics_subscriptions",
            "Client-metrics subscriptions (config resources of type CLIENT_METRICS)",
            len(self.subscriptions),
        )
        yield from self.export.collect()
