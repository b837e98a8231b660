"""Sans-I/O request/response codec: frames in, (header, dict) out, and back.

Server side: `read_frame_size` checks the int32 size prefix, `decode_request` parses
the frame that follows (header v1, then the body of the schema chosen by
api_key/api_version in the registry), and `encode_response` returns the parts to
write: bytes, interleaved with record-set objects that are not bytes (file slices the
server sends with sendfile), the first part starting with the int32 size of the whole
response and the response header v0 (correlation id).

Client side (replica fetcher, tests): `encode_request` and `decode_response`.

Flexible versions (registry.is_flexible) use request header v2 (v1 + a tagged-field
section, skipped) and response header v1 (correlation id + an empty tagged-field
section), except ApiVersions, whose response header is always v0 so that a client can
read it whatever version it asked for.

ApiVersions negotiation: clients open with their highest ApiVersions version. For a
version above SUPPORTED_VERSIONS `decode_request` reads only the header and raises
UnsupportedVersion, like for any unknown version; the server answers ApiVersions with
`api_versions_fallback(exc.header)` (error 35 and our ranges in a v0 body, response
header v0) and closes the connection for any other API.
"""

from __future__ import annotations

import struct

from broker.protocol.api_keys import ApiKey
from broker.protocol.errors import ErrorCode
from broker.protocol.exceptions import (
    EncodeError,
    FrameTooLarge,
    InvalidRequest,
    InvalidResponse,
    UnsupportedVersion,
)
from broker.protocol.header import RequestHeader
from broker.protocol.primitives import (
    INT32,
    read_nullable_string,
    skip_tagged_fields,
    write_string,
)
from broker.protocol.registry import (
    REQUEST_CODECS,
    RESPONSE_CODECS,
    SUPPORTED_VERSIONS,
    is_flexible,
)
from broker.protocol.schema import record_set_length

DEFAULT_MAX_REQUEST_SIZE = 104857600  # socket.request.max.bytes

_HEADER_PREFIX = struct.Struct(">hhi")
_DECODE_ERRORS = (struct.error, ValueError, IndexError, OverflowError)
_ENCODE_ERRORS = (struct.error, TypeError, ValueError, AttributeError, OverflowError)


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api_key {api_key}"


def read_frame_size(prefix4: bytes, max_size: int = DEFAULT_MAX_REQUEST_SIZE) -> int:
    """Size announced by a 4-byte prefix; FrameTooLarge if negative or above max_size."""
    if len(prefix4) != 4:
        raise InvalidRequest(f"size prefix must be 4 bytes, got {len(prefix4)}")
    (size,) = INT32.unpack(prefix4)
    if size < 0 or size > max_size:
        raise FrameTooLarge(size, max_size)
    return size


def decode_request_header(frame, flexible: bool = False) -> tuple[RequestHeader, int]:
    """Header v1 (v2 when `flexible`: then the tagged fields are skipped) -> (header, pos)."""
    try:
        api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
        client_id, pos = read_nullable_string(frame, 8)
        if flexible:
            pos = skip_tagged_fields(frame, pos)
    except _DECODE_ERRORS as e:
        raise InvalidRequest(f"malformed request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(frame, strict: bool = False) -> tuple[RequestHeader, dict]:
    """Parse one request frame (the bytes after the size prefix).

    Raises UnsupportedVersion (header readable, api or version unknown) or
    InvalidRequest (anything unreadable). Bytes after the body are ignored, as
    Kafka's broker ignores them: librdkafka 2.x sends Metadata v9+ "all topics"
    requests with the unused bytes it reserved for the topic count left at the end.
    `strict` makes them an InvalidRequest (for tests of the codec's own encodings).
    """
    buf = frame if type(frame) is memoryview else memoryview(frame)
    header, pos = decode_request_header(buf)
    codec = REQUEST_CODECS.get((header.api_key, header.api_version))
    if codec is None:
        raise UnsupportedVersion(
            header.api_key, header.api_version, header.correlation_id, header.client_id
        )
    try:
        if is_flexible(header.api_key, header.api_version):
            pos = skip_tagged_fields(buf, pos)
        body, end = codec.decode(buf, pos)
    except _DECODE_ERRORS as e:
        raise InvalidRequest(
            f"malformed {_api_name(header.api_key)} v{header.api_version} request: {e}", header
        ) from None
    if strict and end != len(buf):
        raise InvalidRequest(
            f"{len(buf) - end} trailing bytes after {_api_name(header.api_key)} "
            f"v{header.api_version} request",
            header,
        )
    return header, body


def _finish(parts: list) -> list:
    """Put the size of parts[1:] into parts[0] and join runs of bytes-like parts.

    Parts that are not bytes-like (file slices) stay separate objects in the result.
    """
    odd = [i for i, part in enumerate(parts) if type(part) is not bytes]
    if not odd:
        parts[0] = INT32.pack(sum(map(len, parts)))
        return [b"".join(parts)]
    try:
        size = sum(map(len, parts))  # file slices are sized too
    except TypeError:
        size = sum(map(record_set_length, parts))
    parts[0] = INT32.pack(size)
    merged: list = []
    start = 0
    for i in odd:
        if isinstance(parts[i], bytearray | memoryview):
            continue
        if i > start:
            merged.append(b"".join(parts[start:i]))
        merged.append(parts[i])
        start = i + 1
    if start < len(parts):
        merged.append(b"".join(parts[start:]))
    return merged


def encode_response(header: RequestHeader, body: dict) -> list:
    """Response to `header` with `body`: [size+header+fields bytes, (slice, bytes)...].

    The size prefix covers every part (len(), or .length, of non-bytes parts).
    ApiVersions answers to v3+ requests are encoded with the v0 body, as the
    negotiation requires.
    """
    version = header.api_version
    if (
        header.api_key == ApiKey.API_VERSIONS
        and version > SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
    ):
        version = 0
    codec = RESPONSE_CODECS.get((header.api_key, version))
    if codec is None:
        raise EncodeError(f"no response schema for api_key {header.api_key} v{version}")
    parts: list = [b"", INT32.pack(header.correlation_id)]
    if _response_header_v1(header.api_key, version):
        parts.append(b"\x00")
    try:
        codec.encode(body, parts)
    except _ENCODE_ERRORS as e:
        raise EncodeError(
            f"cannot encode {_api_name(header.api_key)} v{version} response: {e}"
        ) from e
    return _finish(parts)


def _response_header_v1(api_key: int, version: int) -> bool:
    return api_key != ApiKey.API_VERSIONS and is_flexible(api_key, version)


def api_versions_body(
    error_code: int = ErrorCode.NONE, throttle_time_ms: int = 0, features: dict | None = None
) -> dict:
    """ApiVersions response body advertising SUPPORTED_VERSIONS; `features`, the v3+
    tagged feature fields (broker/features.py), when the broker reports them."""
    return (features or {}) | {
        "error_code": int(error_code),
        "api_keys": [
            {"api_key": int(key), "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
        ],
        "throttle_time_ms": throttle_time_ms,
    }


def api_versions_fallback(header: RequestHeader) -> list[bytes]:
    """Complete answer (size prefix included) to an ApiVersions request above v2:
    response header v0, then a v0 body with UNSUPPORTED_VERSION and our ranges."""
    v0 = RequestHeader(ApiKey.API_VERSIONS, 0, header.correlation_id, header.client_id)
    return encode_response(v0, api_versions_body(ErrorCode.UNSUPPORTED_VERSION))


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """A complete request frame (size prefix, header v1 or v2, body); records must be bytes."""
    codec = REQUEST_CODECS.get((api_key, api_version))
    if codec is None:
        raise EncodeError(f"no request schema for api_key {api_key} v{api_version}")
    parts: list = [
        _HEADER_PREFIX.pack(api_key, api_version, correlation_id),
        write_string(client_id),
    ]
    if is_flexible(api_key, api_version):
        parts.append(b"\x00")
    try:
        codec.encode(body, parts)
        payload = b"".join(parts)
    except _ENCODE_ERRORS as e:
        raise EncodeError(f"cannot encode {_api_name(api_key)} v{api_version} request: {e}") from e
    return INT32.pack(len(payload)) + payload


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, dict]:
    """Parse a response frame (after the size prefix) -> (correlation_id, body)."""
    codec = RESPONSE_CODECS.get((api_key, api_version))
    if codec is None:
        raise InvalidResponse(f"no response schema for api_key {api_key} v{api_version}")
    buf = frame if type(frame) is memoryview else memoryview(frame)
    try:
        (correlation_id,) = INT32.unpack_from(buf, 0)
        pos = skip_tagged_fields(buf, 4) if _response_header_v1(api_key, api_version) else 4
        body, end = codec.decode(buf, pos)
    except _DECODE_ERRORS as e:
        raise InvalidResponse(
            f"malformed {_api_name(api_key)} v{api_version} response: {e}"
        ) from None
    if end != len(buf):
        raise InvalidResponse(
            f"{len(buf) - end} trailing bytes after {_api_name(api_key)} v{api_version} response"
        )
    return correlation_id, body
