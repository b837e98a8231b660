"""OTLP metrics payloads for the tests, as a client builds them."""

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

CUMULATIVE = m.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
DELTA = m.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


def _attrs(pairs: dict) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in pairs.items()]


def gauge(name: str, value: float, **attrs: str) -> m.Metric:
    point = m.NumberDataPoint(as_double=value, attributes=_attrs(attrs))
    return m.Metric(name=name, description=f"{name} doc", gauge=m.Gauge(data_points=[point]))


def counter(name: str, value: int, temporality=CUMULATIVE, **attrs: str) -> m.Metric:
    point = m.NumberDataPoint(as_int=value, attributes=_attrs(attrs))
    data = m.Sum(data_points=[point], aggregation_temporality=temporality, is_monotonic=True)
    return m.Metric(name=name, sum=data)


def payload(*metrics: m.Metric, resource: dict | None = None) -> bytes:
    rm = m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=list(metrics))])
    rm.resource.attributes.extend(_attrs(resource or {}))
    return m.MetricsData(resource_metrics=[rm]).SerializeToString()
