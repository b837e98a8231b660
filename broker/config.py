"""Broker configuration: Kafka's `server.properties` names, types and defaults.

(Longer than the ~450 lines modules keep to: ~260 of them are the table of keys,
one line or two per key, in sections, kept in one place so that a key is found
where Kafka's documentation lists it; listener parsing is in broker/listeners.py.
BROKER-CONFIGURATION.md is made from the table by broker/reference.py: `logflume
broker --reference --output BROKER-CONFIGURATION.md` after changing a key.)

A broker is configured from three layers, later ones winning: the defaults below
(Kafka's own, except where noted), a properties file (`--config FILE`, read by
Java's rules with the javaproperties library: ISO-8859-1, backslash escapes and
continuations, `=`/`:`/space separators) and `--set key=value` overrides;
`--data-dir`, `--listen` and `--advertised` on the command line set `log.dirs`,
`listeners` and `advertised.listeners`. A value of the wrong type is an error that
names the key, raised before anything starts. A key that Kafka defines but this
broker does not use (`num.network.threads`, the list in kafka_broker_keys.txt) is
accepted and reported in `BrokerConfig.unused`, which the broker logs in one
warning, so that Kafka's own server.properties starts a broker; any other key is an
error that suggests the nearest known key (a typo must not be silently ignored).
The keys of KRaft mode (`process.roles`, `node.id`, `controller.quorum.*`,
`controller.listener.names`) are errors too, naming the file and what to set
instead: this broker runs in ZooKeeper mode only, and ignoring them would start a
lone broker 0 where the file asks for a cluster node. The keys Kafka marks dynamic
(broker/dynamic_keys.py) may change while the broker runs, per broker or as the
cluster-wide default (broker/dynamic_config.py: `BrokerConfig.adopt` takes the
merged layers); the others are read once at start.

Listeners (broker.listeners): `listeners` and `advertised.listeners` are lists of
`NAME://host:port`, `listener.security.protocol.map` gives each name its protocol
(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), `inter.broker.listener.name` or
`security.inter.broker.protocol` the one brokers replicate over. The ssl.* keys are
Kafka's with PEM material (broker.server.tls); each may be overridden for one
listener as `listener.name.<lowercase name>.ssl.*`, as in Kafka (and a SASL_SSL
listener takes `ssl.client.auth` only so: KIP-684). SASL listeners take
`sasl.enabled.mechanisms` (or `listener.name.<l>.sasl.enabled.mechanisms`) and the
JAAS entries `listener.name.<l>.<mechanism>.sasl.jaas.config` (broker.sasl.settings),
checked here before anything starts. Other `listener.name.*` keys are accepted as
unused. Keys of type password (private keys, inline PEM, JAAS entries) are never
shown by DescribeConfigs.

Topic-level defaults come from the broker keys that are their Kafka synonyms
(`log.retention.hours` -> `retention.ms`, `message.max.bytes` ->
`max.message.bytes` ...); `BrokerConfig.topic_defaults()` gives them as topic
property names, ready for `LogConfig.from_props`.

Deviation from Kafka: `broker.id` defaults to 0 (a single node needs no setup) and
`offsets.topic.replication.factor` defaults to 1 for the same reason, as do
`transaction.state.log.replication.factor` and `transaction.state.log.min.isr`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import javaproperties

from broker.features import SUPPORTED as FEATURES
from broker.groups.consumer.assignors import assignors_from_config
from broker.groups.consumer.migration import MIGRATION_POLICIES
from broker.listeners import DEFAULT_PROTOCOL_MAP, ListenerError, ListenerSetup, resolve
from broker.log.config import TOPIC_CONFIG_NAMES, LogConfig
from broker.password_encoder import DEFAULT_KEY_FACTORY, check_settings
from broker.sasl.settings import client_credentials, listener_sasl
from broker.security.authorizer import AUTHORIZER_CLASSES
from common.hostport import parse_hostport

LONG_MAX = 9223372036854775807


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    name: str
    type: str  # int, long, short, bool, string, list, double, password
    default: object
    doc: str


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    """The keys after it in the table, up to the next Section, belong together
    (BROKER-CONFIGURATION.md groups them so); `note` says what holds for all."""

    title: str
    note: str = ""


_TABLE: list[Key | Section] = [
    Section("Identity and data directory"),
    Key("broker.id", "int", 0, "This broker's node id."),
    Key(
        "log.dirs",
        "string",
        None,
        "The data directory (one directory); required, here or as --data-dir.",
    ),
    Key("log.dir", "string", None, "Alias of log.dirs."),
    Section(
        "Listeners", "`--listen` and `--advertised` set `listeners` and `advertised.listeners`."
    ),
    Key(
        "listeners",
        "list",
        "PLAINTEXT://127.0.0.1:9092",
        "Listeners to bind: NAME://host:port,... (names unique, ports unique).",
    ),
    Key(
        "advertised.listeners",
        "list",
        None,
        "NAME://host:port published to clients per listener (default: the listener's own).",
    ),
    Key(
        "listener.security.protocol.map",
        "list",
        DEFAULT_PROTOCOL_MAP,
        "NAME:PROTOCOL per listener: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.",
    ),
    Key(
        "inter.broker.listener.name",
        "string",
        None,
        "Listener the brokers use to reach each other (exclusive with the next key).",
    ),
    Key(
        "security.inter.broker.protocol",
        "string",
        None,
        "Inter-broker protocol, i.e. the listener of that name (default PLAINTEXT).",
    ),
    Section(
        "TLS",
        "Any of these may be set for one listener as "
        "`listener.name.<lowercase listener name>.<key>`, which wins over the broker-wide key.",
    ),
    Key("ssl.keystore.type", "string", "JKS", "PEM is supported (JKS/PKCS12 are not)."),
    Key("ssl.keystore.location", "string", None, "PEM file: private key and certificate chain."),
    Key("ssl.keystore.certificate.chain", "password", None, "Inline PEM certificate chain."),
    Key("ssl.keystore.key", "password", None, "Inline PEM private key (with the chain above)."),
    Key("ssl.key.password", "password", None, "Password of an encrypted private key."),
    Key("ssl.truststore.type", "string", "JKS", "PEM is supported (JKS/PKCS12 are not)."),
    Key("ssl.truststore.location", "string", None, "PEM file of trusted CA certificates."),
    Key("ssl.truststore.certificates", "password", None, "Inline PEM trusted CA certificates."),
    Key(
        "ssl.client.auth",
        "string",
        "none",
        "Client certificates: none, requested, required. Broker-wide it applies to SSL "
        "listeners only; a SASL_SSL listener takes it only as "
        "`listener.name.<lowercase listener name>.ssl.client.auth` (default none), as in Kafka.",
    ),
    Key("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions (TLSv1.2 at least)."),
    Key("ssl.protocol", "string", "TLSv1.3", "TLS, TLSv1.2 or TLSv1.3 (the highest allowed)."),
    Key(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "Inter-broker: https checks the server's host name; empty does not.",
    ),
    Key(
        "ssl.allow.dn.changes",
        "bool",
        False,
        "A keystore changed dynamically may hold a certificate of another subject DN.",
    ),
    Key(
        "ssl.allow.san.changes",
        "bool",
        False,
        "A keystore changed dynamically may hold a certificate of other subject alt names.",
    ),
    Key(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Client certificate DN -> principal name: RULE:pattern/replacement/[LU],...,DEFAULT.",
    ),
    Section("Authorization (ACLs)"),
    Key(
        "authorizer.class.name",
        "string",
        "",
        "ACLs on: kafka.security.authorizer.AclAuthorizer or "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (both mean Kafka's "
        "ACL authorizer); empty: no authorization.",
    ),
    Key(
        "super.users",
        "string",
        "",
        "Principals allowed everything, separated by ';' (User:admin;User:CN=broker). "
        "With an authorizer in a cluster the brokers' own principal must be one.",
    ),
    Key(
        "allow.everyone.if.no.acl.found",
        "bool",
        False,
        "With an authorizer: allow access to a resource that has no ACL at all.",
    ),
    Section(
        "SASL",
        "`sasl.enabled.mechanisms` may be set for one listener as "
        "`listener.name.<lowercase listener name>.sasl.enabled.mechanisms`; each mechanism of a "
        "SASL listener takes its JAAS entry as "
        "`listener.name.<lowercase listener name>.<lowercase mechanism>.sasl.jaas.config`.",
    ),
    Key(
        "sasl.enabled.mechanisms",
        "list",
        "GSSAPI",
        "Mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI is not "
        "served: set this when a listener is SASL_*).",
    ),
    Key(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        "Mechanism brokers use on a SASL inter-broker listener (its JAAS username/password).",
    ),
    Key("sasl.jaas.config", "password", None, "A JAAS login module entry (per listener)."),
    Key(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "Largest request accepted on a SASL connection before it has authenticated.",
    ),
    Key(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "Delay before closing a connection whose authentication failed.",
    ),
    Section("Topics, requests and connections"),
    Key("num.partitions", "int", 1, "Partitions of auto-created topics."),
    Key("default.replication.factor", "int", 1, "Replication factor of new topics."),
    Key("auto.create.topics.enable", "bool", True, "Create unknown topics on use."),
    Key("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    Key("min.insync.replicas", "int", 1, "ISR size needed for acks=all."),
    Key("message.max.bytes", "int", 1048588, "Largest record batch accepted."),
    Key("socket.request.max.bytes", "int", 104857600, "Largest request accepted."),
    Key(
        "max.request.partition.size.limit",
        "int",
        2000,
        "Most partitions one DescribeTopicPartitions answer lists (the request's own limit "
        "may be lower).",
    ),
    Key("connections.max.idle.ms", "long", 600000, "Close idle connections (-1: never)."),
    Key("compression.type", "string", "producer", "Codec of stored batches (producer: as sent)."),
    Section(
        "Log segments, retention and flushing",
        "Where keys give one setting in different units, the finest one set wins "
        "(log.retention.ms, then log.retention.minutes, then log.retention.hours).",
    ),
    Key("log.segment.bytes", "int", 1073741824, "Segment size before rolling."),
    Key("log.roll.ms", "long", None, "Segment age before rolling (unset: log.roll.hours)."),
    Key("log.roll.hours", "int", 168, "Segment age before rolling, in hours."),
    Key(
        "log.roll.jitter.ms",
        "long",
        None,
        "Random jitter on segment rolling (unset: log.roll.jitter.hours).",
    ),
    Key("log.roll.jitter.hours", "int", 0, "Random jitter on segment rolling, in hours."),
    Key(
        "log.retention.ms",
        "long",
        None,
        "Time retention (unset: log.retention.minutes, then log.retention.hours).",
    ),
    Key("log.retention.minutes", "int", None, "Time retention, in minutes."),
    Key("log.retention.hours", "int", 168, "Time retention, in hours."),
    Key("log.retention.bytes", "long", -1, "Size retention per partition."),
    Key("log.retention.check.interval.ms", "long", 300000, "Retention check period."),
    Key("log.flush.interval.messages", "long", LONG_MAX, "Flush after this many records."),
    Key(
        "log.flush.interval.ms",
        "long",
        None,
        "Flush after this long (unset: log.flush.scheduler.interval.ms).",
    ),
    Key("log.flush.scheduler.interval.ms", "long", LONG_MAX, "Flush check period."),
    Key("log.flush.offset.checkpoint.interval.ms", "int", 60000, "Recovery point period."),
    Key("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "Log start period."),
    Key("log.index.interval.bytes", "int", 4096, "Bytes between index entries."),
    Key("log.index.size.max.bytes", "int", 10485760, "Index file size."),
    Key("log.segment.delete.delay.ms", "long", 60000, "Delay before deleting files."),
    Key("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime."),
    Key(
        "log.message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
    ),
    Key(
        "log.message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        "How far in the future a CreateTime timestamp may be.",
    ),
    Key("log.preallocate", "bool", False, "Preallocate segment files."),
    Key(
        "log.message.format.version",
        "string",
        "3.0-IV1",
        "Deprecated since Kafka 3.0, no effect: every batch is stored in format v2 "
        "(a Kafka version such as 2.8 or 3.0-IV1).",
    ),
    Key(
        "log.message.downconversion.enable",
        "bool",
        True,
        "Down-convert to legacy messages for consumers that fetch with Fetch v0-3; "
        "false answers them UNSUPPORTED_VERSION.",
    ),
    Section(
        "Client quotas",
        "The quotas themselves are set per user and client id with AlterClientQuotas "
        "(`logflume configs --entity-type users|clients`).",
    ),
    Key(
        "quota.window.num",
        "int",
        11,
        "Samples a client's byte rate is measured over (producer and consumer quotas).",
    ),
    Key("quota.window.size.seconds", "int", 1, "Length of one quota sample, in seconds."),
    Section(
        "Client telemetry (KIP-714)",
        "Clients push metrics only once a client-metrics subscription exists "
        "(`logflume client-metrics --alter`).",
    ),
    Key(
        "telemetry.max.bytes",
        "int",
        1048576,
        "Largest metrics payload of a PushTelemetry request, compressed as sent; more is "
        "answered TELEMETRY_TOO_LARGE.",
    ),
    Section("Log compaction"),
    Key("log.cleanup.policy", "list", "delete", "delete, compact or both."),
    Key("log.cleaner.enable", "bool", True, "Run the log cleaner."),
    Key("log.cleaner.backoff.ms", "long", 15000, "Cleaner period."),
    Key("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio to clean."),
    Key("log.cleaner.delete.retention.ms", "long", 86400000, "Tombstone retention."),
    Key("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age to compact."),
    Key("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum age uncompacted."),
    Section("Consumer groups and offsets"),
    Key("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets."),
    Key(
        "offsets.topic.replication.factor", "short", 1, "Replication factor of __consumer_offsets."
    ),
    Key("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets."),
    Key("offsets.retention.minutes", "int", 10080, "Committed offset retention."),
    Key("offsets.commit.timeout.ms", "int", 5000, "Offset commit acks=all wait."),
    Key("group.initial.rebalance.delay.ms", "int", 3000, "Delay of a new group's rebalance."),
    Key("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout."),
    Key("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout."),
    Key(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        "Session timeout of consumer-protocol members (KIP-848).",
    ),
    Key(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        "Heartbeat interval given to consumer-protocol members.",
    ),
    Key(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        "Server-side assignors of consumer groups; the first is the default.",
    ),
    Key("group.consumer.max.size", "int", 2147483647, "Most members of a consumer group."),
    Key(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        "Smallest consumer.session.timeout.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.consumer.max.session.timeout.ms",
        "int",
        60000,
        "Largest consumer.session.timeout.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest consumer.heartbeat.interval.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest consumer.heartbeat.interval.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Online conversion of non-empty groups between the classic and consumer protocols: "
        "bidirectional, upgrade, downgrade or disabled.",
    ),
    Section(
        "Share groups (KIP-932)",
        "Share groups are served with feature level share.version=1: the group on its "
        "coordinator, each share-partition on its data partition's leader.",
    ),
    Key("group.share.heartbeat.interval.ms", "int", 5000, "Share group heartbeat interval."),
    Key("group.share.session.timeout.ms", "int", 45000, "Share group member session timeout."),
    Key(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a share consumer holds the records it acquired.",
    ),
    Key(
        "group.share.delivery.count.limit",
        "int",
        5,
        "Deliveries of a record before it is archived.",
    ),
    Key(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Records in flight per share-partition.",
    ),
    Key("group.share.max.size", "int", 200, "Members per share group."),
    Key(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        "Smallest share.session.timeout.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        "Largest share.session.timeout.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest share.heartbeat.interval.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest share.heartbeat.interval.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        "Smallest share.record.lock.duration.ms a group may be given (dynamic group configs).",
    ),
    Key(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        "Largest share.record.lock.duration.ms a group may be given (dynamic group configs).",
    ),
    Key("group.share.max.share.sessions", "int", 2000, "Share sessions per broker."),
    Key(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        "Partitions of __share_group_state.",
    ),
    Key(
        "share.coordinator.state.topic.replication.factor",
        "short",
        1,
        "Replication factor of __share_group_state.",
    ),
    Key(
        "share.coordinator.state.topic.min.isr",
        "short",
        1,
        "min.insync.replicas of __share_group_state.",
    ),
    Key(
        "share.coordinator.write.timeout.ms",
        "int",
        5000,
        "How long a share state write waits for the in-sync replicas.",
    ),
    Key(
        "share.coordinator.state.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __share_group_state.",
    ),
    Section("Transactions and idempotent producers"),
    Key("transactional.id.expiration.ms", "int", 604800000, "Transactional id expiry."),
    Key("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state."),
    Key(
        "transaction.state.log.replication.factor",
        "short",
        1,
        "Replication factor of __transaction_state.",
    ),
    Key("transaction.state.log.min.isr", "int", 1, "min.insync.replicas of __transaction_state."),
    Key(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        "Segment size of __transaction_state.",
    ),
    Key("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms allowed."),
    Key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often transactions past their timeout are aborted.",
    ),
    Key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often expired transactional ids are removed.",
    ),
    Key(
        "transaction.version",
        "short",
        2,
        "The finalized level of the transaction.version feature (KIP-584), 0-2; 2 is "
        "transactions v2 (KIP-890 part 2: an epoch bump at every transaction end, "
        "partitions added by the produce itself). Kafka finalizes it with "
        "kafka-features.sh; in a cluster the /feature znode holds it and the first "
        "broker to start writes it from this key (broker/features.py).",
    ),
    Key("producer.id.expiration.ms", "int", 86400000, "Idle producer state expiry."),
    Key(
        "producer.id.expiration.check.interval.ms",
        "int",
        600000,
        "How often producers idle past producer.id.expiration.ms are forgotten.",
    ),
    Section("Cluster (ZooKeeper) and replication", "Without zookeeper.connect, a single node."),
    Key("zookeeper.connect", "string", None, "HOST:PORT[/chroot]: join a cluster."),
    Key("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout."),
    Key("zookeeper.connection.timeout.ms", "int", 18000, "ZooKeeper connect timeout."),
    Key("broker.rack", "string", None, "Rack of this broker (rack-aware assignment)."),
    Key("unclean.leader.election.enable", "bool", False, "Allow out-of-ISR leaders."),
    Key("replica.lag.time.max.ms", "long", 30000, "Follower lag before ISR removal."),
    Key("replica.fetch.wait.max.ms", "int", 500, "Follower fetch long-poll wait."),
    Key("replica.fetch.max.bytes", "int", 1048576, "Follower fetch bytes per partition."),
    Key("replica.fetch.response.max.bytes", "int", 10485760, "Follower fetch bytes."),
    Key("replica.socket.timeout.ms", "int", 30000, "Follower request timeout."),
    Key(
        "replication.quota.window.num",
        "int",
        11,
        "Samples the replication throttles measure their byte rate over "
        "(leader.replication.throttled.rate, follower.replication.throttled.rate).",
    ),
    Key(
        "replication.quota.window.size.seconds",
        "int",
        1,
        "Length of one replication throttle sample, in seconds.",
    ),
    Key("controlled.shutdown.enable", "bool", True, "Move leaders away on SIGTERM."),
    Key("controlled.shutdown.timeout.ms", "int", 15000, "Wait for leaders to move."),
    Key("auto.leader.rebalance.enable", "bool", True, "Give leaders back to preferred."),
    Key("leader.imbalance.check.interval.seconds", "long", 300, "Rebalance check period."),
    Key("leader.imbalance.per.broker.percentage", "int", 10, "Allowed imbalance."),
    Section(
        "Dynamic broker configs",
        "Password-type dynamic configs are stored encrypted with this secret "
        "(Kafka's PasswordEncoder); without it they are refused.",
    ),
    Key(
        "password.encoder.secret",
        "password",
        None,
        "Secret that encrypts dynamic password configs (the same on every broker).",
    ),
    Key(
        "password.encoder.old.secret",
        "password",
        None,
        "The previous secret: passwords it encrypted are re-encrypted with the new one at start.",
    ),
    Key(
        "password.encoder.keyfactory.algorithm",
        "string",
        None,
        "PBKDF2WithHmacSHA512 (unset), PBKDF2WithHmacSHA256 or PBKDF2WithHmacSHA1.",
    ),
    Key(
        "password.encoder.cipher.algorithm",
        "string",
        "AES/CBC/PKCS5Padding",
        "AES/CBC/PKCS5Padding or AES/GCM/NoPadding.",
    ),
    Key("password.encoder.key.length", "int", 128, "Key length in bits: 128, 192 or 256."),
    Key("password.encoder.iterations", "int", 4096, "PBKDF2 iterations."),
    Section("Metrics", "logflume's own: Kafka exports its metrics over JMX instead."),
    Key("metrics.listen", "string", None, "HOST:PORT of /metrics and /health; off when unset."),
]


def _sections(table: list[Key | Section]) -> list[tuple[Section, list[Key]]]:
    out: list[tuple[Section, list[Key]]] = []
    for item in table:
        if isinstance(item, Section):
            out.append((item, []))
        else:
            out[-1][1].append(item)
    return out


SECTIONS = _sections(_TABLE)
KEYS: dict[str, Key] = {k.name: k for _, keys in SECTIONS for k in keys}

# Topic config name -> the broker key whose value is its default.
TOPIC_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

# A synonym of TOPIC_SYNONYMS -> every broker key that gives it, the first set one
# winning (Kafka's order: the finer unit first).
SYNONYM_FAMILIES: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}

# The keys of a KRaft server.properties (Kafka 4 has no other mode) that have no
# meaning for this broker, which runs in ZooKeeper mode only, and what to do
# instead. Accepting them as unused would start a broker with broker.id 0 and no
# cluster, the opposite of what the file asks; every other controller.quorum.* key
# is refused like controller.quorum.voters.
KRAFT_KEYS: dict[str, str] = {
    "process.roles": "remove it (every node here is a broker; ZooKeeper elects the controller)",
    "node.id": "use broker.id instead",
    "controller.quorum.voters": "name the ZooKeeper ensemble in zookeeper.connect instead",
    "controller.quorum.bootstrap.servers": "name the ZooKeeper ensemble in zookeeper.connect "
    "instead",
    "controller.listener.names": "remove it, and the controller's listener from listeners and "
    "listener.security.protocol.map (the controller uses the inter-broker listener)",
}
KRAFT_PREFIX = "controller.quorum."


LISTENER_PREFIX = "listener.name."


def _listener_key(name: str) -> Key | None:
    """The key of a per-listener override we serve: `listener.name.<listener>.ssl.*`,
    `.sasl.enabled.mechanisms` and `.<mechanism>.sasl.jaas.config` (others are Kafka
    keys this broker does not use)."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    _, _, rest = name[len(LISTENER_PREFIX) :].partition(".")
    if rest.endswith(".sasl.jaas.config"):
        return KEYS["sasl.jaas.config"]
    key = KEYS.get(rest)
    return key if key is not None and rest.startswith(("ssl.", "sasl.enabled.")) else None


class ConfigError(ValueError):
    """A bad broker configuration; the message names the offending key."""


def parse_value(key: Key, raw: str) -> object:
    text = raw.strip()
    try:
        if key.type in ("int", "long", "short"):
            return int(text)
        if key.type == "double":
            return float(text)
        if key.type == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
    except ValueError:
        raise ConfigError(f"{key.name}: {raw!r} is not a valid {key.type}") from None
    return text


@cache
def kafka_broker_keys() -> frozenset[str]:
    """Every broker config key Kafka 3.9 defines (kafka_broker_keys.txt)."""
    text = (Path(__file__).parent / "kafka_broker_keys.txt").read_text()
    names = (line.strip() for line in text.splitlines())
    return frozenset(n for n in names if n and not n.startswith("#"))


def unknown_key_error(name: str) -> ConfigError:
    """The error for a key neither this broker nor Kafka knows, with the nearest
    known key as a suggestion when there is a close one."""
    near = difflib.get_close_matches(name, list(KEYS) + sorted(kafka_broker_keys()), n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return ConfigError(f"{name}: unknown broker config key{hint}")


def kraft_advice(name: str) -> str | None:
    """What to do instead of KRaft-only key `name`; None for any other key."""
    if name in KRAFT_KEYS:
        return KRAFT_KEYS[name]
    if name.startswith(KRAFT_PREFIX):
        return KRAFT_KEYS["controller.quorum.voters"]
    return None


def kraft_key_error(names: Iterable[str], where: str | None = None) -> ConfigError | None:
    """The error for the KRaft-only keys among `names` (read from file `where`, if
    given), naming the first with what to do instead, and the others; None when
    there are none."""
    found = [n for n in names if kraft_advice(n) is not None]
    if not found:
        return None
    first, *others = found
    place = f"{where}: " if where else ""
    also = f" (other KRaft keys: {', '.join(others)})" if others else ""
    return ConfigError(
        f"{place}{first}: this broker runs in ZooKeeper mode, not KRaft: "
        f"{kraft_advice(first)}{also}"
    )


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java properties file as Kafka reads it (`Properties.load`: ISO-8859-1 with
    `\\uXXXX` escapes)."""
    with open(path, "rb") as f:
        return javaproperties.load(f)


class BrokerConfig:
    """Resolved broker settings, safe to share: every holder reads the current value
    with `get`. Only dynamic broker configs change them, through `adopt`
    (broker/dynamic_config.py), on the event loop."""

    def __init__(self, values: Mapping[str, str] | None = None):
        self._explicit: dict[str, object] = {}
        self.static_values: dict[str, str] = dict(values or {})  # as given, unparsed
        # The dynamic layers in force (broker/dynamic_config.py), passwords in clear.
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}
        self.unused: list[str] = []  # Kafka keys set but not used by this broker
        refused = kraft_key_error(values or {})
        if refused is not None:
            raise refused
        for name, raw in (values or {}).items():
            key = KEYS.get(name) or _listener_key(name)
            if key is not None:
                self._explicit[name] = parse_value(key, raw)
            elif name in kafka_broker_keys() or name.startswith(LISTENER_PREFIX):
                self.unused.append(name)
            else:
                raise unknown_key_error(name)
        self.unused.sort()
        self._check()

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        overrides: Iterable[str] = (),
        data_dir: str | Path | None = None,
        listen: str | None = None,
        advertised: str | None = None,
    ) -> BrokerConfig:
        values: dict[str, str] = {}
        if config_file is not None:
            try:
                values.update(read_properties(config_file))
            except OSError as e:
                raise ConfigError(f"--config {config_file}: {e.strerror}") from None
            except javaproperties.InvalidUEscapeError as e:
                raise ConfigError(f"--config {config_file}: {e}") from None
            refused = kraft_key_error(values, str(config_file))
            if refused is not None:
                raise refused
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"--set {item!r}: expected key=value")
            values[name.strip()] = value
        if data_dir is not None:
            values["log.dirs"] = str(data_dir)
        if listen is not None:
            values["listeners"] = listen
        if advertised is not None:
            values["advertised.listeners"] = advertised
        return cls(values)

    def _check(self) -> None:
        dirs = self.get("log.dirs") or self.get("log.dir")
        if dirs is None:
            raise ConfigError("log.dirs: a data directory is required (--data-dir)")
        if "," in dirs:
            raise ConfigError("log.dirs: only one data directory is supported")
        try:
            self.listeners: ListenerSetup = resolve(
                self.get("listeners"),
                self.get("advertised.listeners"),
                self.get("listener.security.protocol.map"),
                self.get("inter.broker.listener.name"),
                self.get("security.inter.broker.protocol"),
            )
        except ListenerError as e:
            raise ConfigError(str(e)) from None
        for name in self._explicit:
            if name.startswith(LISTENER_PREFIX):
                listener = name[len(LISTENER_PREFIX) :].split(".", 1)[0]
                if listener.upper() not in {lst.name for lst in self.listeners.listeners}:
                    raise ConfigError(f"{name}: there is no listener named {listener.upper()}")
        self.sasl = {}
        for lst in self.listeners.listeners:
            if lst.sasl:
                try:
                    self.sasl[lst.name] = listener_sasl(self, lst.name)
                except ValueError as e:
                    raise ConfigError(str(e)) from None
        inter = self.listeners.by_name(self.listeners.inter_broker)
        if inter.sasl and self.get("zookeeper.connect") is not None:
            mechanism = self.get("sasl.mechanism.inter.broker.protocol").strip().upper()
            if mechanism not in self.sasl[inter.name].mechanisms:
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol: {mechanism} is not enabled on "
                    f"the inter-broker listener {inter.name}"
                )
            try:
                client_credentials(self, inter.name, mechanism)
            except ValueError as e:
                raise ConfigError(str(e)) from None
        metrics = self.get("metrics.listen")
        try:
            self.metrics_listen = parse_hostport(metrics, "metrics.listen") if metrics else None
        except ValueError as e:
            raise ConfigError(str(e)) from None
        positive = (
            "num.partitions",
            "default.replication.factor",
            "min.insync.replicas",
            "message.max.bytes",
            "socket.request.max.bytes",
            "max.request.partition.size.limit",
            "offsets.topic.num.partitions",
            "offsets.topic.replication.factor",
            "transaction.state.log.num.partitions",
            "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
            "transaction.max.timeout.ms",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "producer.id.expiration.ms",
            "producer.id.expiration.check.interval.ms",
            "log.retention.check.interval.ms",
            "log.cleaner.backoff.ms",
            "log.flush.offset.checkpoint.interval.ms",
            "log.flush.start.offset.checkpoint.interval.ms",
            "log.flush.scheduler.interval.ms",
            "quota.window.num",
            "quota.window.size.seconds",
            "replication.quota.window.num",
            "replication.quota.window.size.seconds",
            "group.consumer.session.timeout.ms",
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.max.size",
            "telemetry.max.bytes",
            "group.share.heartbeat.interval.ms",
            "group.share.session.timeout.ms",
            "group.share.record.lock.duration.ms",
            "group.share.partition.max.record.locks",
            "group.share.max.size",
            "group.share.max.share.sessions",
            "share.coordinator.state.topic.num.partitions",
            "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr",
            "share.coordinator.write.timeout.ms",
        )
        for name in positive:
            if self.get(name) <= 0:
                raise ConfigError(f"{name}: must be > 0, got {self.get(name)}")
        if self.get("broker.id") < 0:
            raise ConfigError("broker.id: must be >= 0")
        for feature in FEATURES:
            if feature.config_key is None:
                continue
            if not feature.min_level <= self.get(feature.config_key) <= feature.max_level:
                raise ConfigError(
                    f"{feature.config_key}: supported levels are "
                    f"{feature.min_level}-{feature.max_level}, got {self.get(feature.config_key)}"
                )
        if not 2 <= self.get("group.share.delivery.count.limit") <= 10:
            raise ConfigError(
                "group.share.delivery.count.limit: must be between 2 and 10 (Kafka's range), "
                f"got {self.get('group.share.delivery.count.limit')}"
            )
        try:
            check_settings(
                self.get("password.encoder.keyfactory.algorithm") or DEFAULT_KEY_FACTORY,
                self.get("password.encoder.cipher.algorithm"),
                self.get("password.encoder.key.length"),
            )
        except ValueError as e:
            raise ConfigError(f"password.encoder: {e}") from None
        if self.get("password.encoder.iterations") < 1024:
            raise ConfigError("password.encoder.iterations: must be >= 1024")
        if self.get("group.consumer.heartbeat.interval.ms") >= self.get(
            "group.consumer.session.timeout.ms"
        ):
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms must be less than "
                "group.consumer.session.timeout.ms"
            )
        policy = self.get("group.consumer.migration.policy")
        if str(policy).lower() not in MIGRATION_POLICIES:
            raise ConfigError(
                f"group.consumer.migration.policy: {policy!r} is not one of "
                + ", ".join(MIGRATION_POLICIES)
            )
        try:
            assignors_from_config(self.get("group.consumer.assignors").split(","))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self._check_topic_defaults()
        authorizer = self.get("authorizer.class.name")
        if authorizer and authorizer not in AUTHORIZER_CLASSES:
            raise ConfigError(
                f"authorizer.class.name: {authorizer!r} is not served; use one of "
                + ", ".join(sorted(AUTHORIZER_CLASSES))
            )

    def _check_topic_defaults(self) -> None:
        """A broker key that gives a topic default must hold a value the topic config
        takes (log.message.timestamp.type, log.message.format.version ...): the error
        names the broker key, before anything starts."""
        for topic_name, value in self.topic_defaults().items():
            if topic_name not in TOPIC_CONFIG_NAMES:
                continue
            try:
                LogConfig.from_props({topic_name: value})
            except ValueError as e:
                key = self.topic_default_source(topic_name) or TOPIC_SYNONYMS[topic_name]
                raise ConfigError(f"{key}: {str(e).partition(': ')[2]}") from None

    def adopt(
        self, merged: BrokerConfig, per_broker: Mapping[str, str], default: Mapping[str, str]
    ) -> None:
        """Take the values of `merged` (built from `static_values` with the dynamic
        layers `per_broker` and `default` over them, and so checked as at start). The
        listeners, SASL and metrics settings stay: none of them changes dynamically."""
        self._explicit = merged._explicit
        self.unused = merged.unused
        self.dynamic_broker = dict(per_broker)
        self.dynamic_default = dict(default)

    def get(self, name: str):
        if name in self._explicit:
            return self._explicit[name]
        return KEYS[name].default

    def is_explicit(self, name: str) -> bool:
        return name in self._explicit

    def __getitem__(self, name: str):
        return self.get(name)

    @property
    def data_dir(self) -> Path:
        return Path(self.get("log.dirs") or self.get("log.dir"))

    @property
    def broker_id(self) -> int:
        return self.get("broker.id")

    def for_listener(self, listener: str, name: str):
        """Key `name` as listener `listener` sees it: Kafka's per-listener override
        `listener.name.<lowercase listener>.<name>` if set, else the broker-wide value."""
        override = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
        if override in self._explicit:
            return self._explicit[override]
        return self.get(name)

    def ssl_settings(self, listener: str) -> dict[str, object]:
        """Every ssl.* key as listener `listener` sees it (for broker.server.tls).

        Kafka's exception (KIP-684): on a SASL_SSL listener `ssl.client.auth` is only its
        own `listener.name.<l>.ssl.client.auth`, default none. Its clients log in with
        SASL, so the broker-wide key, which asks the SSL listeners' clients for a
        certificate, must not refuse every SASL client that has none."""
        settings = {n: self.for_listener(listener, n) for n in KEYS if n.startswith("ssl.")}
        if self.listeners.by_name(listener).protocol == "SASL_SSL":
            own = f"{LISTENER_PREFIX}{listener.lower()}.ssl.client.auth"
            settings["ssl.client.auth"] = self._explicit.get(own, "none")
        return settings

    def client_auth_not_applied(self) -> list[str]:
        """The SASL_SSL listeners the broker-wide `ssl.client.auth` (set to other than
        none) does not apply to, having no `listener.name.<l>.ssl.client.auth` of their
        own: the broker warns of them, as Kafka does."""
        if str(self.get("ssl.client.auth")).strip().lower() == "none":
            return []
        return [
            lst.name
            for lst in self.listeners.listeners
            if lst.protocol == "SASL_SSL"
            and f"{LISTENER_PREFIX}{lst.name.lower()}.ssl.client.auth" not in self._explicit
        ]

    def retention_ms(self) -> int:
        if self.get("log.retention.ms") is not None:
            return self.get("log.retention.ms")
        if self.get("log.retention.minutes") is not None:
            return self.get("log.retention.minutes") * 60_000
        return self.get("log.retention.hours") * 3_600_000

    def roll_ms(self) -> int:
        if self.get("log.roll.ms") is not None:
            return self.get("log.roll.ms")
        return self.get("log.roll.hours") * 3_600_000

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level defaults as topic property strings (for LogConfig.from_props)."""
        out: dict[str, str] = {}
        for topic_name, broker_name in TOPIC_SYNONYMS.items():
            if topic_name == "retention.ms":
                value = self.retention_ms()
            elif topic_name == "segment.ms":
                value = self.roll_ms()
            elif topic_name == "segment.jitter.ms":
                jitter = self.get("log.roll.jitter.ms")
                value = (
                    jitter if jitter is not None else self.get("log.roll.jitter.hours") * 3_600_000
                )
            elif topic_name == "flush.ms":
                value = self.get("log.flush.interval.ms")
                value = value if value is not None else self.get("log.flush.scheduler.interval.ms")
            else:
                value = self.get(broker_name)
            out[topic_name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def topic_default_source(self, topic_name: str) -> str | None:
        """The broker key that set a topic default explicitly, or None if Kafka's default."""
        broker_name = TOPIC_SYNONYMS.get(topic_name)
        if broker_name is None:
            return None
        family = SYNONYM_FAMILIES.get(broker_name, (broker_name,))
        return next((n for n in family if self.is_explicit(n)), None)
