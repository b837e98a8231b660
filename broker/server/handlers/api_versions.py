"""ApiVersions and the SASL stand-ins (no SASL mechanism is enabled yet).

ApiVersions v3+ (flexible) never reaches this module: the connection answers it with
the codec's v0 fallback (`api_versions_fallback`) and the client retries with v0-2.
SaslHandshake gets UNSUPPORTED_SASL_MECHANISM with an empty mechanism list, so a
client configured for SASL fails fast with a clear error instead of hanging.
"""

from broker.protocol import ApiKey, ErrorCode, api_versions_body
from broker.server.dispatch import handles


@handles(ApiKey.API_VERSIONS)
def api_versions(ctx, body):
    return api_versions_body()


@handles(ApiKey.SASL_HANDSHAKE)
def sasl_handshake(ctx, body):
    return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}


@handles(ApiKey.SASL_AUTHENTICATE)
def sasl_authenticate(ctx, body):
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": "SASL is not enabled on this broker",
        "auth_bytes": b"",
    }
