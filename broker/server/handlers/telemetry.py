"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72)
and ListClientMetricsResources (74); the subscriptions, client instances and the
export of pushed metrics are `core.telemetry` (broker/telemetry).

The client's attributes that subscriptions match on come from the request: its
client id (header), its software name and version (ApiVersions v3+ on this
connection, KIP-511) and its address and port. ApiVersions lists 71 and 72 only while
a subscription exists (handlers/api_versions.py asks `core.telemetry.advertised()`).

Authorization, as Kafka: none for 71 and 72; ListClientMetricsResources needs
DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles


def client_attributes(ctx) -> dict[str, str | None]:
    name, version = ctx.client_software or (None, None)
    return {
        "client_id": ctx.header.client_id or "",
        "client_software_name": name,
        "client_software_version": version,
        "client_source_address": ctx.client_host,
        "client_source_port": str(ctx.client_port),
    }


@handles(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
def get_telemetry_subscriptions(ctx, body):
    return ctx.core.telemetry.get_subscriptions(body["client_instance_id"], client_attributes(ctx))


@handles(ApiKey.PUSH_TELEMETRY)
def push_telemetry(ctx, body):
    code = ctx.core.telemetry.push(body, client_attributes(ctx))
    return {"throttle_time_ms": 0, "error_code": code}


@handles(ApiKey.LIST_CLIENT_METRICS_RESOURCES)
def list_client_metrics_resources(ctx, body):
    if not allowed(ctx, Op.DESCRIBE_CONFIGS, RT.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "client_metrics_resources": [],
        }
    names = ctx.core.telemetry.names()
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "client_metrics_resources": [{"name": n} for n in names],
    }
