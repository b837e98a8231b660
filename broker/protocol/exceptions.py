"""Exceptions raised by the wire codec.

Everything the codec raises for bad input derives from `ProtocolError` (a
`ValueError`): a request that cannot be read raises `InvalidRequest`, a response that
cannot be read raises `InvalidResponse`. Struct, index and unicode errors never leak
out of `decode_request` / `decode_response`.
"""

from __future__ import annotations

from broker.protocol.header import RequestHeader


class ProtocolError(ValueError):
    """Bytes that do not follow the Kafka wire protocol."""


class InvalidRequest(ProtocolError):
    """A request frame that is truncated, malformed or otherwise unreadable.

    `header` is the parsed request header when the failure came after it (so the
    server may log the correlation id), else None.
    """

    def __init__(self, message: str, header: RequestHeader | None = None):
        super().__init__(message)
        self.header = header


class InvalidResponse(ProtocolError):
    """A response frame that is truncated, malformed or otherwise unreadable."""


class FrameTooLarge(InvalidRequest):
    """A size prefix that is negative or above the configured maximum."""

    def __init__(self, size: int, max_size: int):
        super().__init__(f"frame size {size} outside 0..{max_size}")
        self.size = size
        self.max_size = max_size


class UnsupportedVersion(InvalidRequest):
    """Unknown api_key, or a version outside SUPPORTED_VERSIONS.

    Raised after the header was read, before the body is touched. The server answers
    ApiVersions with `api_versions_fallback(exc.header)` and closes on anything else.
    """

    header: RequestHeader

    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str | None = None
    ):
        header = RequestHeader(api_key, api_version, correlation_id, client_id)
        super().__init__(f"unsupported api_key {api_key} version {api_version}", header)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class EncodeError(ValueError):
    """A body the codec cannot encode (wrong value type, out-of-range integer...).

    A programming error in the caller, not bad input from the network.
    """
