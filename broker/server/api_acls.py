"""What each served API asks the authorizer: Kafka's "Operations and Resources on
Protocols" table, as data.

`API_ACLS[api_key]` lists the checks a request of that API makes, in the order the
handler makes them. A `Check` is satisfied by any one of its (resource type,
operation) alternatives (WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster);
`when` says in words when the check is made, empty for every request. An API with
no row entry checks nothing (ApiVersions and the SASL exchange).

The handlers make the checks themselves (broker/server/handlers, through
broker.server.authz); this table is what they are held to: tests/broker/server/
test_authorization_table.py sends every served API to a broker as a principal
holding no ACLs, records each (resource type, operation) the handler asks, and
fails on one that is not in the API's row, on an API with a row that asked nothing,
and on a served API without a row (a refused request stops at its first failing
check, so later checks of a row are not each exercised there). COMPATIBILITY.md's table is `markdown()` of it.
"""

from __future__ import annotations

import dataclasses

from broker.protocol.api_keys import ApiKey
from broker.security.acl import Operation as Op
from broker.security.acl import ResourceType as RT


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    """One authorization check: allowed by any of `anyof`; made `when` (always if "")."""

    anyof: tuple[tuple[RT, Op], ...]
    when: str = ""


def _c(*pairs: tuple[RT, Op], when: str = "") -> Check:
    return Check(tuple(pairs), when)


_AUTO_CREATE = _c(
    (RT.CLUSTER, Op.CREATE),
    (RT.TOPIC, Op.CREATE),
    when="for a missing topic, with auto.create.topics.enable",
)

API_ACLS: dict[ApiKey, tuple[Check, ...]] = {
    ApiKey.PRODUCE: (
        _c((RT.TRANSACTIONAL_ID, Op.WRITE), when="for transactional batches"),
        _c((RT.TOPIC, Op.WRITE)),
        _AUTO_CREATE,
    ),
    ApiKey.FETCH: (
        _c((RT.CLUSTER, Op.CLUSTER_ACTION), when="for a follower, replica_id >= 0"),
        _c((RT.TOPIC, Op.READ), when="for a consumer"),
    ),
    ApiKey.LIST_OFFSETS: (_c((RT.TOPIC, Op.DESCRIBE)),),
    ApiKey.METADATA: (
        _c((RT.TOPIC, Op.DESCRIBE)),
        _AUTO_CREATE,
        _c(
            (RT.CLUSTER, Op.DESCRIBE),
            when="for v8-10 asking for the cluster's authorized operations",
        ),
    ),
    ApiKey.OFFSET_COMMIT: (_c((RT.GROUP, Op.READ)), _c((RT.TOPIC, Op.READ))),
    ApiKey.OFFSET_FETCH: (_c((RT.GROUP, Op.DESCRIBE)), _c((RT.TOPIC, Op.DESCRIBE))),
    ApiKey.FIND_COORDINATOR: (
        _c((RT.GROUP, Op.DESCRIBE), when="for key type 0, a group"),
        _c((RT.TRANSACTIONAL_ID, Op.DESCRIBE), when="for key type 1, a transaction"),
    ),
    ApiKey.JOIN_GROUP: (_c((RT.GROUP, Op.READ)),),
    ApiKey.HEARTBEAT: (_c((RT.GROUP, Op.READ)),),
    ApiKey.LEAVE_GROUP: (_c((RT.GROUP, Op.READ)),),
    ApiKey.SYNC_GROUP: (_c((RT.GROUP, Op.READ)),),
    ApiKey.DESCRIBE_GROUPS: (_c((RT.GROUP, Op.DESCRIBE)),),
    ApiKey.LIST_GROUPS: (
        _c((RT.CLUSTER, Op.DESCRIBE), when="to list every group"),
        _c((RT.GROUP, Op.DESCRIBE), when="else for each group listed"),
    ),
    ApiKey.SASL_HANDSHAKE: (),
    ApiKey.API_VERSIONS: (),
    ApiKey.SASL_AUTHENTICATE: (),
    ApiKey.CREATE_TOPICS: (
        _c((RT.CLUSTER, Op.CREATE), (RT.TOPIC, Op.CREATE)),
        _c((RT.TOPIC, Op.DESCRIBE_CONFIGS), when="for v5+ to answer the topic's configs"),
    ),
    ApiKey.DELETE_TOPICS: (
        _c((RT.TOPIC, Op.DESCRIBE), when="for a topic named by id"),
        _c((RT.TOPIC, Op.DELETE)),
    ),
    ApiKey.DELETE_RECORDS: (_c((RT.TOPIC, Op.DELETE)),),
    ApiKey.INIT_PRODUCER_ID: (
        _c((RT.TRANSACTIONAL_ID, Op.WRITE), when="with a transactional id"),
        _c(
            (RT.CLUSTER, Op.IDEMPOTENT_WRITE),
            (RT.TOPIC, Op.WRITE),
            when="without one, WRITE on some topic",
        ),
    ),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (_c((RT.CLUSTER, Op.CLUSTER_ACTION), (RT.TOPIC, Op.DESCRIBE)),),
    ApiKey.ADD_PARTITIONS_TO_TXN: (
        _c((RT.TRANSACTIONAL_ID, Op.WRITE), when="for v0-3, clients"),
        _c((RT.TOPIC, Op.WRITE), when="for v0-3, clients"),
        _c((RT.CLUSTER, Op.CLUSTER_ACTION), when="for v4+, brokers"),
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: (_c((RT.TRANSACTIONAL_ID, Op.WRITE)), _c((RT.GROUP, Op.READ))),
    ApiKey.END_TXN: (_c((RT.TRANSACTIONAL_ID, Op.WRITE)),),
    ApiKey.WRITE_TXN_MARKERS: (_c((RT.CLUSTER, Op.ALTER), (RT.CLUSTER, Op.CLUSTER_ACTION)),),
    ApiKey.TXN_OFFSET_COMMIT: (
        _c((RT.TRANSACTIONAL_ID, Op.WRITE)),
        _c((RT.GROUP, Op.READ)),
        _c((RT.TOPIC, Op.READ)),
    ),
    ApiKey.DESCRIBE_ACLS: (_c((RT.CLUSTER, Op.DESCRIBE)),),
    ApiKey.CREATE_ACLS: (_c((RT.CLUSTER, Op.ALTER)),),
    ApiKey.DELETE_ACLS: (_c((RT.CLUSTER, Op.ALTER)),),
    ApiKey.DESCRIBE_CONFIGS: (
        _c((RT.TOPIC, Op.DESCRIBE_CONFIGS), when="for a topic"),
        _c((RT.GROUP, Op.DESCRIBE_CONFIGS), when="for a group"),
        _c((RT.CLUSTER, Op.DESCRIBE_CONFIGS), when="for a broker or client-metrics subscription"),
    ),
    ApiKey.ALTER_CONFIGS: (
        _c((RT.TOPIC, Op.ALTER_CONFIGS), when="for a topic"),
        _c((RT.GROUP, Op.ALTER_CONFIGS), when="for a group"),
        _c((RT.CLUSTER, Op.ALTER_CONFIGS), when="for a broker or client-metrics subscription"),
    ),
    ApiKey.DESCRIBE_LOG_DIRS: (_c((RT.CLUSTER, Op.DESCRIBE)),),
    ApiKey.CREATE_PARTITIONS: (_c((RT.TOPIC, Op.ALTER)),),
    ApiKey.DELETE_GROUPS: (_c((RT.GROUP, Op.DELETE)),),
    ApiKey.ELECT_LEADERS: (_c((RT.CLUSTER, Op.ALTER)),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (_c((RT.CLUSTER, Op.ALTER)),),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (_c((RT.CLUSTER, Op.DESCRIBE)),),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        _c((RT.TOPIC, Op.ALTER_CONFIGS), when="for a topic"),
        _c((RT.GROUP, Op.ALTER_CONFIGS), when="for a group"),
        _c((RT.CLUSTER, Op.ALTER_CONFIGS), when="for a broker or client-metrics subscription"),
    ),
    ApiKey.OFFSET_DELETE: (_c((RT.GROUP, Op.DELETE)), _c((RT.TOPIC, Op.READ))),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (_c((RT.CLUSTER, Op.DESCRIBE_CONFIGS)),),
    ApiKey.ALTER_CLIENT_QUOTAS: (_c((RT.CLUSTER, Op.ALTER_CONFIGS)),),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (_c((RT.CLUSTER, Op.DESCRIBE)),),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (_c((RT.CLUSTER, Op.ALTER)),),
    ApiKey.DESCRIBE_CLUSTER: (
        _c((RT.CLUSTER, Op.DESCRIBE), when="asking for the cluster's authorized operations"),
    ),
    ApiKey.DESCRIBE_PRODUCERS: (_c((RT.TOPIC, Op.READ)),),
    ApiKey.DESCRIBE_TRANSACTIONS: (
        _c((RT.TRANSACTIONAL_ID, Op.DESCRIBE)),
        _c((RT.TOPIC, Op.DESCRIBE), when="for each topic of the transaction shown"),
    ),
    ApiKey.LIST_TRANSACTIONS: (_c((RT.TRANSACTIONAL_ID, Op.DESCRIBE), when="for each id listed"),),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (
        _c((RT.GROUP, Op.READ)),
        _c((RT.TOPIC, Op.DESCRIBE), when="for each subscribed topic name"),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (_c((RT.GROUP, Op.DESCRIBE)),),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (_c((RT.TOPIC, Op.DESCRIBE)),),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (),
    ApiKey.PUSH_TELEMETRY: (),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: (_c((RT.CLUSTER, Op.DESCRIBE_CONFIGS)),),
    ApiKey.SHARE_GROUP_HEARTBEAT: (_c((RT.GROUP, Op.READ)),),
    ApiKey.SHARE_GROUP_DESCRIBE: (_c((RT.GROUP, Op.DESCRIBE)),),
    ApiKey.SHARE_FETCH: (_c((RT.GROUP, Op.READ)), _c((RT.TOPIC, Op.READ))),
    ApiKey.SHARE_ACKNOWLEDGE: (_c((RT.GROUP, Op.READ)), _c((RT.TOPIC, Op.READ))),
    ApiKey.READ_SHARE_GROUP_STATE: (_c((RT.CLUSTER, Op.CLUSTER_ACTION)),),
    ApiKey.WRITE_SHARE_GROUP_STATE: (_c((RT.CLUSTER, Op.CLUSTER_ACTION)),),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (_c((RT.CLUSTER, Op.CLUSTER_ACTION)),),
    ApiKey.DELETE_SHARE_GROUP_STATE: (_c((RT.CLUSTER, Op.CLUSTER_ACTION)),),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (
        _c((RT.GROUP, Op.DESCRIBE)),
        _c((RT.TOPIC, Op.DESCRIBE), when="for each topic described"),
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (
        _c((RT.GROUP, Op.READ)),
        _c((RT.TOPIC, Op.READ), when="for each topic altered"),
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (
        _c((RT.GROUP, Op.DELETE)),
        _c((RT.TOPIC, Op.READ), when="for each topic deleted"),
    ),
}


def _words(check: Check) -> str:
    alternatives = " or ".join(f"{op.name} on {rt.name}" for rt, op in check.anyof)
    return f"{alternatives}, {check.when}" if check.when else alternatives


def markdown() -> str:
    """The table as COMPATIBILITY.md shows it: one row per API, by key."""
    lines = ["| API (key) | Checks, in order |", "|---|---|"]
    for key in sorted(API_ACLS):
        checks = "; ".join(_words(c) for c in API_ACLS[key]) or "none"
        lines.append(f"| {_camel(key)} ({int(key)}) | {checks} |")
    return "\n".join(lines) + "\n"


def _camel(key: ApiKey) -> str:
    """PRODUCE -> Produce, DESCRIBE_USER_SCRAM_CREDENTIALS -> DescribeUserScramCredentials."""
    return "".join(w.capitalize() for w in key.name.split("_"))
