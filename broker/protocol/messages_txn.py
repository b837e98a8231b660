"""Schemas of the transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions and ListTransactions,
declared from Kafka's message JSON, up to the versions of transactions v2 (KIP-890
part 2: EndTxn v5 answers the producer id and epoch bumped at every transaction end;
TxnOffsetCommit v5 adds the group's offsets partition to the transaction itself).

AddPartitionsToTxn v4+ is the brokers' batched form (several transactional ids,
`verify_only` for KIP-890's produce-time check); v0-3 is the clients' one-id form.
"""

from __future__ import annotations

from broker.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Array, F


def _txn_topics(versions: str = "0+") -> list:
    return [F("name", STRING, versions), F("partitions", Array(INT32), versions)]


def _topic_results() -> list:
    return [
        F("name", STRING),
        F("results_by_partition", [F("partition_index", INT32), F("partition_error_code", INT16)]),
    ]


ADD_PARTITIONS_TO_TXN_REQUEST = [
    F(
        "transactions",
        [
            F("transactional_id", STRING, "4+"),
            F("producer_id", INT64, "4+"),
            F("producer_epoch", INT16, "4+"),
            F("verify_only", BOOL, "4+"),
            F("topics", _txn_topics("4+"), "4+"),
        ],
        "4+",
    ),
    F("v3_and_below_transactional_id", STRING, "0-3"),
    F("v3_and_below_producer_id", INT64, "0-3"),
    F("v3_and_below_producer_epoch", INT16, "0-3"),
    F("v3_and_below_topics", _txn_topics(), "0-3"),
]

ADD_PARTITIONS_TO_TXN_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16, "4+"),
    F(
        "results_by_transaction",
        [F("transactional_id", STRING, "4+"), F("topic_results", _topic_results(), "4+")],
        "4+",
    ),
    F("results_by_topic_v3_and_below", _topic_results(), "0-3"),
]

ADD_OFFSETS_TO_TXN_REQUEST = [
    F("transactional_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
    F("group_id", STRING),
]

ADD_OFFSETS_TO_TXN_RESPONSE = [F("throttle_time_ms", INT32), F("error_code", INT16)]

END_TXN_REQUEST = [
    F("transactional_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
    F("committed", BOOL),
]

END_TXN_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("producer_id", INT64, "5+", default=-1),
    F("producer_epoch", INT16, "5+", default=-1),
]

WRITE_TXN_MARKERS_REQUEST = [
    F(
        "markers",
        [
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("transaction_result", BOOL),
            F("topics", [F("name", STRING), F("partition_indexes", Array(INT32))]),
            F("coordinator_epoch", INT32),
        ],
    ),
]

WRITE_TXN_MARKERS_RESPONSE = [
    F(
        "markers",
        [
            F("producer_id", INT64),
            F(
                "topics",
                [
                    F("name", STRING),
                    F("partitions", [F("partition_index", INT32), F("error_code", INT16)]),
                ],
            ),
        ],
    ),
]

TXN_OFFSET_COMMIT_REQUEST = [
    F("transactional_id", STRING),
    F("group_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
    F("generation_id", INT32, "3+", default=-1),
    F("member_id", STRING, "3+", default=""),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    F(
        "topics",
        [
            F("name", STRING),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("committed_offset", INT64),
                    F("committed_leader_epoch", INT32, "2+", default=-1),
                    F("committed_metadata", STRING, nullable="0+"),
                ],
            ),
        ],
    ),
]

TXN_OFFSET_COMMIT_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "topics",
        [F("name", STRING), F("partitions", [F("partition_index", INT32), F("error_code", INT16)])],
    ),
]

DESCRIBE_TRANSACTIONS_REQUEST = [F("transactional_ids", Array(STRING))]

DESCRIBE_TRANSACTIONS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "transaction_states",
        [
            F("error_code", INT16),
            F("transactional_id", STRING),
            F("transaction_state", STRING),
            F("transaction_timeout_ms", INT32),
            F("transaction_start_time_ms", INT64),
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("topics", [F("topic", STRING), F("partitions", Array(INT32))]),
        ],
    ),
]

LIST_TRANSACTIONS_REQUEST = [
    F("state_filters", Array(STRING)),
    F("producer_id_filters", Array(INT64)),
    F("duration_filter", INT64, "1+", default=-1),
]

LIST_TRANSACTIONS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("unknown_state_filters", Array(STRING)),
    F(
        "transaction_states",
        [F("transactional_id", STRING), F("producer_id", INT64), F("transaction_state", STRING)],
    ),
]

DESCRIBE_PRODUCERS_REQUEST = [
    F("topics", [F("name", STRING), F("partition_indexes", Array(INT32))]),
]

DESCRIBE_PRODUCERS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "topics",
        [
            F("name", STRING),
            F(
                "partitions",
                [
                    F("partition_index", INT32),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+"),
                    F(
                        "active_producers",
                        [
                            F("producer_id", INT64),
                            F("producer_epoch", INT32),
                            F("last_sequence", INT32, default=-1),
                            F("last_timestamp", INT64, default=-1),
                            F("coordinator_epoch", INT32),
                            F("current_txn_start_offset", INT64, default=-1),
                        ],
                    ),
                ],
            ),
        ],
    ),
]
