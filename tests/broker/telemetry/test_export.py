"""Pushed OTLP metrics as Prometheus series (pure): names, labels, kinds, deltas,
what is left out, expiry."""

import uuid

import pytest

from broker.telemetry.export import (
    MAX_SERIES_PER_CLIENT,
    MalformedPayload,
    TelemetryExport,
    decode,
    label_name,
    prometheus_name,
)
from tests.broker.telemetry.otlp import DELTA, counter, gauge, payload

CLIENT = {
    "client_id": "sink-1",
    "client_software_name": "librdkafka",
    "client_software_version": "2",
}
ONE = uuid.UUID(int=1)
ALL = ("*",)


def samples(export: TelemetryExport) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in export.collect()
        for s in family.samples
    }


def test_names_and_label_names_are_made_prometheus_safe():
    assert (
        prometheus_name("org.apache.kafka.producer.node.request.latency.avg")
        == "org_apache_kafka_producer_node_request_latency_avg"
    )
    assert prometheus_name("1-x") == "_1_x"
    assert label_name("node.id") == "node_id" and label_name("__name__") == "attr__name__"


def test_gauges_and_counters_with_the_client_resource_and_point_labels():
    data = payload(
        gauge("org.apache.kafka.producer.node.request.latency.avg", 1.5, node_id="0"),
        counter("org.apache.kafka.producer.connection.creation.total", 3),
        resource={"transactional_id": "tx-1", "member_id": "m-123"},
    )
    export = TelemetryExport()
    export.record(ONE, CLIENT | {"client_instance_id": str(ONE)}, decode(data, ALL), 100.0)
    base = {
        "client_instance_id": str(ONE),
        "client_id": "sink-1",
        "client_software_name": "librdkafka",
        "client_software_version": "2",
        "transactional_id": "tx-1",  # member_id changes with every rebalance: left out
    }
    got = samples(export)
    latency = ("org_apache_kafka_producer_node_request_latency_avg", base | {"node_id": "0"})
    assert got[(latency[0], tuple(sorted(latency[1].items())))] == 1.5
    total = ("org_apache_kafka_producer_connection_creation_total", tuple(sorted(base.items())))
    assert got[total] == 3
    kinds = {f.name: f.type for f in export.collect()}
    assert kinds["org_apache_kafka_producer_connection_creation"] == "counter"
    assert kinds["org_apache_kafka_producer_node_request_latency_avg"] == "gauge"


def test_delta_sums_add_up_and_cumulative_ones_replace():
    export = TelemetryExport()
    for value in (2, 3):
        points = decode(payload(counter("c.deltas", value, DELTA), counter("c.total", value)), ALL)
        export.record(ONE, CLIENT, points, 100.0)
    got = {name: v for (name, _), v in samples(export).items()}
    assert got == {"c_deltas_total": 5, "c_total": 3}


def test_only_the_subscribed_prefixes_and_never_a_broker_name_are_kept():
    data = payload(
        gauge("org.apache.kafka.producer.a", 1),
        gauge("org.apache.kafka.consumer.b", 1),
        gauge("logflume.broker.requests", 1),
    )
    assert [p.name for p in decode(data, ("org.apache.kafka.producer.",))] == [
        "org_apache_kafka_producer_a"
    ]
    assert [p.name for p in decode(data, ALL)] == [
        "org_apache_kafka_producer_a",
        "org_apache_kafka_consumer_b",
    ]
    assert decode(data, ()) == []


def test_garbage_is_a_malformed_payload():
    with pytest.raises(MalformedPayload):
        decode(b"\xff\xff\xff\xff not protobuf", ALL)


def test_series_expire_with_their_client_and_are_bounded():
    export = TelemetryExport()
    many = payload(*(gauge(f"m.g{i}", i) for i in range(MAX_SERIES_PER_CLIENT + 5)))
    export.record(ONE, CLIENT, decode(many, ALL), 10.0)
    export.record(uuid.UUID(int=2), CLIENT, decode(payload(gauge("m.x", 1)), ALL), 20.0)
    assert len(samples(export)) == MAX_SERIES_PER_CLIENT + 1
    export.expire(10.0)
    assert len(export) == 1 and len(samples(export)) == 1
    export.expire(20.0)
    assert samples(export) == {}
