"""Schemas of KIP-714's client telemetry APIs, v0 (flexible from v0), declared from
Kafka's message JSON: GetTelemetrySubscriptions (71), PushTelemetry (72) and
ListClientMetricsResources (74)."""

from __future__ import annotations

from broker.protocol.schema import BOOL, BYTES, INT8, INT16, INT32, STRING, UUID, Array, F

GET_TELEMETRY_SUBSCRIPTIONS_REQUEST = [F("client_instance_id", UUID)]

GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("client_instance_id", UUID),
    F("subscription_id", INT32),
    F("accepted_compression_types", Array(INT8)),
    F("push_interval_ms", INT32),
    F("telemetry_max_bytes", INT32),
    F("delta_temporality", BOOL),
    F("requested_metrics", Array(STRING)),
]

PUSH_TELEMETRY_REQUEST = [
    F("client_instance_id", UUID),
    F("subscription_id", INT32),
    F("terminating", BOOL),
    F("compression_type", INT8),
    F("metrics", BYTES),
]

PUSH_TELEMETRY_RESPONSE = [F("throttle_time_ms", INT32), F("error_code", INT16)]

LIST_CLIENT_METRICS_RESOURCES_REQUEST: list = []

LIST_CLIENT_METRICS_RESOURCES_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("client_metrics_resources", [F("name", STRING)]),
]
