"""Sans-I/O Kafka wire protocol codec: every version the broker serves, flexible ones too.

Layout: primitives (ints, strings, varints), schema (the declaration language and its
compiler), messages_* (one declaration per API, all versions), registry (the single
table of supported versions and compiled codecs), codec (framing, headers,
request/response encode and decode), errors (ErrorCode), exceptions.

Bodies are plain dicts with snake_case field names; `records` values decode as
zero-copy memoryviews and encode from bytes or from any sized object (sendfile slice).
"""

from broker.protocol.api_keys import ApiKey
from broker.protocol.codec import (
    DEFAULT_MAX_REQUEST_SIZE,
    api_versions_body,
    api_versions_fallback,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    read_frame_size,
)
from broker.protocol.errors import RETRIABLE, ErrorCode
from broker.protocol.exceptions import (
    EncodeError,
    FrameTooLarge,
    InvalidRequest,
    InvalidResponse,
    ProtocolError,
    UnsupportedVersion,
)
from broker.protocol.header import RequestHeader
from broker.protocol.registry import SUPPORTED_VERSIONS

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "RETRIABLE",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "EncodeError",
    "ErrorCode",
    "FrameTooLarge",
    "InvalidRequest",
    "InvalidResponse",
    "ProtocolError",
    "RequestHeader",
    "UnsupportedVersion",
    "api_versions_body",
    "api_versions_fallback",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "read_frame_size",
]
