"""Which broker configs may change without a restart (KIP-226), as Kafka 3.9 lists them.

Pure: the key sets of Kafka's DynamicBrokerConfig (its AllDynamicConfigs: the TLS
key material, the log defaults, the cleaner, thread pools, listener and socket
settings, producer-state and remote-log settings) and the broker quotas only dynamic
configs hold (`leader.replication.throttled.rate` ...), with Kafka's checks of a
change and their messages (`check_change`), the synonyms a key is described with
(`broker_synonyms`) and how a layer of dynamic configs overrides the layers below
(`overlay`). broker/dynamic_config.py applies them; broker/reference.py marks the
dynamic keys in BROKER-CONFIGURATION.md (`update_mode`).

Two levels, as Kafka has them: per broker (the broker resource "<id>") and the
cluster-wide default (the resource ""). Security configs (keystores, truststores,
their passwords) and listener configs exist only per broker and per listener
(`listener.name.<l>.ssl.keystore.location`); the unprefixed ssl.* keys stay static.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from broker.config import KEYS, LISTENER_PREFIX, TOPIC_SYNONYMS, kafka_broker_keys
from broker.config_ops import DELETE, SET, apply_list_op, list_op_refused

# SslConfigs.RECONFIGURABLE_CONFIGS: changed per broker, per listener only.
SECURITY = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
# DynamicListenerConfig.ReconfigurableConfigs.
LISTENER = frozenset(
    {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)
# The log defaults: the primary broker synonym of every topic config
# (ServerTopicConfigSynonyms), but log.message.format.version. log.retention.hours,
# log.roll.hours ... are not among them: Kafka changes the millisecond key only.
LOG = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "message.max.bytes",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.downconversion.enable",
        "log.local.retention.ms",
        "log.local.retention.bytes",
    }
)
CLEANER = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
THREADS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
     "background.threads"}
)  # fmt: skip
SOCKET = frozenset(
    {"max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
     "max.connection.creation.rate"}
)  # fmt: skip
OTHERS = frozenset(
    {
        "metric.reporters",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.list.offsets.request.timeout.ms",
    }
)
# Adding, removing or re-advertising listeners (Kafka's listener reconfiguration) is
# not served: these stay read-only here, refused as Kafka refuses a static key.
LISTENER_REGISTRATION = frozenset(
    {"listeners", "advertised.listeners", "listener.security.protocol.map"}
)
ALL_DYNAMIC = (
    SECURITY | LISTENER | LOG | CLEANER | THREADS | SOCKET | OTHERS
) - LISTENER_REGISTRATION
# QuotaConfig.brokerQuotaConfigs: no KafkaConfig key, dynamic configs only (longs >= 0).
BROKER_QUOTAS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
_CLUSTER_LEVEL_LISTENER = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
PER_BROKER = (SECURITY | LISTENER) - _CLUSTER_LEVEL_LISTENER
# Keys of the broker's KafkaConfig whose type is PASSWORD, among the dynamic ones.
PASSWORDS = frozenset(
    {
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
    }
)
# Kafka's listener configs that a SASL mechanism prefixes: listener.name.<l>.<mech>.<key>.
_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)
# What this broker applies live; the other dynamic keys are stored and reported with
# the line that they have no effect here.
APPLIED = frozenset(
    k
    for k in LOG | SECURITY | {"producer.id.expiration.ms", "ssl.client.auth", "ssl.protocol",
                               "ssl.enabled.protocols"}
    if k in KEYS
) | {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}  # fmt: skip
_LISTENER_RE = re.compile(r"listener\.name\.[^.]*\.(.*)")
# Kafka's synonym families (DynamicBrokerConfig.brokerConfigSynonyms), finest first.
_FAMILIES = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
# Kafka's quota and dynamic-only key types, for DescribeConfigs of keys outside KEYS.
LONG_TYPED = BROKER_QUOTAS | {"log.cleaner.dedupe.buffer.size"}


class DynamicConfigError(ValueError):
    """A dynamic change Kafka refuses with a ConfigException (INVALID_CONFIG); the
    message is Kafka's."""


def base_name(name: str) -> str:
    """The config a listener override sets: `listener.name.ssl.ssl.key.password` ->
    `ssl.key.password`, `listener.name.sasl.plain.sasl.jaas.config` -> `sasl.jaas.config`."""
    m = _LISTENER_RE.fullmatch(name)
    if m is None:
        return name
    rest = m.group(1)
    return next((c for c in _MECHANISM_CONFIGS if rest.endswith(c)), rest)


def is_password(name: str) -> bool:
    """Kafka's DynamicBrokerConfig.isPasswordConfig: a dynamic password key, or any
    key (a listener override) ending with one."""
    return any(name.endswith(p) for p in PASSWORDS)


def broker_synonyms(name: str, match_listener: bool) -> list[str]:
    """Kafka's brokerConfigSynonyms: `name` and the keys that set the same value, in
    precedence order; with `match_listener`, a listener override's base key too."""
    for family in _FAMILIES:
        if name in family:
            return list(family)
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    if match_listener and name.startswith(LISTENER_PREFIX):
        return [name, base_name(name)]
    return [name]


def overlay(props: dict[str, str], layer: Mapping[str, str]) -> None:
    """Kafka's overrideProps: each key of `layer` wins over `props`, its synonyms
    removed first (a dynamic log.roll.ms beats a static log.roll.hours)."""
    for k, v in layer.items():
        for synonym in broker_synonyms(k, match_listener=False):
            props.pop(synonym, None)
        props[k] = v


def update_mode(name: str) -> str | None:
    """ "per-broker", "cluster-wide" (Kafka's dynamicConfigUpdateModes), None when static."""
    if name not in ALL_DYNAMIC:
        return None
    return "per-broker" if name in PER_BROKER else "cluster-wide"


def _scala_set(names) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def known_key(name: str) -> bool:
    """A key the broker's config knows (Kafka's KafkaConfig, a listener override or a
    broker quota)."""
    return (
        name in KEYS
        or name in kafka_broker_keys()
        or name in BROKER_QUOTAS
        or name.startswith(LISTENER_PREFIX)
    )


def check_change(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs for the full new set of one
    entity's dynamic configs; DynamicConfigError with Kafka's message."""
    names = set(props)
    read_only = {n for n in names if n not in ALL_DYNAMIC and n not in BROKER_QUOTAS and _static(n)}
    if read_only:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {_scala_set(read_only)}"
        )
    for n in sorted(names):
        if _LISTENER_RE.fullmatch(n) and base_name(n) not in ALL_DYNAMIC:
            listener = n[len(LISTENER_PREFIX) :].split(".", 1)[0].upper()
            raise DynamicConfigError(
                f"Configs cannot be updated dynamically for existing listener "
                f"ListenerName({listener}), restart broker or create a new listener for update"
            )
    bare = names & SECURITY
    if bare:
        raise DynamicConfigError(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {_scala_set(bare)}"
        )
    for name, value in props.items():
        _check_type(name, value)
    if not per_broker:
        broker_only = (names & PER_BROKER) | {
            n
            for n in names
            if _LISTENER_RE.fullmatch(n) and base_name(n) not in _CLUSTER_LEVEL_LISTENER
        }
        if broker_only:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(broker_only)}"
            )


def _static(name: str) -> bool:
    """A KafkaConfig key (Kafka's nonDynamicProps holds only those: any other name,
    a listener override or a custom key, passes this check)."""
    return name in KEYS or name in kafka_broker_keys()


def _check_type(name: str, value: str) -> None:
    base = base_name(name)
    if base in BROKER_QUOTAS:
        try:
            number = int(value.strip())
        except ValueError:
            raise DynamicConfigError(
                f"Invalid value {value} for configuration {name}: Not a number of type LONG"
            ) from None
        if number < 0:
            raise DynamicConfigError(
                f"Invalid value {value} for configuration {name}: Value must be at least 0"
            )
        return
    key = KEYS.get(base)
    if key is None or key.type not in ("int", "long", "short", "double", "bool"):
        return
    text = value.strip()
    try:
        if key.type == "double":
            float(text)
        elif key.type == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
        else:
            int(text)
    except ValueError:
        kind = {"int": "INT", "long": "LONG", "short": "SHORT", "double": "DOUBLE"}
        expected = (
            "Expected value to be either true or false"
            if key.type == "bool"
            else f"Not a number of type {kind[key.type]}"
        )
        raise DynamicConfigError(
            f"Invalid value {value} for configuration {name}: {expected}"
        ) from None


def list_typed(name: str) -> bool:
    """Whether APPEND and SUBTRACT apply to `name` (a LIST config, as Kafka types it)."""
    key = KEYS.get(base_name(name))
    return key is not None and key.type == "list"


def apply_incremental(current: Mapping[str, str], ops: list[dict]) -> dict[str, str]:
    """Kafka's prepareIncrementalConfigs on one entity's dynamic configs: SET, DELETE,
    APPEND and SUBTRACT (list configs only; from the key's default when unset)."""
    out = dict(current)
    for op in ops:
        name, kind, value = op["name"], op["config_operation"], op["value"]
        if kind == SET:
            out[name] = value
        elif kind == DELETE:
            out.pop(name, None)
        else:
            if not known_key(name):
                raise DynamicConfigError(f"Unknown config name: {name}")
            if not list_typed(name):
                raise DynamicConfigError(list_op_refused(kind, name))
            default = KEYS[base_name(name)].default
            old = out.get(name, "" if default is None else str(default))
            out[name] = apply_list_op(kind, old, value)
    return out


def topic_synonym_family(topic_key: str) -> list[str]:
    """The broker keys giving topic config `topic_key` its default, in precedence order."""
    broker_key = TOPIC_SYNONYMS.get(topic_key)
    return [] if broker_key is None else broker_synonyms(broker_key, match_listener=False)
