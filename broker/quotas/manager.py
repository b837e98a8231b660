"""Enforcement of the byte-rate quotas, as Kafka's ClientQuotaManager: one for
produce (`producer_byte_rate`, the size of each Produce request) and one for fetch
(`consumer_byte_rate`, the record bytes of each consumer Fetch response; followers
are never throttled).

`record(kind, principal, client_id, nbytes)` finds the quota the connection is held
to (broker.quotas.entity.resolve: Kafka's precedence from
/config/users/<user>/clients/<client-id> down to /config/clients/<default>), adds
the bytes to the rate of its quota entity (broker.quotas.rate, over
`quota.window.num` samples of `quota.window.size.seconds`) and returns the throttle
time in ms, 0 when the rate stays within the quota. What the broker does with it
(the response's throttle_time_ms, the connection muted) is broker.server.connection's.

When no quota sets the key at all, `record` returns at once after comparing the
store's version with the one it derived its key set from: nothing is measured.
Resolutions are cached per (user, client id) until the store changes. A quota
entity's rate is forgotten after an hour without traffic, as Kafka expires its
sensors.

Metrics (scrape time, `collect`): `quota_throttle_time_seconds` (counter) and
`quota_byte_rate` (gauge, the rate as last measured) per type, user and client id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.metrics import PREFIX
from broker.quotas.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, resolve
from broker.quotas.rate import SampledRate, throttle_time_ms
from broker.quotas.store import LocalQuotaStore, ZkQuotaStore

PRODUCE = "produce"
FETCH = "fetch"
_KEYS = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE}
_INACTIVE_MS = 3600 * 1000
_MAX_CACHED = 10000  # resolutions kept per store version (bounds memory under many client ids)


class _Sensor:
    __slots__ = ("rate", "throttle_ms", "last_ms", "last_rate")

    def __init__(self, rate: SampledRate, now_ms: float):
        self.rate = rate
        self.throttle_ms = 0
        self.last_ms = now_ms
        self.last_rate = 0.0


class QuotaManager:
    """Owned by the BrokerCore; event-loop only."""

    def __init__(
        self,
        store: LocalQuotaStore | ZkQuotaStore,
        samples: int,
        window_s: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = samples * self.window_ms
        self._clock = clock
        self._version = -1
        self._keys: frozenset[str] = frozenset()
        self._resolved: dict[tuple[str, str, str], tuple[float, tuple[str, str]] | None] = {}
        self._sensors: dict[tuple[str, str, str], _Sensor] = {}

    def _refresh(self) -> None:
        self._version = self.store.version
        self._keys = frozenset(k for configs in self.store.quotas.values() for k in configs)
        self._resolved.clear()

    def enforces(self, kind: str) -> bool:
        """True if any quota of `kind` is set: callers skip measuring a request's
        bytes otherwise (the common case, no quota at all)."""
        if self.store.version != self._version:
            self._refresh()
        return _KEYS[kind] in self._keys

    def record(self, kind: str, principal: str, client_id: str | None, nbytes: int) -> int:
        """Throttle time in ms for `nbytes` more of `kind` by this client (0: within)."""
        if not self.enforces(kind):
            return 0
        key = _KEYS[kind]
        user = principal.partition(":")[2]
        who = (kind, user, client_id or "")
        if who in self._resolved:
            found = self._resolved[who]
        else:
            found = resolve(self.store.quotas, key, user, client_id or "")
            if len(self._resolved) >= _MAX_CACHED:
                self._resolved.clear()
            self._resolved[who] = found
        if found is None:
            return 0
        quota, (tag_user, tag_client) = found
        now = self._clock() * 1000
        sensor = self._sensor((kind, tag_user, tag_client), now)
        sensor.rate.record(nbytes, now)
        sensor.last_ms = now
        rate = sensor.rate.rate(now)
        sensor.last_rate = rate
        window = sensor.rate.window_size_ms(now)
        ms = throttle_time_ms(rate, quota, window, self.max_throttle_ms)
        sensor.throttle_ms += ms
        return ms

    def unrecord(self, kind: str, principal: str, client_id: str | None, nbytes: int) -> None:
        """Take back bytes recorded but not sent (a throttled fetch answers empty)."""
        found = self._resolved.get((kind, principal.partition(":")[2], client_id or ""))
        if found is None:
            return
        sensor = self._sensors.get((kind, *found[1]))
        if sensor is not None:
            sensor.rate.record(-nbytes, self._clock() * 1000)

    def _sensor(self, tags: tuple[str, str, str], now: float) -> _Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(
                SampledRate(self.samples, self.window_ms, now), now
            )
        return sensor

    def collect(self) -> Iterator[Metric]:
        labels = ["type", "user", "client_id"]
        throttled = CounterMetricFamily(
            PREFIX + "quota_throttle_time_seconds",
            "Time clients were throttled for exceeding their byte-rate quota",
            labels=labels,
        )
        rates = GaugeMetricFamily(
            PREFIX + "quota_byte_rate",
            "Bytes per second of each client quota entity, as last measured",
            labels=labels,
        )
        now = self._clock() * 1000
        for tags, sensor in list(self._sensors.items()):
            if now - sensor.last_ms > _INACTIVE_MS:
                del self._sensors[tags]
                continue
            throttled.add_metric(list(tags), sensor.throttle_ms / 1000)
            rates.add_metric(list(tags), sensor.last_rate)
        yield throttled
        yield rates


def client_throttles(api_key: int, version: int) -> bool:
    """KIP-219: from Produce v6 and Fetch v8 on, the client holds back its next
    request by the throttle time itself, so the broker answers at once."""
    return (api_key == 0 and version >= 6) or (api_key == 1 and version >= 8)
