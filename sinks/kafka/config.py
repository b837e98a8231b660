"""The kafka sink's keys in pipelines.yaml (`KafkaSinkConfig`, documented by the
comment on each field: agent/reference/ reads them), their cross-key checks, and
the librdkafka settings they make."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

from agent.api import Duration, Size
from agent.delivery import Format
from common.topic_names import AUDIT_TOPIC, POSITIONS_TOPIC
from sinks.kafka.records import TOPIC_NAME, config_problems
from sinks.kafka.security import SaslConfig, TlsConfig, librdkafka_security, unreadable

STATS_INTERVAL_MS = 5000  # librdkafka statistics.interval.ms unless `producer:` sets it


@dataclasses.dataclass(frozen=True)
class AuditDrill:
    drop: int = 0  # records counted as delivered but never produced (a loss)
    duplicate: int = 0  # records produced twice but counted once (a duplicate)


@dataclasses.dataclass
class KafkaSinkConfig:
    topic: str  # topic to produce to; a template such as `nginx-{host}` picks one per record
    bootstrap_servers: str = "127.0.0.1:9092"  # brokers to connect to: host:port,host:port
    acks: Literal["all", -1, 0, 1] = "all"  # all, -1: all in-sync replicas; 1: leader; 0: none
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"  # codec of batches
    batch_size: Size = Size(1_000_000)  # most bytes per produce batch (librdkafka batch.size)
    linger_ms: int = 5  # milliseconds to wait for more records before sending a batch
    key: str | None = None  # record key, a template such as `{host}`; null: no key
    headers: list[str] = dataclasses.field(
        default_factory=lambda: ["host"]
    )  # event headers sent as record headers, those an event has; []: none
    enable_idempotence: bool = True  # broker drops duplicates of retries; needs acks: all
    format: Format = "auto"  # auto: JSON if parsed, else the line; raw: the line; json: JSON
    dead_letter_topic: str | None = None  # rejected records; null: `<topic>.dlq` (plain topic)
    dead_letter_max_bytes: Size = Size(64 << 10)  # dead-lettered values are cut to this
    retry_backoff: Duration = Duration(0.5)  # first wait before failed records are sent again
    max_retry_backoff: Duration = Duration(30)  # the wait doubles on each retry up to this
    delivery_timeout: Duration = Duration(30)  # records not acknowledged in this fail (retried)
    batch_events: int = 10_000  # most events per take from the channel
    max_inflight_batches: int = 4  # most take batches in delivery at once
    tls: TlsConfig | None = None  # connect over TLS (SSL); null: no TLS
    sasl: SaslConfig | None = None  # authenticate with SASL; null: no SASL
    producer: dict[str, str] = dataclasses.field(default_factory=dict)  # librdkafka settings
    delivery: Literal["at_least_once", "exactly_once"] = (
        "at_least_once"  # exactly_once: transactions
    )
    transactional_id: str | None = None  # exactly_once: null: logflume-<host>-<agent>-<sink>
    positions_topic: str = POSITIONS_TOPIC  # exactly_once: topic of committed positions
    transaction_timeout: Duration = Duration(60)  # exactly_once: broker aborts older ones
    commit_interval: Duration = Duration(0.5)  # exactly_once: most one transaction per this
    audit: bool = True  # publish counts and checksums per host and minute (logflume audit)
    audit_topic: str = AUDIT_TOPIC  # audit: where the totals go (compact,delete; 7 days)
    audit_drill: AuditDrill | None = None  # audit: lose/duplicate records on purpose; a drill


def problems(config: KafkaSinkConfig) -> list[str]:
    """The sink's `validate`: findings as "key: problem"."""
    errors = []
    if config.enable_idempotence and config.acks not in ("all", -1):
        errors.append("enable_idempotence: needs acks: all (or set it to false)")
    if config.delivery == "exactly_once" and not (
        config.enable_idempotence and config.acks in ("all", -1)
    ):
        errors.append("delivery: exactly_once needs acks: all and enable_idempotence: true")
    if config.batch_events < 1 or config.max_inflight_batches < 1:
        errors.append("batch_events: batch_events and max_inflight_batches must be >= 1")
    if not config.topic:
        errors.append("topic: must not be empty")
    else:
        errors += config_problems(config.topic, config.key, config.dead_letter_topic)
    tls = config.tls
    if tls is not None:
        if (tls.cert is None) != (tls.key is None):
            errors.append("tls.key: cert and key go together")
        for name in ("ca", "cert", "key"):
            path = getattr(tls, name)
            problem = path is not None and unreadable(path)
            if problem:
                errors.append(f"tls.{name}: {problem}")
    if config.audit and not TOPIC_NAME.fullmatch(config.audit_topic):
        errors.append(f"audit_topic: {config.audit_topic!r} is not a topic name")
    drill = config.audit_drill
    if drill is not None:
        if not config.audit:
            errors.append("audit_drill: needs audit: true (the drill checks the audit)")
        if drill.drop < 0 or drill.duplicate < 0:
            errors.append("audit_drill: drop and duplicate must be >= 0")
    if config.sasl is not None and not config.sasl.password:
        errors.append("sasl.password: must not be empty")
    return errors


def client_settings(config: KafkaSinkConfig, client_id: str) -> dict:
    """Where and how to connect: what every client of the sink shares (its producer,
    and the consumer and admin client of the positions topic)."""
    conf = {
        "bootstrap.servers": config.bootstrap_servers,
        "client.id": client_id,
        **librdkafka_security(config.tls, config.sasl),
    }
    for key, value in config.producer.items():
        if key.startswith(("security.", "ssl.", "sasl.")):
            conf[key] = value
    return conf


def producer_settings(
    config: KafkaSinkConfig,
    client_id: str,
    transactional_id: str,
    error_cb: Callable,
    stats_cb: Callable,
) -> dict:
    """The producer's settings; `producer:` has the last word."""
    conf = {
        **client_settings(config, client_id),
        "acks": str(config.acks),
        "compression.type": config.compression,
        "batch.size": int(config.batch_size),
        "linger.ms": config.linger_ms,
        "enable.idempotence": config.enable_idempotence,
        "delivery.timeout.ms": int(config.delivery_timeout * 1000),
        "queue.buffering.max.messages": max(
            100_000, 2 * config.batch_events * config.max_inflight_batches
        ),
        "queue.buffering.max.kbytes": 1 << 20,
        "message.max.bytes": 1_000_000,
        "error_cb": error_cb,
        "statistics.interval.ms": STATS_INTERVAL_MS,
        "stats_cb": stats_cb,
    }
    if config.delivery == "exactly_once":
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = int(config.transaction_timeout * 1000)
    conf.update(config.producer)
    return conf
