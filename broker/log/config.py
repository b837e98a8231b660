"""Per-topic log configuration, named and defaulted as Kafka's topic configs."""

import re
from dataclasses import dataclass, fields, replace
from typing import ClassVar

from common.compression import Codec

LONG_MAX = 2**63 - 1
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms default

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class LogConfig:
    """Immutable settings of one partition log; replace it with `update_config`."""

    TOPIC_CONFIG_NAMES: ClassVar[dict[str, str]]  # set below the table

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3600 * 1000
    max_message_bytes: int = 1048588
    min_compaction_lag_ms: int = 0
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    # Deprecated since Kafka 3.0 (KIP-724) and without effect: every batch is stored in
    # format v2 whatever it says. Accepted and shown, as Kafka 3.9 does, for the
    # clients and tools that still set it.
    message_format_version: str = "3.0-IV1"
    # False: a consumer's Fetch v0-3, whose answer would be down-converted to legacy
    # messages, is answered UNSUPPORTED_VERSION instead.
    message_downconversion_enable: bool = True
    # Kafka's replication throttles (KIP-73): which replicas of this topic are throttled
    # when they lead (leader.*) or follow (follower.*): `partition:broker,...` or `*`.
    # broker/quotas/replication.py reads them; the rates are dynamic broker configs.
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # Not a topic config: the broker's producer.id.expiration.ms, carried to every log
    # with the defaults (Kafka hands it to each log's ProducerStateManager).
    producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def codec(self) -> Codec | None:
        """The codec every batch is stored in; None: as the producer sent it."""
        if self.compression_type == "producer":
            return None
        if self.compression_type == "uncompressed":
            return Codec.NONE
        return Codec[self.compression_type.upper()]

    @classmethod
    def from_props(cls, props: dict[str, str], base: "LogConfig | None" = None) -> "LogConfig":
        """Overlay Kafka-named settings on `base` (default: Kafka's defaults).
        Raises ValueError naming the first unknown or invalid key."""
        changes = {}
        for name, raw in props.items():
            attr = TOPIC_CONFIG_NAMES.get(name)
            if attr is None:
                raise ValueError(f"{name}: unknown topic config")
            changes[attr] = _parse(name, attr, str(raw))
        return replace(base or cls(), **changes)

    def to_props(self) -> dict[str, str]:
        out = {}
        for name, attr in TOPIC_CONFIG_NAMES.items():
            value = getattr(self, attr)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


TOPIC_CONFIG_NAMES: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "delete.retention.ms": "delete_retention_ms",
    "max.message.bytes": "max_message_bytes",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "compression.type": "compression_type",
    "message.format.version": "message_format_version",
    "message.downconversion.enable": "message_downconversion_enable",
    "leader.replication.throttled.replicas": "leader_replication_throttled_replicas",
    "follower.replication.throttled.replicas": "follower_replication_throttled_replicas",
}
THROTTLED_REPLICAS = (
    "leader_replication_throttled_replicas",
    "follower_replication_throttled_replicas",
)

# attr -> smallest allowed value (retention.* accept -1 = unlimited)
_MINIMUM = {
    "segment_bytes": 14,
    "segment_ms": 1,
    "segment_index_bytes": 8,
    "retention_ms": -1,
    "retention_bytes": -1,
    "index_interval_bytes": 0,
    "flush_messages": 1,
    "flush_ms": 0,
    "delete_retention_ms": 0,
    "max_message_bytes": 0,
    "min_compaction_lag_ms": 0,
    "message_timestamp_before_max_ms": 0,
    "message_timestamp_after_max_ms": 0,
    "min_insync_replicas": 1,
}
_CHOICES = {
    "cleanup_policy": CLEANUP_POLICIES,
    "message_timestamp_type": TIMESTAMP_TYPES,
    "compression_type": COMPRESSION_TYPES,
}
_TYPES = {f.name: f.type for f in fields(LogConfig)}

# Kafka's releases as `message.format.version` (a MetadataVersion) names them, with
# how many internal versions (`-IV0` ...) each has; the 0.8 and 0.9 ones have none.
_RELEASE_IVS = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0,
    "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3,
    "1.0": 1, "1.1": 1,
    "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2,
    "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1,
    "3.9": 1,
}  # fmt: skip


def is_kafka_version(text: str) -> bool:
    """Whether Kafka 3.9 takes `text` as a version: a release ("2.8", "0.10.0"), one of
    its internal versions ("3.0-IV1"), or a release with a patch part, which is
    dropped ("2.8.1", "0.10.0.1")."""
    parts = text.split(".")
    kept = 3 if text.startswith("0.") else 2
    key = text if len(parts) <= kept else ".".join(parts[:kept])
    release, sep, internal = key.partition("-IV")
    if release not in _RELEASE_IVS:
        return False
    if not sep:
        return True
    return (
        internal.isdigit()
        and str(int(internal)) == internal
        and int(internal) < _RELEASE_IVS[release]
    )


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def throttled_replicas(name: str, text: str) -> str:
    """A `*.replication.throttled.replicas` value checked as Kafka's
    ThrottledReplicaListValidator does (`*`, or `partition:broker` items, empty ones
    allowed), as Kafka shows it: the items trimmed, joined by commas."""
    items = [item.strip() for item in text.split(",")] if text else []
    if not (all(_REPLICA.fullmatch(item) for item in items) or "".join(items) == "*"):
        raise ValueError(
            f"Invalid value {text} for configuration {name}: {name} must be the literal '*' "
            "or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )
    return ",".join(items)


def _parse(name: str, attr: str, raw: str):
    kind = _TYPES[attr]
    if kind in (bool, "bool"):
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"{name}: expected true or false, got {raw!r}")
        return raw.lower() == "true"
    if kind in (int, "int"):
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"{name}: expected an integer, got {raw!r}") from None
        if value < _MINIMUM[attr] or value > LONG_MAX:
            raise ValueError(f"{name}: {value} is out of range (minimum {_MINIMUM[attr]})")
        if (
            attr in ("segment_bytes", "max_message_bytes", "segment_index_bytes")
            and value > 2**31 - 1
        ):
            raise ValueError(f"{name}: {value} does not fit in an int32")
        return value
    text = raw.strip()
    if attr in THROTTLED_REPLICAS:
        return throttled_replicas(name, text)
    if attr == "message_format_version":
        if not is_kafka_version(text):
            raise ValueError(f"{name}: {raw!r} is not a valid Kafka version")
        return text
    if attr == "cleanup_policy":
        text = ",".join(sorted(p.strip() for p in text.split(",") if p.strip()))
    if text not in _CHOICES[attr]:
        raise ValueError(f"{name}: {raw!r} is not one of {', '.join(_CHOICES[attr])}")
    return text


LogConfig.TOPIC_CONFIG_NAMES = TOPIC_CONFIG_NAMES
