"""The kafka sink's own series: delivery counters, acknowledgement latency, dead
letters, retries, audit publications that failed, the age of the oldest undelivered batch and authentication
failures (librdkafka's statistics are stats.py's)."""

from __future__ import annotations

from agent.api import Context
from agent.delivery import SinkCounters


class KafkaSinkMetrics:
    """Built once per sink; shared by its delivery strategy and its error callback.
    The series are thread-safe (the error callback runs on the poll thread)."""

    def __init__(self, context: Context):
        self.counters = SinkCounters(context)
        m, c = context.metrics, context.name
        self.ack_latency = m.histogram(
            "logflume_agent_broker_ack_latency_seconds",
            "Time from producing a take batch to the last broker acknowledgement",
            component=c,
        )
        self.dead = m.counter(
            "logflume_agent_broker_dead_lettered_total",
            "Records sent to the dead-letter topic",
            component=c,
        )
        self.retried = m.counter(
            "logflume_agent_broker_retried_total",
            "Records produced again after a failure",
            component=c,
        )
        self.oldest_age = m.gauge(
            "logflume_agent_oldest_undelivered_event_age_seconds",
            "Time since the sink took its oldest batch not yet acknowledged (0: none)",
            component=c,
        )
        self.audit_failures = m.counter(
            "logflume_agent_audit_publish_failures_total",
            "Publications of audit totals the broker did not acknowledge (sent again later)",
            component=c,
        )
        self.auth_failures = m.counter(
            "logflume_agent_kafka_auth_failures_total",
            "Authentication failures reported by the producer (wrong SASL credentials, TLS)",
            component=c,
        )
