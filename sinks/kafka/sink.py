"""The `kafka` sink: take batches from a channel and produce them to a Kafka topic.

Works against the bundled broker or any Kafka-compatible cluster, through
confluent-kafka (librdkafka); `type: broker`, its first name, is kept as an alias.
This module is the plugin: it builds, for each run, a producer (producer.py) and
the delivery strategy the config asks for, at_least_once.py (the default) or
exactly_once.py (`delivery: exactly_once`: transactions), and hands the strategy
only what it uses.

Security follows Kafka's listeners: a `tls:` block makes the connection SSL, a
`sasl:` block SASL_PLAINTEXT, both SASL_SSL. The SASL password is kept out of the
config's repr, so neither logs nor `agent validate` ever show it; give it as
`${LOGFLUME_SASL_PASSWORD}` or `${file:/etc/logflume/sasl-password}` (agent/config.py).
A wrong password is an authentication error librdkafka reports through `error_cb`:
logged and counted in logflume_agent_kafka_auth_failures_total; the records stay in
the channel and are delivered once the credentials are fixed (reload or restart).

The audit (`audit: true`, the default; audit.py): per host, topic and minute, the
count and checksum of the records delivered are published to `audit_topic`, in the
same transactions as the records under exactly-once; `logflume audit` compares them
with what the topic holds and what the Spark jobs read.

What explains a stalled sink is exported as gauges: librdkafka's statistics (every
`statistics.interval.ms`, 5 s unless `producer:` says otherwise; 0 turns them off)
give the producer queue's depth and, per broker, connection state, round-trip time
and requests waiting to be sent (stats.py); the strategy gives the age of its oldest
in-flight take batch (metrics.py).
"""

from __future__ import annotations

import asyncio
import time

from agent.api import Channel, Sink, register
from common.audit import AUDIT_PARTITIONS, AUDIT_TOPIC_CONFIG
from common.hostname import this_host
from common.kafka_admin import ensure_topic
from common.topic_names import dead_letter_topic
from sinks.kafka.at_least_once import AtLeastOnce
from sinks.kafka.audit import Drill, SinkAudit
from sinks.kafka.config import KafkaSinkConfig, client_settings, problems, producer_settings
from sinks.kafka.dead_letters import DeadLetterTopic
from sinks.kafka.exactly_once import ExactlyOnce
from sinks.kafka.metrics import KafkaSinkMetrics
from sinks.kafka.producer import SinkProducer
from sinks.kafka.records import RecordMaker
from sinks.kafka.stats import ProducerStats
from sinks.kafka.templates import parse

AUTH_LOG_INTERVAL_S = 30.0  # most one "authentication failed" line per this


def transactional_id(config: KafkaSinkConfig, agent: str, sink: str) -> str:
    """An exactly-once sink's transactional id; with the host name by default: agents
    installed on many hosts from one pipelines.yaml must neither fence each other nor
    share positions."""
    return config.transactional_id or f"logflume-{this_host()}-{agent}-{sink}"


@register("sink", "kafka", aliases=("broker",))
class KafkaSink(Sink):
    """Owns the sink's metrics, record maker and dead-letter topic; each `run` owns
    one producer and one delivery strategy."""

    Config = KafkaSinkConfig

    @classmethod
    def validate(cls, config) -> list[str]:
        return problems(config)

    @classmethod
    def records_positions(cls, config) -> bool:
        return config.delivery == "exactly_once"

    @classmethod
    def publishes_audit(cls, config) -> bool:
        return config.audit

    def __init__(self, config, context):
        super().__init__(config, context)
        self.metrics = KafkaSinkMetrics(context)
        self._auth_logged = -AUTH_LOG_INTERVAL_S  # monotonic time of the last such line
        self.stats = ProducerStats(context.metrics, context.name, context.log)
        dlq_topic = config.dead_letter_topic or dead_letter_topic(config.topic)
        self.dead_letters = DeadLetterTopic(
            dlq_topic, config.dead_letter_max_bytes, self.metrics, context.log
        )
        key = parse(config.key) if config.key is not None else None
        self.records = RecordMaker(parse(config.topic), key, config.headers)
        drill = config.audit_drill
        self.audit = (
            SinkAudit(
                config.audit_topic,
                f"{context.agent}.{context.name}",
                Drill(drill.drop, drill.duplicate) if drill is not None else None,
                context.audited_sources,
                self.records.topic.constant,
                context.agent,
            )
            if config.audit
            else None
        )

    @property
    def transactional_id(self) -> str:
        return transactional_id(self.config, self.context.agent, self.context.name)

    @property
    def client_id(self) -> str:
        return f"logflume-{self.context.agent}-{self.context.name}"

    def _on_error(self, err) -> None:
        from confluent_kafka import KafkaError

        if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            # librdkafka reconnects at once after a refused login, many times a second:
            # every failure is counted, one is logged per AUTH_LOG_INTERVAL_S
            self.metrics.auth_failures.inc()
            now = time.monotonic()
            if now - self._auth_logged >= AUTH_LOG_INTERVAL_S:
                self._auth_logged = now
                self.context.log.error("producer: authentication failed: %s", err.str())
            return
        self.context.log.warning("producer: %s", err)

    async def _ensure_audit_topic(self) -> None:
        """Create the audit topic when missing; an error that says what to do when the
        agent's user may neither see nor create it (an ACL'd cluster where it was
        not granted: the agent ships nothing until it is, or until `audit: false`)."""
        from confluent_kafka import KafkaException

        assert self.audit is not None
        settings = client_settings(self.config, self.client_id)
        topic, log = self.audit.topic, self.context.log
        try:
            await asyncio.to_thread(
                ensure_topic, settings, topic, AUDIT_PARTITIONS, AUDIT_TOPIC_CONFIG, log
            )
        except KafkaException as exc:
            raise RuntimeError(
                f"audit topic {topic}: {exc.args[0].str()}; create it and grant this agent's "
                "user WRITE and DESCRIBE on it (deploy/README.md), or set audit: false on "
                "the sink"
            ) from None

    async def run(self, channel: Channel) -> None:
        cfg, log = self.config, self.context.log
        transactional_id = self.transactional_id
        producer = SinkProducer(
            producer_settings(
                cfg, self.client_id, transactional_id, self._on_error, self.stats.on_stats
            )
        )
        try:
            if self.audit is not None:
                await self._ensure_audit_topic()
            if cfg.audit_drill is not None:
                log.warning(
                    "audit drill: %d records will be lost and %d duplicated on purpose, each "
                    "counted as delivered once; `logflume audit` must report them",
                    cfg.audit_drill.drop,
                    cfg.audit_drill.duplicate,
                )
            strategy: ExactlyOnce | AtLeastOnce
            if cfg.delivery == "exactly_once":
                strategy = ExactlyOnce(
                    cfg,
                    producer,
                    client_settings(cfg, self.client_id),
                    transactional_id,
                    self.records,
                    self.dead_letters,
                    self.metrics,
                    log,
                    self.audit,
                )
            else:
                strategy = AtLeastOnce(
                    cfg, producer, self.records, self.dead_letters, self.metrics, log, self.audit
                )
            await strategy.run(channel)
        finally:
            await producer.close()
            self.metrics.oldest_age.set(0)
