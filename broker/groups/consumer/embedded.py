"""The consumer's embedded protocol: what a classic member (JoinGroup protocol type
"consumer") carries in its JoinGroup metadata and gets in its SyncGroup assignment,
in Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment schemas.

Both start with an int16 version and are not flexible. A subscription holds the
topics (v0), the user data (v0), the partitions the member owns (v1+, sent by
cooperative clients), its generation (v2+) and rack (v3+); an assignment the
partitions and user data. A version newer than 3 is read as version 3, as Kafka's
ConsumerProtocol does (later versions only add fields at the end). Pure.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping

from broker.protocol.exceptions import ProtocolError
from broker.protocol.schema import BYTES, INT32, STRING, Array, F, compile_message

MAX_VERSION = 3

_TOPIC_PARTITIONS = [F("topic", STRING), F("partitions", Array(INT32))]
_SUBSCRIPTION = [
    F("topics", Array(STRING)),
    F("user_data", BYTES, nullable="0+"),
    F("owned_partitions", _TOPIC_PARTITIONS, "1+"),
    F("generation_id", INT32, "2+", default=-1),
    F("rack_id", STRING, "3+", nullable="3+"),
]
_ASSIGNMENT = [
    F("assigned_partitions", _TOPIC_PARTITIONS),
    F("user_data", BYTES, nullable="0+"),
]
_SUBSCRIPTIONS = {v: compile_message(_SUBSCRIPTION, v) for v in range(MAX_VERSION + 1)}
_ASSIGNMENTS = {v: compile_message(_ASSIGNMENT, v) for v in range(MAX_VERSION + 1)}

TopicPartitions = Mapping[str, frozenset[int]]


class MalformedProtocol(ValueError):
    """Embedded protocol bytes that do not parse."""


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None = None


def version_of(data: bytes) -> int:
    """The version the bytes start with (0 when they are too short to say)."""
    if len(data) < 2:
        return 0
    return max(0, struct.unpack_from(">h", data, 0)[0])


def _decode(codecs: dict, data: bytes) -> dict:
    if len(data) < 2:
        raise MalformedProtocol("shorter than its version")
    version = min(version_of(data), MAX_VERSION)
    try:
        fields, _ = codecs[version].decode(memoryview(data), 2)
    except (ProtocolError, struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
        raise MalformedProtocol(str(e) or type(e).__name__) from None
    return fields


def _partitions(items: list[dict]) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for item in items:
        if item["partitions"]:
            out[item["topic"]] = out.get(item["topic"], frozenset()) | frozenset(item["partitions"])
    return out


def decode_subscription(data: bytes) -> Subscription:
    """A ConsumerProtocolSubscription; MalformedProtocol if it does not parse."""
    fields = _decode(_SUBSCRIPTIONS, data)
    return Subscription(
        tuple(fields["topics"]), _partitions(fields["owned_partitions"]), fields["rack_id"]
    )


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: none)."""
    if not data:
        return {}
    return _partitions(_decode(_ASSIGNMENTS, data)["assigned_partitions"])


def encode_assignment(partitions: TopicPartitions, version: int) -> bytes:
    """A ConsumerProtocolAssignment at `version` (capped at MAX_VERSION), topics and
    partitions sorted, no user data."""
    version = min(max(version, 0), MAX_VERSION)
    out: list = [struct.pack(">h", version)]
    _ASSIGNMENTS[version].encode(
        {
            "assigned_partitions": [
                {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(partitions.items()) if ps
            ],
            "user_data": None,
        },
        out,
    )
    return b"".join(out)
