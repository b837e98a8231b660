"""Every served API, sent by a principal holding no ACLs, to a broker with the
authorizer on and `allow.everyone.if.no.acl.found=false`: each answer is a refusal
(or an empty list), each check the broker makes is in broker/server/api_acls.py's
row for the API, and nothing is written: the topics, records, group offsets,
configs, ACLs, SCRAM users and transactions read back (as a super user, over the
wire) exactly as before.

The broker runs in this process so that the test can record what each request asks
its authorizer (on the broker's own loop; no request's answer depends on it).
"""

from __future__ import annotations

import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.registry import SCHEMAS
from broker.server import dispatch
from broker.server.api_acls import API_ACLS, markdown
from tests.broker.server.inprocess import InProcessBroker
from tests.broker.server.wire import MATCH_ALL_ACLS, WireClient, batch, fetch_body, produce_body

REFUSALS = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
TOPIC, GROUP, TXN = "t", "g", "tx"
SOME_TOPIC_ID = uuid.UUID(int=7)  # refused at the group before the topic is looked up
ANONYMOUS = "User:ANONYMOUS"


def _partition(topic: str, **extra) -> dict:
    return {"name": topic, "partitions": [{"partition_index": 0, **extra}]}


_BROKER_RESOURCE = {"resource_type": 4, "resource_name": "0"}
_TOPIC_RESOURCE = {"resource_type": 2, "resource_name": TOPIC}
_GROUP_RESOURCE = {"resource_type": 32, "resource_name": GROUP}
_TXN_MARKER = {
    "producer_id": 1,
    "producer_epoch": 0,
    "transaction_result": True,
    "topics": [{"name": TOPIC, "partition_indexes": [0]}],
    "coordinator_epoch": 0,
}

# (api key, version, body, what the answer must show: "refused" = some
# *_AUTHORIZATION_FAILED code; "empty" = no error and nothing listed; "none" = an
# API that checks nothing).
REQUESTS = [
    (ApiKey.PRODUCE, 9, produce_body(TOPIC, batch(b"forged")), "refused"),
    (ApiKey.PRODUCE, 9, produce_body("made-by-produce", batch(b"x")), "refused"),
    (ApiKey.FETCH, 12, fetch_body(TOPIC), "refused"),
    (ApiKey.FETCH, 12, fetch_body(TOPIC) | {"replica_id": 1}, "refused"),
    (
        ApiKey.LIST_OFFSETS,
        6,
        {"replica_id": -1, "topics": [_partition(TOPIC, timestamp=-1, current_leader_epoch=-1)]},
        "refused",
    ),
    (ApiKey.METADATA, 12, {"topics": None}, "empty"),
    (
        ApiKey.METADATA,
        10,
        {
            "topics": [{"name": "made-by-metadata", "topic_id": None}],
            "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        },
        "refused",
    ),
    (
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 99}]}
            ],
        },
        "refused",
    ),
    (ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": GROUP, "topics": None}]}, "refused"),
    (ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]}, "refused"),
    (ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [TXN]}, "refused"),
    (
        ApiKey.JOIN_GROUP,
        8,
        {
            "group_id": GROUP,
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        "refused",
    ),
    (ApiKey.HEARTBEAT, 4, {"group_id": GROUP, "generation_id": 1, "member_id": "m"}, "refused"),
    (ApiKey.LEAVE_GROUP, 5, {"group_id": GROUP, "members": [{"member_id": "m"}]}, "refused"),
    (
        ApiKey.SYNC_GROUP,
        5,
        {"group_id": GROUP, "generation_id": 1, "member_id": "m", "assignments": []},
        "refused",
    ),
    (
        ApiKey.DESCRIBE_GROUPS,
        5,
        {"groups": [GROUP], "include_authorized_operations": True},
        "refused",
    ),
    (ApiKey.LIST_GROUPS, 4, {"states_filter": []}, "empty"),
    (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, "none"),
    (ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}, "none"),
    (
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [{"name": "made-by-create", "num_partitions": 1, "replication_factor": 1}],
            "timeout_ms": 5000,
        },
        "refused",
    ),
    (
        ApiKey.DELETE_TOPICS,
        6,
        {"topics": [{"name": TOPIC, "topic_id": None}], "timeout_ms": 5000},
        "refused",
    ),
    (
        ApiKey.DELETE_RECORDS,
        2,
        {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": -1}]}]},
        "refused",
    ),
    (
        ApiKey.INIT_PRODUCER_ID,
        5,
        {"transactional_id": None, "transaction_timeout_ms": -1},
        "refused",
    ),
    (
        ApiKey.INIT_PRODUCER_ID,
        5,
        {"transactional_id": TXN, "transaction_timeout_ms": 60000},
        "refused",
    ),
    (
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        4,
        {
            "replica_id": -1,
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
        },
        "refused",
    ),
    (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": TXN,
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
        },
        "refused",
    ),
    (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        5,
        {
            "transactions": [
                {
                    "transactional_id": TXN,
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "verify_only": False,
                    "topics": [{"name": TOPIC, "partitions": [0]}],
                }
            ]
        },
        "refused",
    ),
    (
        ApiKey.ADD_OFFSETS_TO_TXN,
        4,
        {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0, "group_id": GROUP},
        "refused",
    ),
    (
        ApiKey.END_TXN,
        4,
        {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0, "committed": True},
        "refused",
    ),
    (ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [_TXN_MARKER]}, "refused"),
    (
        ApiKey.TXN_OFFSET_COMMIT,
        4,
        {
            "transactional_id": TXN,
            "group_id": GROUP,
            "producer_id": 1,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 7}]}
            ],
        },
        "refused",
    ),
    (ApiKey.DESCRIBE_ACLS, 3, MATCH_ALL_ACLS, "refused"),
    (
        ApiKey.CREATE_ACLS,
        3,
        {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "*",
                    "resource_pattern_type": 3,
                    "principal": ANONYMOUS,
                    "host": "*",
                    "operation": 2,
                    "permission_type": 3,
                }
            ]
        },
        "refused",
    ),
    (ApiKey.DELETE_ACLS, 3, {"filters": [MATCH_ALL_ACLS]}, "refused"),
    (
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {"resources": [_TOPIC_RESOURCE | {"configuration_keys": None}]},
        "refused",
    ),
    (
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {"resources": [_BROKER_RESOURCE | {"configuration_keys": None}]},
        "refused",
    ),
    (
        ApiKey.ALTER_CONFIGS,
        2,
        {
            "resources": [
                _TOPIC_RESOURCE | {"configs": [{"name": "retention.ms", "value": "1"}]},
                _BROKER_RESOURCE | {"configs": [{"name": "message.max.bytes", "value": "9"}]},
            ]
        },
        "refused",
    ),
    (ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}, "refused"),
    (ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0u\0p"}, "none"),
    (
        ApiKey.CREATE_PARTITIONS,
        3,
        {"topics": [{"name": TOPIC, "count": 2, "assignments": None}], "timeout_ms": 5000},
        "refused",
    ),
    (ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]}, "refused"),
    (
        ApiKey.ELECT_LEADERS,
        2,
        {"election_type": 1, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}]},
        "refused",
    ),
    (
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                _TOPIC_RESOURCE
                | {"configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}]}
            ]
        },
        "refused",
    ),
    (
        ApiKey.OFFSET_DELETE,
        0,
        {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]},
        "refused",
    ),
    (
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        {
            "timeout_ms": 1000,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [0]}]}],
        },
        "refused",
    ),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None}, "refused"),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False}, "refused"),
    (
        ApiKey.ALTER_CLIENT_QUOTAS,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": "eve"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
        "refused",
    ),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}, "refused"),
    (
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {
            "deletions": [],
            "upsertions": [
                {
                    "name": "eve",
                    "mechanism": 2,
                    "iterations": 4096,
                    "salt": b"s" * 16,
                    "salted_password": b"p" * 64,
                }
            ],
        },
        "refused",
    ),
    (ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True}, "answered"),
    (
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        {"topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        "refused",
    ),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]}, "refused"),
    (ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []}, "empty"),
    (
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": GROUP,
            "member_id": "m",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": [TOPIC],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
        "refused",
    ),
    (
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        0,
        {"group_ids": [GROUP], "include_authorized_operations": True},
        "refused",
    ),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": TOPIC}]}, "refused"),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": []}, "empty"),
    (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": uuid.UUID(int=0)}, "none"),
    (
        ApiKey.PUSH_TELEMETRY,
        0,
        {"client_instance_id": uuid.UUID(int=7), "subscription_id": 0, "metrics": b""},
        "none",
    ),
    (ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, {}, "refused"),
    (
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {"resources": [{"resource_type": 16, "resource_name": "s", "configuration_keys": None}]},
        "refused",
    ),
    (
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 16,
                    "resource_name": "s",
                    "configs": [{"name": "metrics", "config_operation": 0, "value": "*"}],
                }
            ]
        },
        "refused",
    ),
    (
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {"resources": [_GROUP_RESOURCE | {"configuration_keys": None}]},
        "refused",
    ),
    (
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                _GROUP_RESOURCE
                | {
                    "configs": [
                        {
                            "name": "share.auto.offset.reset",
                            "config_operation": 0,
                            "value": "earliest",
                        }
                    ]
                }
            ]
        },
        "refused",
    ),
    (
        ApiKey.ALTER_CONFIGS,
        2,
        {
            "resources": [
                _GROUP_RESOURCE
                | {"configs": [{"name": "share.auto.offset.reset", "value": "earliest"}]}
            ]
        },
        "refused",
    ),
    (
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        {"group_id": GROUP, "member_id": "m", "member_epoch": 0, "subscribed_topic_names": [TOPIC]},
        "refused",
    ),
    (
        ApiKey.SHARE_GROUP_DESCRIBE,
        1,
        {"group_ids": [GROUP], "include_authorized_operations": True},
        "refused",
    ),
    (
        ApiKey.SHARE_FETCH,
        1,
        {
            "group_id": GROUP,
            "member_id": "m",
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "max_records": 10,
            "batch_size": 10,
            "topics": [{"topic_id": SOME_TOPIC_ID, "partitions": [{"partition_index": 0}]}],
        },
        "refused",
    ),
    (
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        {"group_id": GROUP, "member_id": "m", "share_session_epoch": 1, "topics": []},
        "refused",
    ),
    (
        ApiKey.READ_SHARE_GROUP_STATE,
        0,
        {
            "group_id": GROUP,
            "topics": [
                {"topic_id": SOME_TOPIC_ID, "partitions": [{"partition": 0, "leader_epoch": 0}]}
            ],
        },
        "refused",
    ),
    (
        ApiKey.WRITE_SHARE_GROUP_STATE,
        0,
        {
            "group_id": GROUP,
            "topics": [
                {
                    "topic_id": SOME_TOPIC_ID,
                    "partitions": [
                        {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0}
                    ],
                }
            ],
        },
        "refused",
    ),
    (
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        0,
        {
            "group_id": GROUP,
            "topics": [
                {
                    "topic_id": SOME_TOPIC_ID,
                    "partitions": [{"partition": 0, "state_epoch": 1, "start_offset": 0}],
                }
            ],
        },
        "refused",
    ),
    (
        ApiKey.DELETE_SHARE_GROUP_STATE,
        0,
        {
            "group_id": GROUP,
            "topics": [{"topic_id": SOME_TOPIC_ID, "partitions": [{"partition": 0}]}],
        },
        "refused",
    ),
    (
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        0,
        {"groups": [{"group_id": GROUP, "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]},
        "refused",
    ),
    (
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        0,
        {
            "group_id": GROUP,
            "topics": [
                {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}
            ],
        },
        "refused",
    ),
    (
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        0,
        {"group_id": GROUP, "topics": [{"topic_name": TOPIC}]},
        "refused",
    ),
]


def _snapshot(client: WireClient) -> dict:
    """What a super user reads back: everything a refused request could have changed."""
    meta = client.request(ApiKey.METADATA, 12, {"topics": None})
    topics = sorted((t["name"], len(t["partitions"])) for t in meta["topics"])
    ends = {}
    for name, count in topics:
        for index in range(count):
            for ts in (-2, -1):  # log start and end
                body = {
                    "replica_id": -1,
                    "topics": [
                        {"name": name, "partitions": [{"partition_index": index, "timestamp": ts}]}
                    ],
                }
                answer = client.request(ApiKey.LIST_OFFSETS, 6, body)
                ends[(name, index, ts)] = answer["topics"][0]["partitions"][0]["offset"]
    offsets = client.request(
        ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": GROUP, "topics": None}]}
    )
    configs = client.request(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                _TOPIC_RESOURCE | {"configuration_keys": None},
                _GROUP_RESOURCE | {"configuration_keys": None},
            ]
        },
    )
    return {
        "topics": topics,
        "offsets": ends,
        "group": offsets["groups"],
        "configs": [
            sorted((c["name"], c["value"]) for c in result["configs"])
            for result in configs["results"]
        ],
        "acls": client.request(ApiKey.DESCRIBE_ACLS, 3, MATCH_ALL_ACLS)["resources"],
        "scram": client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})[
            "results"
        ],
        "quotas": client.request(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False}
        )["entries"],
        "groups": client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})["groups"],
        "transactions": client.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]}
        )["transaction_states"],
    }


def _seed(client: WireClient) -> None:
    """A topic with records, a group with a committed offset, a transactional id."""
    created = client.request(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
            "timeout_ms": 5000,
        },
    )
    assert created["topics"][0]["error_code"] == ErrorCode.NONE
    produced = client.request(ApiKey.PRODUCE, 9, produce_body(TOPIC, batch(b"a", b"b", b"c")))
    assert produced["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    found = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]})
    assert found["coordinators"][0]["error_code"] == ErrorCode.NONE
    commit = REQUESTS[7][2]
    committed = client.request(ApiKey.OFFSET_COMMIT, 8, commit | {"topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 2}]}
    ]})  # fmt: skip
    assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [TXN]})
    init = client.request(
        ApiKey.INIT_PRODUCER_ID, 5, {"transactional_id": TXN, "transaction_timeout_ms": 60000}
    )
    assert init["error_code"] == ErrorCode.NONE


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = InProcessBroker(
        tmp_path_factory.mktemp("authz") / "data",
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    yield b
    b.stop()


class _Recorder:
    """Wraps the authorizer's two decisions and keeps each (resource type, operation)."""

    def __init__(self, authorizer):
        self.calls: list[tuple] = []
        authorize, authorize_any = authorizer.authorize, authorizer.authorize_any

        def one(principal, host, op, rtype, name):
            self.calls.append((rtype, op))
            return authorize(principal, host, op, rtype, name)

        def some(principal, host, op, rtype):
            self.calls.append((rtype, op))
            return authorize_any(principal, host, op, rtype)

        authorizer.authorize, authorizer.authorize_any = one, some


def _super_user(broker, on: bool) -> None:
    users = frozenset({ANONYMOUS}) if on else frozenset()
    broker.on_loop(lambda: setattr(broker.core.authorizer, "super_users", users))


def _codes(value) -> list[int]:
    if isinstance(value, dict):
        return [
            c for k, v in value.items() for c in ([v] if k.endswith("error_code") else _codes(v))
        ]
    if isinstance(value, list):
        return [c for v in value for c in _codes(v)]
    return []


def test_every_served_api_has_a_row():
    dispatch.load_handlers()
    served = {k for k in ApiKey if dispatch.lookup(k) is not None}
    assert served == set(API_ACLS)
    assert {key for key, *_ in REQUESTS} == served  # and the walk below sends each


def test_compatibility_md_shows_the_table():
    from pathlib import Path

    text = (Path(__file__).parents[3] / "COMPATIBILITY.md").read_text()
    assert markdown() in text


def test_a_principal_without_acls_is_refused_everything_and_writes_nothing(broker):
    _super_user(broker, True)
    try:
        with WireClient(broker.port) as admin:
            _seed(admin)
            before = _snapshot(admin)
    finally:
        _super_user(broker, False)
    recorder = _Recorder(broker.core.authorizer)
    exercised = set()
    with WireClient(broker.port) as nobody:
        for key, version, body, expect in REQUESTS:
            assert version <= SCHEMAS[key].max_version
            recorder.calls.clear()
            answer = nobody.request(key, version, body)
            asked = set(recorder.calls)
            allowed_pairs = {pair for check in API_ACLS[key] for pair in check.anyof}
            assert asked <= allowed_pairs, (key, version, asked - allowed_pairs)
            exercised |= {(key, pair) for pair in asked}
            codes = set(_codes(answer))
            if expect == "refused":
                assert codes & REFUSALS, (key, version, answer)
            elif expect == "empty":
                assert codes <= {ErrorCode.NONE}, (key, answer)
                listed = answer.get(
                    "topics", answer.get("groups", answer.get("transaction_states"))
                )
                assert listed == [], (key, answer)
            elif expect == "answered":
                assert answer["cluster_authorized_operations"] == 0
            else:
                assert asked == set(), key
    for key, checks in API_ACLS.items():
        if checks:
            assert any(k == key for k, _ in exercised), f"{key.name} asked the authorizer nothing"
    _super_user(broker, True)
    try:
        with WireClient(broker.port) as admin:
            after = _snapshot(admin)
    finally:
        _super_user(broker, False)
    assert after == before


def test_an_unknown_coordinator_key_type_is_invalid_before_any_check(broker):
    recorder = _Recorder(broker.core.authorizer)
    with WireClient(broker.port) as nobody:
        answer = nobody.request(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": ["k"]}
        )
    assert answer["coordinators"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert recorder.calls == []


def test_an_idempotent_producer_is_let_in_by_the_no_acl_default(tmp_path):
    """With allow.everyone.if.no.acl.found, ACLs of someone else on the cluster and on
    some topics do not keep an idempotent producer out (Kafka's authorizeByResourceType asks about a
    topic no ACL covers first)."""
    from confluent_kafka import Producer

    from broker.security.acl import AclBinding, Entry, Permission, Resource
    from broker.security.acl import Operation as Op
    from broker.security.acl import ResourceType as RT

    b = InProcessBroker(
        tmp_path / "data",
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    try:
        bob = AclBinding(
            Resource(RT.TOPIC, "billing"), Entry("User:bob", "*", Op.WRITE, Permission.ALLOW)
        )
        admin = AclBinding(
            Resource(RT.CLUSTER, "kafka-cluster"),
            Entry("User:bob", "*", Op.ALTER, Permission.ALLOW),
        )  # an ACL on the cluster: IDEMPOTENT_WRITE on it is not let in by the default
        b.call(b.core.authorizer.create([bob, admin]))
        errors = []
        producer = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "enable.idempotence": True,
                "message.timeout.ms": 10000,
            }
        )
        producer.produce("web", b"x", on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(15) == 0
        assert errors == [None]
    finally:
        b.stop()
