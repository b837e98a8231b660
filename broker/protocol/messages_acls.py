"""Schemas of DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-3 (flexible
from v2), declared from Kafka's message JSON. v0 has no pattern type: it means
LITERAL (3), the declared default."""

from __future__ import annotations

from broker.protocol.schema import INT8, INT16, INT32, STRING, F

LITERAL = 3


def _filter() -> list:
    return [
        F("resource_type_filter", INT8),
        F("resource_name_filter", STRING, nullable="0+"),
        F("pattern_type_filter", INT8, "1+", default=LITERAL),
        F("principal_filter", STRING, nullable="0+"),
        F("host_filter", STRING, nullable="0+"),
        F("operation", INT8),
        F("permission_type", INT8),
    ]


DESCRIBE_ACLS_REQUEST = _filter()

DESCRIBE_ACLS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F(
        "resources",
        [
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("pattern_type", INT8, "1+", default=LITERAL),
            F(
                "acls",
                [
                    F("principal", STRING),
                    F("host", STRING),
                    F("operation", INT8),
                    F("permission_type", INT8),
                ],
            ),
        ],
    ),
]

CREATE_ACLS_REQUEST = [
    F(
        "creations",
        [
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("resource_pattern_type", INT8, "1+", default=LITERAL),
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        ],
    ),
]

CREATE_ACLS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("results", [F("error_code", INT16), F("error_message", STRING, nullable="0+")]),
]

DELETE_ACLS_REQUEST = [F("filters", _filter())]

DELETE_ACLS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F(
        "filter_results",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F(
                "matching_acls",
                [
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+"),
                    F("resource_type", INT8),
                    F("resource_name", STRING),
                    F("pattern_type", INT8, "1+", default=LITERAL),
                    F("principal", STRING),
                    F("host", STRING),
                    F("operation", INT8),
                    F("permission_type", INT8),
                ],
            ),
        ],
    ),
]
