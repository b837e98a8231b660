"""Schemas of ApiVersions, topic admin, InitProducerId, DescribeConfigs, SASL and
DescribeTopicPartitions.

Declared from Kafka's message JSON, flexible versions (tagged fields) included.
"""

from __future__ import annotations

from broker.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
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

API_VERSIONS_REQUEST = [
    F("client_software_name", STRING, "3+"),
    F("client_software_version", STRING, "3+"),
]

# The broker has no feature flags: the tagged feature fields keep their defaults.
API_VERSIONS_RESPONSE = [
    F("error_code", INT16),
    F("api_keys", [F("api_key", INT16), F("min_version", INT16), F("max_version", INT16)]),
    F("throttle_time_ms", INT32, "1+"),
    F(
        "supported_features",
        [F("name", STRING, "3+"), F("min_version", INT16, "3+"), F("max_version", INT16, "3+")],
        "3+",
        tag=0,
    ),
    F("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
    F(
        "finalized_features",
        [
            F("name", STRING, "3+"),
            F("max_version_level", INT16, "3+"),
            F("min_version_level", INT16, "3+"),
        ],
        "3+",
        tag=2,
    ),
    F("zk_migration_ready", BOOL, "3+", tag=3),
]

CREATE_TOPICS_REQUEST = [
    F(
        "topics",
        [
            F("name", STRING),
            F("num_partitions", INT32),
            F("replication_factor", INT16),
            F("assignments", [F("partition_index", INT32), F("broker_ids", Array(INT32))]),
            F("configs", [F("name", STRING), F("value", STRING, nullable="0+")]),
        ],
    ),
    F("timeout_ms", INT32, default=60000),
    F("validate_only", BOOL, "1+"),
]

CREATE_TOPICS_RESPONSE = [
    F("throttle_time_ms", INT32, "2+"),
    F(
        "topics",
        [
            F("name", STRING),
            F("topic_id", UUID, "7+"),
            F("error_code", INT16),
            F("error_message", STRING, "1+", nullable="0+"),
            F("topic_config_error_code", INT16, "5+", tag=0),
            F("num_partitions", INT32, "5+", default=-1),
            F("replication_factor", INT16, "5+", default=-1),
            F(
                "configs",
                [
                    F("name", STRING, "5+"),
                    F("value", STRING, "5+", nullable="5+"),
                    F("read_only", BOOL, "5+"),
                    F("config_source", INT8, "5+", default=-1),
                    F("is_sensitive", BOOL, "5+"),
                ],
                "5+",
                nullable="5+",
            ),
        ],
    ),
]

DELETE_TOPICS_REQUEST = [
    F("topics", [F("name", STRING, "6+", nullable="6+"), F("topic_id", UUID, "6+")], "6+"),
    F("topic_names", Array(STRING), "0-5"),
    F("timeout_ms", INT32),
]

DELETE_TOPICS_RESPONSE = [
    F("throttle_time_ms", INT32, "1+"),
    F(
        "responses",
        [
            F("name", STRING, nullable="6+"),
            F("topic_id", UUID, "6+"),
            F("error_code", INT16),
            F("error_message", STRING, "5+", nullable="5+"),
        ],
    ),
]

INIT_PRODUCER_ID_REQUEST = [
    F("transactional_id", STRING, nullable="0+"),
    F("transaction_timeout_ms", INT32),
    F("producer_id", INT64, "3+", default=-1),
    F("producer_epoch", INT16, "3+", default=-1),
]

INIT_PRODUCER_ID_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("producer_id", INT64, default=-1),
    F("producer_epoch", INT16),
]

DESCRIBE_CONFIGS_REQUEST = [
    F(
        "resources",
        [
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configuration_keys", Array(STRING), nullable="0+"),
        ],
    ),
    F("include_synonyms", BOOL, "1+"),
    F("include_documentation", BOOL, "3+"),
]

DESCRIBE_CONFIGS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "results",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
            F(
                "configs",
                [
                    F("name", STRING),
                    F("value", STRING, nullable="0+"),
                    F("read_only", BOOL),
                    F("is_default", BOOL, "0"),
                    F("config_source", INT8, "1+", default=-1),
                    F("is_sensitive", BOOL),
                    F(
                        "synonyms",
                        [
                            F("name", STRING),
                            F("value", STRING, nullable="0+"),
                            F("source", INT8),
                        ],
                        "1+",
                    ),
                    F("config_type", INT8, "3+"),
                    F("documentation", STRING, "3+", nullable="0+"),
                ],
            ),
        ],
    ),
]

SASL_HANDSHAKE_REQUEST = [F("mechanism", STRING)]

SASL_HANDSHAKE_RESPONSE = [F("error_code", INT16), F("mechanisms", Array(STRING))]

SASL_AUTHENTICATE_REQUEST = [F("auth_bytes", BYTES)]

SASL_AUTHENTICATE_RESPONSE = [
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F("auth_bytes", BYTES),
    F("session_lifetime_ms", INT64, "1+"),
]

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = [
    F("users", [F("name", STRING)], nullable="0+"),
]

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F(
        "results",
        [
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("credential_infos", [F("mechanism", INT8), F("iterations", INT32)]),
        ],
    ),
]

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = [
    F("deletions", [F("name", STRING), F("mechanism", INT8)]),
    F(
        "upsertions",
        [
            F("name", STRING),
            F("mechanism", INT8),
            F("iterations", INT32),
            F("salt", BYTES),
            F("salted_password", BYTES),
        ],
    ),
]

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "results",
        [F("user", STRING), F("error_code", INT16), F("error_message", STRING, nullable="0+")],
    ),
]

# KIP-546: an entity is a list of (type, name) components; a null name is the
# type's default entity.
_QUOTA_ENTITY = [F("entity_type", STRING), F("entity_name", STRING, nullable="0+")]

DESCRIBE_CLIENT_QUOTAS_REQUEST = [
    F(
        "components",
        [F("entity_type", STRING), F("match_type", INT8), F("match", STRING, nullable="0+")],
    ),
    F("strict", BOOL),
]

DESCRIBE_CLIENT_QUOTAS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F(
        "entries",
        [F("entity", _QUOTA_ENTITY), F("values", [F("key", STRING), F("value", FLOAT64)])],
        nullable="0+",
    ),
]

ALTER_CLIENT_QUOTAS_REQUEST = [
    F(
        "entries",
        [
            F("entity", _QUOTA_ENTITY),
            F("ops", [F("key", STRING), F("value", FLOAT64), F("remove", BOOL)]),
        ],
    ),
    F("validate_only", BOOL),
]

ALTER_CLIENT_QUOTAS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "entries",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("entity", _QUOTA_ENTITY),
        ],
    ),
]

_ALTER_CONFIGS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "responses",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
        ],
    ),
]

ALTER_CONFIGS_REQUEST = [
    F(
        "resources",
        [
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", [F("name", STRING), F("value", STRING, nullable="0+")]),
        ],
    ),
    F("validate_only", BOOL),
]

ALTER_CONFIGS_RESPONSE = _ALTER_CONFIGS_RESPONSE

INCREMENTAL_ALTER_CONFIGS_REQUEST = [
    F(
        "resources",
        [
            F("resource_type", INT8),
            F("resource_name", STRING),
            F(
                "configs",
                [
                    F("name", STRING),
                    F("config_operation", INT8),
                    F("value", STRING, nullable="0+"),
                ],
            ),
        ],
    ),
    F("validate_only", BOOL),
]

INCREMENTAL_ALTER_CONFIGS_RESPONSE = _ALTER_CONFIGS_RESPONSE

CREATE_PARTITIONS_REQUEST = [
    F(
        "topics",
        [
            F("name", STRING),
            F("count", INT32),
            F("assignments", [F("broker_ids", Array(INT32))], nullable="0+"),
        ],
    ),
    F("timeout_ms", INT32),
    F("validate_only", BOOL),
]

CREATE_PARTITIONS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "results",
        [F("name", STRING), F("error_code", INT16), F("error_message", STRING, nullable="0+")],
    ),
]

DELETE_RECORDS_REQUEST = [
    F(
        "topics",
        [F("name", STRING), F("partitions", [F("partition_index", INT32), F("offset", INT64)])],
    ),
    F("timeout_ms", INT32),
]

DELETE_RECORDS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "topics",
        [
            F("name", STRING),
            F(
                "partitions",
                [F("partition_index", INT32), F("low_watermark", INT64), F("error_code", INT16)],
            ),
        ],
    ),
]

DESCRIBE_CLUSTER_REQUEST = [
    F("include_cluster_authorized_operations", BOOL),
    F("endpoint_type", INT8, "1+", default=1),
]

DESCRIBE_CLUSTER_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F("endpoint_type", INT8, "1+", default=1),
    F("cluster_id", STRING),
    F("controller_id", INT32, default=-1),
    F(
        "brokers",
        [
            F("broker_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, nullable="0+"),
        ],
    ),
    F("cluster_authorized_operations", INT32, default=-(2**31)),
]

DESCRIBE_LOG_DIRS_REQUEST = [
    F("topics", [F("topic", STRING), F("partitions", Array(INT32))], nullable="0+"),
]

DESCRIBE_LOG_DIRS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16, "3+"),
    F(
        "results",
        [
            F("error_code", INT16),
            F("log_dir", STRING),
            F(
                "topics",
                [
                    F("name", STRING),
                    F(
                        "partitions",
                        [
                            F("partition_index", INT32),
                            F("partition_size", INT64),
                            F("offset_lag", INT64),
                            F("is_future_key", BOOL),
                        ],
                    ),
                ],
            ),
            F("total_bytes", INT64, "4+", default=-1),
            F("usable_bytes", INT64, "4+", default=-1),
        ],
    ),
]

# KIP-455 (flexible from v0). Null replicas cancel a partition's move.
ALTER_PARTITION_REASSIGNMENTS_REQUEST = [
    F("timeout_ms", INT32, default=60000),
    F(
        "topics",
        [
            F("name", STRING),
            F(
                "partitions",
                [F("partition_index", INT32), F("replicas", Array(INT32), nullable="0+")],
            ),
        ],
    ),
]

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F(
        "responses",
        [
            F("name", STRING),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+"),
                ],
            ),
        ],
    ),
]

LIST_PARTITION_REASSIGNMENTS_REQUEST = [
    F("timeout_ms", INT32, default=60000),
    F("topics", [F("name", STRING), F("partition_indexes", Array(INT32))], nullable="0+"),
]

LIST_PARTITION_REASSIGNMENTS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F(
        "topics",
        [
            F("name", STRING),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("replicas", Array(INT32)),
                    F("adding_replicas", Array(INT32)),
                    F("removing_replicas", Array(INT32)),
                ],
            ),
        ],
    ),
]

ELECT_LEADERS_REQUEST = [
    F("election_type", INT8, "1+"),
    F("topic_partitions", [F("topic", STRING), F("partitions", Array(INT32))], nullable="0+"),
    F("timeout_ms", INT32, default=60000),
]

ELECT_LEADERS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16, "1+"),
    F(
        "replica_election_results",
        [
            F("topic", STRING),
            F(
                "partition_result",
                [
                    F("partition_id", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+"),
                ],
            ),
        ],
    ),
]

# KIP-966: Metadata's partitions, paged. The cursor is where a walk starts (request)
# or goes on (response); null: from the first topic, or nothing left.
_CURSOR = Struct((F("topic_name", STRING), F("partition_index", INT32)))

DESCRIBE_TOPIC_PARTITIONS_REQUEST = [
    F("topics", [F("name", STRING)]),
    F("response_partition_limit", INT32, default=2000),
    F("cursor", _CURSOR, nullable="0+"),
]

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "topics",
        [
            F("error_code", INT16),
            F("name", STRING, nullable="0+"),
            F("topic_id", UUID),
            F("is_internal", BOOL),
            F(
                "partitions",
                [
                    F("error_code", INT16),
                    F("partition_index", INT32),
                    F("leader_id", INT32),
                    F("leader_epoch", INT32, default=-1),
                    F("replica_nodes", Array(INT32)),
                    F("isr_nodes", Array(INT32)),
                    F("eligible_leader_replicas", Array(INT32), nullable="0+"),
                    F("last_known_elr", Array(INT32), nullable="0+"),
                    F("offline_replicas", Array(INT32)),
                ],
            ),
            F("topic_authorized_operations", INT32, default=-(2**31)),
        ],
    ),
    F("next_cursor", _CURSOR, nullable="0+"),
]
