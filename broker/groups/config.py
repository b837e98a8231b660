"""The group coordinator's settings, with Kafka's names and defaults."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    num_partitions: int = 50  # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    new_member_join_timeout_ms: int = 300_000  # Kafka's fixed NewMemberJoinTimeoutMs
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    @classmethod
    def from_broker_config(cls, cfg) -> CoordinatorConfig:
        """From a BrokerConfig (broker/config.py)."""
        return cls(
            num_partitions=cfg.get("offsets.topic.num.partitions"),
            initial_rebalance_delay_ms=cfg.get("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=cfg.get("group.min.session.timeout.ms"),
            max_session_timeout_ms=cfg.get("group.max.session.timeout.ms"),
            offsets_retention_ms=cfg.get("offsets.retention.minutes") * 60_000,
            consumer_session_timeout_ms=cfg.get("group.consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms=cfg.get("group.consumer.heartbeat.interval.ms"),
            consumer_assignors=tuple(
                n.strip() for n in cfg.get("group.consumer.assignors").split(",") if n.strip()
            ),
            consumer_max_size=cfg.get("group.consumer.max.size"),
            consumer_migration_policy=str(cfg.get("group.consumer.migration.policy")).lower(),
        )
