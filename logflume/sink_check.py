"""`logflume agent test-output`: whether each kafka sink of a pipelines file could
deliver, checked as the sink would connect, without sending a record.

Per sink, in order, stopping at the first problem:

1. connect: an AdminClient made from the sink's own settings (sinks/kafka/config.py
   `client_settings`, so its `tls:`, `sasl:` and `producer:` security keys) asks for
   the cluster's description. librdkafka's error callback tells why it could not:
   the bootstrap (or a broker it advertises) unreachable, the TLS handshake refused
   (with OpenSSL's reason), the SASL login refused.
2. topics: Metadata with the topics' authorized operations (KIP-430), through
   `describe_topics(include_authorized_operations=True)`: the data topic (a
   template whose only placeholder is `{host}` is rendered for this host; others
   depend on each record and are not checked), the dead-letter topic of an
   exactly-once sink, its positions topic, and the audit topic when `audit: true`.
   Each must exist and allow WRITE (the positions topic READ too: the sink reads it
   back at start). A missing positions or audit topic is fine when this user may
   create it, since the sink creates those at start; whether it may is asked with a
   CreateTopics of `validate_only`, which creates nothing. A missing data or
   dead-letter topic is a problem: the sink never creates them, and a broker that
   auto-creates topics gives them its default partitions; the line says whether the
   broker would.
3. transactional id (exactly-once): WRITE on it, which its InitProducerId needs.
   Calling init_transactions on a throwaway producer would fence the running agent's
   producer of the same id, and no API reports a transactional id's authorized
   operations. The check sends EndTxn (abort) for producer id -1, epoch -1 over the
   project's own client (broker/protocol/client.py) to a bootstrap server: the broker
   checks WRITE on the id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and
   otherwise answers that no producer -1 holds the id (INVALID_PRODUCER_ID_MAPPING;
   Kafka's retry paths need a real producer id or epoch 32766; NOT_COORDINATOR from a
   broker that does not coordinate it) before touching any transaction: nothing
   changes.
   That connection uses the `tls:` and `sasl:` blocks (`ssl_context` of
   sinks/kafka/security.py); security keys set in `producer:` apply to steps 1-2
   only.
"""

from __future__ import annotations

import dataclasses
import time

from common.hostname import this_host
from common.topic_names import dead_letter_topic
from sinks.kafka.config import KafkaSinkConfig, client_settings
from sinks.kafka.sink import transactional_id
from sinks.kafka.templates import parse

DEFAULT_TIMEOUT_S = 10.0
TOPIC_ERRORS = {"UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED"}
AUTH_ERRORS = {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"}
DENIED = {"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}


class CheckFailed(Exception):
    """The first problem of a sink, in one line."""


@dataclasses.dataclass
class SinkResult:
    agent: str
    sink: str
    ok: bool
    bootstrap: str
    topic: str | None
    detail: str  # the first problem, or what was found allowed

    def line(self, with_agent: bool) -> str:
        name = f"{self.agent}.{self.sink}" if with_agent else self.sink
        return f"sink {name}: {'ok' if self.ok else 'FAILED'} ({self.detail})"

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


def check_sink(
    agent: str, sink: str, config: KafkaSinkConfig, timeout: float = DEFAULT_TIMEOUT_S
) -> SinkResult:
    """Steps 1-3 of the module docstring for one sink."""
    topic = _data_topic(config)
    result = SinkResult(agent, sink, False, config.bootstrap_servers, topic, "")
    try:
        found = _Checker(agent, sink, config, timeout).run(topic)
    except CheckFailed as problem:
        result.detail = str(problem)
        return result
    result.ok = True
    result.detail = f"bootstrap {config.bootstrap_servers}, " + ", ".join(found)
    return result


def _data_topic(config: KafkaSinkConfig) -> str | None:
    """The sink's topic, a `{host}`-only template rendered for this host; None when
    it depends on each record."""
    template = parse(config.topic)
    if template.constant is not None:
        return template.constant
    if set(template.names) == {"host"}:
        return template.text.replace("{host}", this_host())
    return None


class _Checker:
    """One sink's checks; owns its AdminClient."""

    def __init__(self, agent: str, sink: str, config: KafkaSinkConfig, timeout: float):
        from confluent_kafka.admin import AdminClient

        self.agent, self.sink, self.config, self.timeout = agent, sink, config, timeout
        self.errors: list = []  # librdkafka's error callback, from its background thread
        settings: dict = client_settings(config, f"logflume-test-output-{agent}-{sink}")
        # librdkafka's own log lines would repeat what the error callback tells
        settings.update({"error_cb": self.errors.append, "log_level": 0})
        self.admin = AdminClient(settings)

    def run(self, topic: str | None) -> list[str]:
        cfg = self.config
        cluster = self._wait(
            self.admin.describe_cluster(
                include_authorized_operations=True, request_timeout=self.timeout
            ),
            f"bootstrap {cfg.bootstrap_servers}",
        )
        node = cluster.nodes[0].id if cluster.nodes else None
        found = []
        wants: list[tuple[str, str, tuple[str, ...], bool]] = []  # name, role, ops, sink-made
        if topic is None:
            found.append(f"topic template {cfg.topic} not checked: it depends on each record")
        else:
            wants.append((topic, "topic", ("WRITE",), False))
        exactly_once = cfg.delivery == "exactly_once"
        if exactly_once:
            dlq = cfg.dead_letter_topic or dead_letter_topic(cfg.topic)
            wants.append((dlq, "dead-letter topic", ("WRITE",), False))
            wants.append((cfg.positions_topic, "positions topic", ("WRITE", "READ"), True))
        if cfg.audit:
            wants.append((cfg.audit_topic, "audit topic", ("WRITE", "DESCRIBE"), True))
        for name, role, ops, sink_made in wants:
            found.append(self._topic(name, role, ops, sink_made, node))
        if exactly_once:
            tid = transactional_id(cfg, self.agent, self.sink)
            self._transactional_id(tid)
            found.append(f"transactional id {tid} WRITE allowed")
        return found

    def _wait(self, future, what: str):
        """The future's result; a connection problem librdkafka reported meanwhile
        fails at once (it would retry until the timeout). A topic's own error (missing,
        not authorized) is raised as the KafkaException it is."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.timeout
        while not future.done() and time.monotonic() < deadline:
            self.admin.poll(0.05)  # serves the error callback
            self._raise_connection_problem(what, final=False)
        try:
            return future.result(max(0.0, deadline - time.monotonic()) + 0.1)
        except KafkaException as exc:
            if exc.args[0].name() in TOPIC_ERRORS:
                raise
            self._raise_connection_problem(what, final=True)
            raise CheckFailed(f"{what}: {exc.args[0].str()}") from None
        except Exception:  # concurrent.futures.TimeoutError
            self._raise_connection_problem(what, final=True)
            raise CheckFailed(f"{what}: no answer in {self.timeout:g}s") from None

    def _raise_connection_problem(self, what: str, final: bool) -> None:
        for err in list(self.errors):
            name, text = err.name(), err.str()
            if name in AUTH_ERRORS:
                raise CheckFailed(f"SASL authentication failed: {text}")
            if name == "_SSL" or "SSL handshake failed" in text:
                raise CheckFailed(f"TLS handshake failed: {text}")
        if final or any(e.name() == "_ALL_BROKERS_DOWN" for e in self.errors):
            transport = [e for e in self.errors if e.name() in ("_TRANSPORT", "_RESOLVE")]
            if transport:
                raise CheckFailed(f"{what} unreachable: {transport[0].str()}")
            if self.errors:
                raise CheckFailed(f"{what} unreachable: {self.errors[0].str()}")

    def _topic(self, name: str, role: str, ops: tuple[str, ...], sink_made: bool, node) -> str:
        from confluent_kafka import KafkaException, TopicCollection

        futures = self.admin.describe_topics(
            TopicCollection([name]), include_authorized_operations=True,
            request_timeout=self.timeout,
        )  # fmt: skip
        try:
            description = self._wait(futures[name], f"{role} {name}")
        except KafkaException as exc:
            if exc.args[0].name() == "TOPIC_AUTHORIZATION_FAILED":
                raise CheckFailed(
                    f"{role} {name}: WRITE denied (this user may not even DESCRIBE it)"
                ) from None
            return self._missing(name, role, sink_made, node)
        granted = {op.name for op in description.authorized_operations or ()}
        denied = [op for op in ops if op not in granted]
        if denied:
            raise CheckFailed(f"{role} {name}: {' and '.join(denied)} denied")
        return f"{role} {name} {' and '.join(ops)} allowed"

    def _missing(self, name: str, role: str, sink_made: bool, node) -> str:
        may_create = self._may_create(name)
        if sink_made:
            if may_create:
                return f"{role} {name} missing: the sink creates it at start"
            raise CheckFailed(f"{role} {name} missing, and this user may not create it")
        auto = self._auto_create(node)
        if auto is False:
            would = "the broker would not create it (auto.create.topics.enable=false)"
        elif not may_create:
            would = "the broker would not create it: this user may not CREATE it"
        elif auto:
            would = "the broker would create it on first write, with its default partitions"
        else:
            would = "the broker creates it on first write if auto.create.topics.enable=true"
        raise CheckFailed(f"{role} {name} missing; the sink does not create it, {would}")

    def _may_create(self, name: str) -> bool:
        """CREATE on the topic or the cluster, asked with a validate-only CreateTopics."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        futures = self.admin.create_topics(
            [NewTopic(name, 1, 1)], validate_only=True, request_timeout=self.timeout
        )
        try:
            futures[name].result(self.timeout)
        except KafkaException as exc:
            return exc.args[0].name() not in DENIED
        return True

    def _auto_create(self, node) -> bool | None:
        """The broker's auto.create.topics.enable; None when this user may not read
        the broker's configuration."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import ConfigResource, ResourceType

        if node is None:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(node))
        try:
            configs = self.admin.describe_configs([resource], request_timeout=self.timeout)
            entries = configs[resource].result(self.timeout)
        except KafkaException:
            return None
        entry = entries.get("auto.create.topics.enable")
        return None if entry is None else entry.value == "true"

    def _transactional_id(self, tid: str) -> None:
        """Step 3 of the module docstring."""
        from broker.protocol import ApiKey, ErrorCode
        from broker.protocol.client import BlockingClient, SaslLogin, Security
        from common.hostport import parse_hostport
        from sinks.kafka.security import ssl_context

        cfg = self.config
        sasl = cfg.sasl
        security = Security(
            tls=ssl_context(cfg.tls) if cfg.tls is not None else None,
            sasl=SaslLogin(sasl.mechanism, sasl.username, sasl.password) if sasl else None,
        )
        body = {"transactional_id": tid, "producer_id": -1, "producer_epoch": -1}
        problem = None
        for server in cfg.bootstrap_servers.split(","):
            try:
                host, port = parse_hostport(server.strip())
                with BlockingClient(
                    host, port, self.timeout, "logflume-test-output", security
                ) as c:
                    answer = c.request(ApiKey.END_TXN, 0, {**body, "committed": False})
            except Exception as exc:  # the first steps connected; say what this one met
                problem = f"{server.strip()}: {exc}"
                continue
            if answer["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise CheckFailed(f"transactional id {tid}: WRITE denied")
            return
        raise CheckFailed(f"transactional id {tid}: could not be checked ({problem})")
