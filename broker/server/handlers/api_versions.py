"""ApiVersions, and SaslHandshake/SaslAuthenticate where no authentication is due.

ApiVersions answers the API ranges of the registry and, from v3, the feature levels
(`core.features`, broker/features.py: supported ranges, finalized levels and their
epoch; a client reads `transaction.version` there to choose transactions v2). A
version above the highest served is answered by the connection with the codec's v0
fallback (`api_versions_fallback`), and the client retries lower.
On a SASL listener the connection answers the SASL requests itself until the client
is authenticated (broker.sasl.authenticator); the handlers here see them only on
other listeners or after authentication, and answer ILLEGAL_SASL_STATE as Kafka does
(no re-authentication: SaslAuthenticate's session_lifetime_ms is 0).

GetTelemetrySubscriptions and PushTelemetry are listed only while a client-metrics
subscription exists (broker.telemetry.manager, `filter_api_versions`; the connection
filters the SASL gate's answer the same way).
"""

from broker.protocol import ApiKey, ErrorCode, api_versions_body
from broker.server.dispatch import handles


@handles(ApiKey.API_VERSIONS)
def api_versions(ctx, body):
    return ctx.core.telemetry.filter_api_versions(
        api_versions_body(features=ctx.core.features.api_versions_fields(ctx.api_version))
    )


@handles(ApiKey.SASL_HANDSHAKE)
def sasl_handshake(ctx, body):
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


@handles(ApiKey.SASL_AUTHENTICATE)
def sasl_authenticate(ctx, body):
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received on a connection that is not "
        "authenticating (not a SASL listener, or authentication is complete)",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }
