"""Schemas of the share-group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch and ShareAcknowledge, declared from Kafka 4.2's message JSON; the share
coordinator's RPCs (Read/Write/Initialize/DeleteShareGroupState) and the offsets
admin APIs (Describe/Alter/DeleteShareGroupOffsets), version 0 as Kafka 4.1 has them.

Version 0 was Kafka 4.0's early access and is gone from Kafka since 4.1; the broker
serves version 1 of each (what librdkafka 2.16 and Kafka's 4.1+ clients send), so
the v0-only fields below are declared for the comparison with Kafka's JSON only.
"""

from __future__ import annotations

from broker.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Array,
    F,
    Struct,
)

SHARE_GROUP_HEARTBEAT_REQUEST = [
    F("group_id", STRING),
    F("member_id", STRING),
    F("member_epoch", INT32),
    F("rack_id", STRING, nullable="0+", default=None),
    F("subscribed_topic_names", Array(STRING), nullable="0+", default=None),
]

SHARE_GROUP_HEARTBEAT_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("member_id", STRING, nullable="0+", default=None),
    F("member_epoch", INT32),
    F("heartbeat_interval_ms", INT32),
    F(
        "assignment",
        Struct((F("topic_partitions", [F("topic_id", UUID), F("partitions", Array(INT32))]),)),
        nullable="0+",
        default=None,
    ),
]

SHARE_GROUP_DESCRIBE_REQUEST = [
    F("group_ids", Array(STRING)),
    F("include_authorized_operations", BOOL),
]

SHARE_GROUP_DESCRIBE_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "groups",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("group_id", STRING),
            F("group_state", STRING),
            F("group_epoch", INT32),
            F("assignment_epoch", INT32),
            F("assignor_name", STRING),
            F(
                "members",
                [
                    F("member_id", STRING),
                    F("rack_id", STRING, nullable="0+", default=None),
                    F("member_epoch", INT32),
                    F("client_id", STRING),
                    F("client_host", STRING),
                    F("subscribed_topic_names", Array(STRING)),
                    F(
                        "assignment",
                        Struct(
                            (
                                F(
                                    "topic_partitions",
                                    [
                                        F("topic_id", UUID),
                                        F("topic_name", STRING),
                                        F("partitions", Array(INT32)),
                                    ],
                                ),
                            )
                        ),
                    ),
                ],
            ),
            F("authorized_operations", INT32, default=-(2**31)),
        ],
    ),
]


def _ack_batches() -> F:
    return F(
        "acknowledgement_batches",
        [
            F("first_offset", INT64),
            F("last_offset", INT64),
            F("acknowledge_types", Array(INT8)),
        ],
    )


_LEADER = Struct((F("leader_id", INT32), F("leader_epoch", INT32)))

_NODE_ENDPOINTS = F(
    "node_endpoints",
    [
        F("node_id", INT32),
        F("host", STRING),
        F("port", INT32),
        F("rack", STRING, nullable="0+", default=None),
    ],
)

SHARE_FETCH_REQUEST = [
    F("group_id", STRING, nullable="0+", default=None),
    F("member_id", STRING, nullable="0+"),
    F("share_session_epoch", INT32),
    F("max_wait_ms", INT32),
    F("min_bytes", INT32),
    F("max_bytes", INT32, default=0x7FFFFFFF),
    F("max_records", INT32, "1+"),
    F("batch_size", INT32, "1+"),
    F(
        "topics",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("partition_max_bytes", INT32, "0"),
                    _ack_batches(),
                ],
            ),
        ],
    ),
    F("forgotten_topics_data", [F("topic_id", UUID), F("partitions", Array(INT32))]),
]

SHARE_FETCH_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("acquisition_lock_timeout_ms", INT32, "1+"),
    F(
        "responses",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                    F("acknowledge_error_code", INT16),
                    F("acknowledge_error_message", STRING, nullable="0+", default=None),
                    F("current_leader", _LEADER),
                    F("records", RECORDS, nullable="0"),
                    F(
                        "acquired_records",
                        [
                            F("first_offset", INT64),
                            F("last_offset", INT64),
                            F("delivery_count", INT16),
                        ],
                    ),
                ],
            ),
        ],
    ),
    _NODE_ENDPOINTS,
]

SHARE_ACKNOWLEDGE_REQUEST = [
    F("group_id", STRING, nullable="0+", default=None),
    F("member_id", STRING, nullable="0+"),
    F("share_session_epoch", INT32),
    F(
        "topics",
        [F("topic_id", UUID), F("partitions", [F("partition_index", INT32), _ack_batches()])],
    ),
]

SHARE_ACKNOWLEDGE_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F(
        "responses",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                    F("current_leader", _LEADER),
                ],
            ),
        ],
    ),
    _NODE_ENDPOINTS,
]

# The share coordinator's RPCs (broker to broker): a share-partition's leader reads and
# writes its durable state (broker/share/state_store.py).

_STATE_BATCHES = F(
    "state_batches",
    [
        F("first_offset", INT64),
        F("last_offset", INT64),
        F("delivery_state", INT8),
        F("delivery_count", INT16),
    ],
)

READ_SHARE_GROUP_STATE_REQUEST = [
    F("group_id", STRING),
    F(
        "topics",
        [F("topic_id", UUID), F("partitions", [F("partition", INT32), F("leader_epoch", INT32)])],
    ),
]

READ_SHARE_GROUP_STATE_RESPONSE = [
    F(
        "results",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                    F("state_epoch", INT32),
                    F("start_offset", INT64),
                    _STATE_BATCHES,
                ],
            ),
        ],
    ),
]

WRITE_SHARE_GROUP_STATE_REQUEST = [
    F("group_id", STRING),
    F(
        "topics",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition", INT32),
                    F("state_epoch", INT32),
                    F("leader_epoch", INT32),
                    F("start_offset", INT64),
                    _STATE_BATCHES,
                ],
            ),
        ],
    ),
]

WRITE_SHARE_GROUP_STATE_RESPONSE = [
    F(
        "results",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                ],
            ),
        ],
    ),
]

_PARTITION_RESULTS = F(
    "partitions",
    [
        F("partition", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
    ],
)

INITIALIZE_SHARE_GROUP_STATE_REQUEST = [
    F("group_id", STRING),
    F(
        "topics",
        [
            F("topic_id", UUID),
            F(
                "partitions",
                [F("partition", INT32), F("state_epoch", INT32), F("start_offset", INT64)],
            ),
        ],
    ),
]

INITIALIZE_SHARE_GROUP_STATE_RESPONSE = [F("results", [F("topic_id", UUID), _PARTITION_RESULTS])]

DELETE_SHARE_GROUP_STATE_REQUEST = [
    F("group_id", STRING),
    F("topics", [F("topic_id", UUID), F("partitions", [F("partition", INT32)])]),
]

DELETE_SHARE_GROUP_STATE_RESPONSE = [F("results", [F("topic_id", UUID), _PARTITION_RESULTS])]

# The share-group admin APIs (clients to the group's coordinator): the share-partition
# start offsets of a group, read, set (an empty group), deleted (an empty group).

DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST = [
    F(
        "groups",
        [
            F("group_id", STRING),
            F(
                "topics",
                [F("topic_name", STRING), F("partitions", Array(INT32))],
                nullable="0+",
            ),
        ],
    ),
]

DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "groups",
        [
            F("group_id", STRING),
            F(
                "topics",
                [
                    F("topic_name", STRING),
                    F("topic_id", UUID),
                    F(
                        "partitions",
                        [
                            F("partition_index", INT32),
                            F("start_offset", INT64),
                            F("leader_epoch", INT32),
                            F("error_code", INT16),
                            F("error_message", STRING, nullable="0+", default=None),
                        ],
                    ),
                ],
            ),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ],
    ),
]

ALTER_SHARE_GROUP_OFFSETS_REQUEST = [
    F("group_id", STRING),
    F(
        "topics",
        [
            F("topic_name", STRING),
            F("partitions", [F("partition_index", INT32), F("start_offset", INT64)]),
        ],
    ),
]

ALTER_SHARE_GROUP_OFFSETS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F(
        "responses",
        [
            F("topic_name", STRING),
            F("topic_id", UUID),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                ],
            ),
        ],
    ),
]

DELETE_SHARE_GROUP_OFFSETS_REQUEST = [
    F("group_id", STRING),
    F("topics", [F("topic_name", STRING)]),
]

DELETE_SHARE_GROUP_OFFSETS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F(
        "responses",
        [
            F("topic_name", STRING),
            F("topic_id", UUID),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ],
    ),
]
