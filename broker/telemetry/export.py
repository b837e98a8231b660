"""The metrics clients push (KIP-714), decoded and kept for the broker's /metrics.

A PushTelemetry payload is an OpenTelemetry `MetricsData` protobuf (the
opentelemetry-proto package's classes), after decompression. Gauges and sums are
exported; histograms and summaries (no Kafka client sends them) are left out. Each
data point becomes one Prometheus series:

- its name is the OTLP name with every character outside [a-zA-Z0-9_:] made "_":
  `org.apache.kafka.producer.node.request.latency.avg` ->
  `org_apache_kafka_producer_node_request_latency_avg`; a monotonic sum is a
  counter (`..._total`), anything else a gauge;
- its labels are the client's (`client_instance_id`, `client_id`,
  `client_software_name`, `client_software_version`), the resource attributes that
  say what the client is part of (`RESOURCE_LABELS`), then the data point's own
  attributes (node_id, topic, partition ...), names made Prometheus-safe, the first
  of two with the same name kept.

A delta sum (a client asked for deltas, or sending them anyway) is added to the
series' value, so the series stays cumulative. Only metrics the client was asked for
(its subscription's prefixes) are kept, never one named like the broker's own
(`logflume_`), at most `MAX_SERIES_PER_CLIENT` per client. A client's series expire
at the time its last push set (three push intervals later, one after a terminating
push): a client that stopped pushing disappears from /metrics.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator, Mapping

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData
from prometheus_client.core import Metric

from broker.telemetry.subscriptions import ALL_METRICS

RESOURCE_LABELS = ("client_rack", "group_id", "group_instance_id", "transactional_id")
CLIENT_LABELS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
)
MAX_SERIES_PER_CLIENT = 2000
BROKER_PREFIX = "logflume_"
Labels = tuple[tuple[str, str], ...]


class MalformedPayload(ValueError):
    """The payload is not a MetricsData protobuf."""


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    """One data point of a push, named and labelled for Prometheus."""

    name: str
    counter: bool
    delta: bool
    labels: Labels
    value: float
    doc: str


def prometheus_name(otlp_name: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_:]", "_", otlp_name)
    return "_" + name if name[:1].isdigit() else name


def label_name(key: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    if name[:1].isdigit():
        name = "_" + name
    return "attr" + name if name.startswith("__") else name


def _text(value) -> str:
    """An OTLP AnyValue as a label value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if kind in ("array_value", "kvlist_value"):
        return str(getattr(value, kind)).replace("\n", " ").strip()
    return str(getattr(value, kind))


def decode(payload: bytes, wanted: tuple[str, ...]) -> list[Point]:
    """The gauge and sum data points of `payload` whose OTLP name starts with one of
    the prefixes `wanted` ("*": any); MalformedPayload if it is no MetricsData."""
    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise MalformedPayload(f"the metrics are not an OpenTelemetry MetricsData: {e}") from e
    every = ALL_METRICS in wanted
    points: list[Point] = []
    for rm in data.resource_metrics:
        resource = [
            (label_name(kv.key), _text(kv.value))
            for kv in rm.resource.attributes
            if kv.key in RESOURCE_LABELS
        ]
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if not metric.name or not (every or metric.name.startswith(wanted)):
                    continue
                name = prometheus_name(metric.name)
                if name.startswith(BROKER_PREFIX):
                    continue
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    data_points, counter, delta = metric.gauge.data_points, False, False
                elif kind == "sum":
                    data_points = metric.sum.data_points
                    counter = metric.sum.is_monotonic
                    delta = (
                        metric.sum.aggregation_temporality
                        == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
                    )
                else:
                    continue
                doc = metric.description or metric.name
                for dp in data_points:
                    value = (
                        dp.as_double if dp.WhichOneof("value") == "as_double" else float(dp.as_int)
                    )
                    attrs = [(label_name(kv.key), _text(kv.value)) for kv in dp.attributes]
                    labels = tuple(resource + attrs)
                    points.append(Point(name, counter, delta, labels, value, doc))
    return points


@dataclasses.dataclass
class _Client:
    labels: Labels
    expires_at: float
    series: dict[tuple[str, Labels], list] = dataclasses.field(default_factory=dict)


class TelemetryExport:
    """Every pushing client's series, by client instance id. Event-loop only."""

    def __init__(self) -> None:
        self._clients: dict[uuid.UUID, _Client] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def record(
        self,
        instance: uuid.UUID,
        client: Mapping[str, str | None],
        points: list[Point],
        expires_at: float,
    ) -> None:
        """Keep `points` of the client `instance` (attributes `client`) until
        `expires_at` (a monotonic time, in seconds)."""
        labels = tuple((k, client.get(k) or "") for k in CLIENT_LABELS)
        entry = self._clients.get(instance)
        if entry is None:
            entry = self._clients[instance] = _Client(labels, expires_at)
        entry.expires_at = expires_at
        for p in points:
            key = (p.name, p.labels)
            old = entry.series.get(key)
            if old is None:
                if len(entry.series) >= MAX_SERIES_PER_CLIENT:
                    continue
                entry.series[key] = [p.counter, p.value, p.doc]
            else:
                old[0], old[2] = p.counter, p.doc
                old[1] = old[1] + p.value if p.delta else p.value

    def forget(self, instance: uuid.UUID) -> None:
        self._clients.pop(instance, None)

    def expire(self, now: float) -> None:
        for instance in [i for i, c in self._clients.items() if c.expires_at <= now]:
            del self._clients[instance]

    def collect(self) -> Iterator[Metric]:
        """One family per name (the kind of its first series; a series of the other
        kind under the same name is left out)."""
        families: dict[str, Metric] = {}
        for instance in sorted(self._clients, key=str):
            entry = self._clients[instance]
            for (name, point_labels), (counter, value, doc) in sorted(entry.series.items()):
                kind = "counter" if counter else "gauge"
                base = name.removesuffix("_total") if counter else name
                family = families.get(base)
                if family is None:
                    family = families[base] = Metric(base, doc, kind)
                elif family.type != kind:
                    continue
                labels = dict(entry.labels)
                for k, v in point_labels:
                    labels.setdefault(k, v)
                family.add_sample(base + "_total" if counter else base, labels, value)
        yield from families.values()
