"""Schemas of the consumer-group APIs.

OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup,
SyncGroup, DescribeGroups and ListGroups (the classic protocol), ConsumerGroupHeartbeat
and ConsumerGroupDescribe (the consumer protocol, KIP-848), declared from Kafka's
message JSON for versions 0 to the highest one the broker serves, flexible versions
included. OffsetCommit v9 is v8 on the wire (it may carry a member epoch); OffsetFetch
v9 adds the member id and epoch.
"""

from __future__ import annotations

from broker.protocol.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    Array,
    F,
    Struct,
)

OFFSET_COMMIT_REQUEST = [
    F("group_id", STRING),
    F("generation_id_or_member_epoch", INT32, "1+", default=-1),
    F("member_id", STRING, "1+"),
    F("group_instance_id", STRING, "7+", nullable="7+"),
    F("retention_time_ms", INT64, "2-4", default=-1),
    F(
        "topics",
        [
            F("name", STRING),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("committed_offset", INT64),
                    F("committed_leader_epoch", INT32, "6+", default=-1),
                    F("commit_timestamp", INT64, "1", default=-1),
                    F("committed_metadata", STRING, nullable="0+"),
                ],
            ),
        ],
    ),
]

OFFSET_COMMIT_RESPONSE = [
    F("throttle_time_ms", INT32, "3+"),
    F(
        "topics",
        [
            F("name", STRING),
            F("partitions", [F("partition_index", INT32), F("error_code", INT16)]),
        ],
    ),
]

# v2+: null topics means all topics the group has committed offsets for.
OFFSET_FETCH_REQUEST = [
    F("group_id", STRING, "0-7"),
    F(
        "topics",
        [F("name", STRING, "0-7"), F("partition_indexes", Array(INT32), "0-7")],
        "0-7",
        nullable="2-7",
    ),
    F(
        "groups",
        [
            F("group_id", STRING, "8+"),
            F("member_id", STRING, "9+", nullable="9+", default=None),
            F("member_epoch", INT32, "9+", default=-1),
            F(
                "topics",
                [F("name", STRING, "8+"), F("partition_indexes", Array(INT32), "8+")],
                "8+",
                nullable="8+",
            ),
        ],
        "8+",
    ),
    F("require_stable", BOOL, "7+"),
]


def _offset_fetch_partitions(versions: str) -> list:
    return [
        F("partition_index", INT32, versions),
        F("committed_offset", INT64, versions),
        F("committed_leader_epoch", INT32, "5+", default=-1),
        F("metadata", STRING, versions, nullable=versions),
        F("error_code", INT16, versions),
    ]


OFFSET_FETCH_RESPONSE = [
    F("throttle_time_ms", INT32, "3+"),
    F(
        "topics",
        [F("name", STRING, "0-7"), F("partitions", _offset_fetch_partitions("0-7"), "0-7")],
        "0-7",
    ),
    F("error_code", INT16, "2-7"),
    F(
        "groups",
        [
            F("group_id", STRING, "8+"),
            F(
                "topics",
                [F("name", STRING, "8+"), F("partitions", _offset_fetch_partitions("8+"), "8+")],
                "8+",
            ),
            F("error_code", INT16, "8+"),
        ],
        "8+",
    ),
]

FIND_COORDINATOR_REQUEST = [
    F("key", STRING, "0-3"),
    F("key_type", INT8, "1+"),
    F("coordinator_keys", Array(STRING), "4+"),
]

FIND_COORDINATOR_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "0-3"),
    F("error_message", STRING, "1-3", nullable="1-3"),
    F("node_id", INT32, "0-3"),
    F("host", STRING, "0-3"),
    F("port", INT32, "0-3"),
    F(
        "coordinators",
        [
            F("key", STRING, "4+"),
            F("node_id", INT32, "4+"),
            F("host", STRING, "4+"),
            F("port", INT32, "4+"),
            F("error_code", INT16, "4+"),
            F("error_message", STRING, "4+", nullable="4+"),
        ],
        "4+",
    ),
]

JOIN_GROUP_REQUEST = [
    F("group_id", STRING),
    F("session_timeout_ms", INT32),
    F("rebalance_timeout_ms", INT32, "1+", default=-1),
    F("member_id", STRING),
    F("group_instance_id", STRING, "5+", nullable="5+"),
    F("protocol_type", STRING),
    F("protocols", [F("name", STRING), F("metadata", BYTES)]),
    F("reason", STRING, "8+", nullable="8+"),
]

JOIN_GROUP_RESPONSE = [
    F("throttle_time_ms", INT32, "2+"),
    F("error_code", INT16),
    F("generation_id", INT32, default=-1),
    F("protocol_type", STRING, "7+", nullable="7+"),
    F("protocol_name", STRING, nullable="7+"),
    F("leader", STRING),
    F("member_id", STRING),
    F(
        "members",
        [
            F("member_id", STRING),
            F("group_instance_id", STRING, "5+", nullable="5+"),
            F("metadata", BYTES),
        ],
    ),
]

HEARTBEAT_REQUEST = [
    F("group_id", STRING),
    F("generation_id", INT32),
    F("member_id", STRING),
    F("group_instance_id", STRING, "3+", nullable="3+"),
]

HEARTBEAT_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
]

LEAVE_GROUP_REQUEST = [
    F("group_id", STRING),
    F("member_id", STRING, "0-2"),
    F(
        "members",
        [
            F("member_id", STRING),
            F("group_instance_id", STRING, nullable="3+"),
            F("reason", STRING, "5+", nullable="5+"),
        ],
        "3+",
    ),
]

LEAVE_GROUP_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F(
        "members",
        [
            F("member_id", STRING),
            F("group_instance_id", STRING, nullable="3+"),
            F("error_code", INT16),
        ],
        "3+",
    ),
]

SYNC_GROUP_REQUEST = [
    F("group_id", STRING),
    F("generation_id", INT32),
    F("member_id", STRING),
    F("group_instance_id", STRING, "3+", nullable="3+"),
    F("protocol_type", STRING, "5+", nullable="5+"),
    F("protocol_name", STRING, "5+", nullable="5+"),
    F("assignments", [F("member_id", STRING), F("assignment", BYTES)]),
]

SYNC_GROUP_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F("protocol_type", STRING, "5+", nullable="5+"),
    F("protocol_name", STRING, "5+", nullable="5+"),
    F("assignment", BYTES),
]

DESCRIBE_GROUPS_REQUEST = [
    F("groups", Array(STRING)),
    F("include_authorized_operations", BOOL, "3+"),
]

DESCRIBE_GROUPS_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F(
        "groups",
        [
            F("error_code", INT16),
            F("error_message", STRING, "6+", nullable="6+"),
            F("group_id", STRING),
            F("group_state", STRING),
            F("protocol_type", STRING),
            F("protocol_data", STRING),
            F(
                "members",
                [
                    F("member_id", STRING),
                    F("group_instance_id", STRING, "4+", nullable="4+"),
                    F("client_id", STRING),
                    F("client_host", STRING),
                    F("member_metadata", BYTES),
                    F("member_assignment", BYTES),
                ],
            ),
            F("authorized_operations", INT32, "3+", default=-(2**31)),
        ],
    ),
]

LIST_GROUPS_REQUEST = [
    F("states_filter", Array(STRING), "4+"),
    F("types_filter", Array(STRING), "5+"),
]

LIST_GROUPS_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F(
        "groups",
        [
            F("group_id", STRING),
            F("protocol_type", STRING),
            F("group_state", STRING, "4+"),
            F("group_type", STRING, "5+"),
        ],
    ),
]

DELETE_GROUPS_REQUEST = [F("groups_names", Array(STRING))]

DELETE_GROUPS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("results", [F("group_id", STRING), F("error_code", INT16)]),
]

OFFSET_DELETE_REQUEST = [
    F("group_id", STRING),
    F("topics", [F("name", STRING), F("partitions", [F("partition_index", INT32)])]),
]

OFFSET_DELETE_RESPONSE = [
    F("error_code", INT16),
    F("throttle_time_ms", INT32),
    F(
        "topics",
        [
            F("name", STRING),
            F("partitions", [F("partition_index", INT32), F("error_code", INT16)]),
        ],
    ),
]

_TOPIC_PARTITIONS = [F("topic_id", UUID), F("partitions", Array(INT32))]

CONSUMER_GROUP_HEARTBEAT_REQUEST = [
    F("group_id", STRING),
    F("member_id", STRING),
    F("member_epoch", INT32),
    F("instance_id", STRING, nullable="0+"),
    F("rack_id", STRING, nullable="0+"),
    F("rebalance_timeout_ms", INT32, default=-1),
    F("subscribed_topic_names", Array(STRING), nullable="0+"),
    F("subscribed_topic_regex", STRING, "1+", nullable="1+"),
    F("server_assignor", STRING, nullable="0+"),
    F("topic_partitions", _TOPIC_PARTITIONS, nullable="0+"),
]

CONSUMER_GROUP_HEARTBEAT_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F("member_id", STRING, nullable="0+"),
    F("member_epoch", INT32),
    F("heartbeat_interval_ms", INT32),
    F("assignment", Struct((F("topic_partitions", _TOPIC_PARTITIONS),)), nullable="0+"),
]

CONSUMER_GROUP_DESCRIBE_REQUEST = [
    F("group_ids", Array(STRING)),
    F("include_authorized_operations", BOOL),
]

_DESCRIBED_ASSIGNMENT = Struct(
    (
        F(
            "topic_partitions",
            [F("topic_id", UUID), F("topic_name", STRING), F("partitions", Array(INT32))],
        ),
    )
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "groups",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("group_id", STRING),
            F("group_state", STRING),
            F("group_epoch", INT32),
            F("assignment_epoch", INT32),
            F("assignor_name", STRING),
            F(
                "members",
                [
                    F("member_id", STRING),
                    F("instance_id", STRING, nullable="0+"),
                    F("rack_id", STRING, nullable="0+"),
                    F("member_epoch", INT32),
                    F("client_id", STRING),
                    F("client_host", STRING),
                    F("subscribed_topic_names", Array(STRING)),
                    F("subscribed_topic_regex", STRING, nullable="0+"),
                    F("assignment", _DESCRIBED_ASSIGNMENT),
                    F("target_assignment", _DESCRIBED_ASSIGNMENT),
                    F("member_type", INT8, "1+", default=-1),
                ],
            ),
            F("authorized_operations", INT32, default=-(2**31)),
        ],
    ),
]
