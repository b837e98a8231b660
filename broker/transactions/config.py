"""The transaction coordinator's settings, under Kafka's config names."""

from __future__ import annotations

import dataclasses

from broker.transactions.log_format import DEFAULT_NUM_PARTITIONS


@dataclasses.dataclass(frozen=True)
class TxnConfig:
    """Immutable; read by the coordinator and its handlers."""

    num_partitions: int = DEFAULT_NUM_PARTITIONS  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_interval_ms: int = (
        3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    )
    marker_timeout_ms: int = 30_000  # replica.socket.timeout.ms: one marker write

    @classmethod
    def from_broker_config(cls, config) -> TxnConfig:
        return cls(
            num_partitions=config["transaction.state.log.num.partitions"],
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            remove_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
            marker_timeout_ms=config["replica.socket.timeout.ms"],
        )
