"""Request header value (v1, and the v1 part of v2); decoding lives in codec.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Request header: immutable, safe to share across tasks and threads.

    Header v1 is api_key int16, api_version int16, correlation_id int32, client_id
    nullable string; v2 (flexible requests) appends a tagged-field buffer, which this
    codec only skips over (ApiVersions v3+ is answered without reading its body).
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
