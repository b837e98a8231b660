"""The one place that maps (api_key, version) to a compiled schema.

`SCHEMAS` lists, per API, the highest version implemented, the first flexible
version (KIP-482; None: never flexible) and the request/response declarations.
`SUPPORTED_VERSIONS` (advertised by ApiVersions, min 0 wherever Kafka still has
version 0: librdkafka enables features only when a broker range contains specific
old versions; the share-group APIs start at 1, as Kafka's since 4.1) and `is_flexible`
are derived from it at import time, the compiled codecs (`REQUEST_CODECS`,
`RESPONSE_CODECS`) on first use.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol import messages_acls as acl
from broker.protocol import messages_admin as a
from broker.protocol import messages_data as d
from broker.protocol import messages_groups as g
from broker.protocol import messages_share as sh
from broker.protocol import messages_telemetry as tel
from broker.protocol import messages_txn as t
from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import MessageCodec, compile_message


class ApiSchema(NamedTuple):
    max_version: int
    flexible: int | None  # first flexible version, None: never flexible
    request: list
    response: list
    min_version: int = 0  # above 0 only where Kafka removed early versions


S = ApiSchema

SCHEMAS: dict[int, ApiSchema] = {
    ApiKey.PRODUCE: S(12, 9, d.PRODUCE_REQUEST, d.PRODUCE_RESPONSE),
    ApiKey.FETCH: S(17, 12, d.FETCH_REQUEST, d.FETCH_RESPONSE),
    ApiKey.LIST_OFFSETS: S(6, 6, d.LIST_OFFSETS_REQUEST, d.LIST_OFFSETS_RESPONSE),
    ApiKey.METADATA: S(12, 9, d.METADATA_REQUEST, d.METADATA_RESPONSE),
    ApiKey.OFFSET_COMMIT: S(9, 8, g.OFFSET_COMMIT_REQUEST, g.OFFSET_COMMIT_RESPONSE),
    ApiKey.OFFSET_FETCH: S(9, 6, g.OFFSET_FETCH_REQUEST, g.OFFSET_FETCH_RESPONSE),
    ApiKey.FIND_COORDINATOR: S(4, 3, g.FIND_COORDINATOR_REQUEST, g.FIND_COORDINATOR_RESPONSE),
    ApiKey.JOIN_GROUP: S(8, 6, g.JOIN_GROUP_REQUEST, g.JOIN_GROUP_RESPONSE),
    ApiKey.HEARTBEAT: S(4, 4, g.HEARTBEAT_REQUEST, g.HEARTBEAT_RESPONSE),
    ApiKey.LEAVE_GROUP: S(5, 4, g.LEAVE_GROUP_REQUEST, g.LEAVE_GROUP_RESPONSE),
    ApiKey.SYNC_GROUP: S(5, 4, g.SYNC_GROUP_REQUEST, g.SYNC_GROUP_RESPONSE),
    ApiKey.DESCRIBE_GROUPS: S(6, 5, g.DESCRIBE_GROUPS_REQUEST, g.DESCRIBE_GROUPS_RESPONSE),
    ApiKey.LIST_GROUPS: S(5, 3, g.LIST_GROUPS_REQUEST, g.LIST_GROUPS_RESPONSE),
    ApiKey.SASL_HANDSHAKE: S(1, None, a.SASL_HANDSHAKE_REQUEST, a.SASL_HANDSHAKE_RESPONSE),
    ApiKey.API_VERSIONS: S(4, 3, a.API_VERSIONS_REQUEST, a.API_VERSIONS_RESPONSE),
    ApiKey.CREATE_TOPICS: S(7, 5, a.CREATE_TOPICS_REQUEST, a.CREATE_TOPICS_RESPONSE),
    ApiKey.DELETE_TOPICS: S(6, 4, a.DELETE_TOPICS_REQUEST, a.DELETE_TOPICS_RESPONSE),
    ApiKey.INIT_PRODUCER_ID: S(5, 2, a.INIT_PRODUCER_ID_REQUEST, a.INIT_PRODUCER_ID_RESPONSE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: S(
        4,
        4,
        d.OFFSET_FOR_LEADER_EPOCH_REQUEST,
        d.OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: S(
        5, 3, t.ADD_PARTITIONS_TO_TXN_REQUEST, t.ADD_PARTITIONS_TO_TXN_RESPONSE
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: S(4, 3, t.ADD_OFFSETS_TO_TXN_REQUEST, t.ADD_OFFSETS_TO_TXN_RESPONSE),
    ApiKey.END_TXN: S(5, 3, t.END_TXN_REQUEST, t.END_TXN_RESPONSE),
    ApiKey.WRITE_TXN_MARKERS: S(1, 1, t.WRITE_TXN_MARKERS_REQUEST, t.WRITE_TXN_MARKERS_RESPONSE),
    ApiKey.TXN_OFFSET_COMMIT: S(5, 3, t.TXN_OFFSET_COMMIT_REQUEST, t.TXN_OFFSET_COMMIT_RESPONSE),
    ApiKey.DESCRIBE_ACLS: S(3, 2, acl.DESCRIBE_ACLS_REQUEST, acl.DESCRIBE_ACLS_RESPONSE),
    ApiKey.CREATE_ACLS: S(3, 2, acl.CREATE_ACLS_REQUEST, acl.CREATE_ACLS_RESPONSE),
    ApiKey.DELETE_ACLS: S(3, 2, acl.DELETE_ACLS_REQUEST, acl.DELETE_ACLS_RESPONSE),
    ApiKey.DESCRIBE_CONFIGS: S(4, 4, a.DESCRIBE_CONFIGS_REQUEST, a.DESCRIBE_CONFIGS_RESPONSE),
    ApiKey.SASL_AUTHENTICATE: S(2, 2, a.SASL_AUTHENTICATE_REQUEST, a.SASL_AUTHENTICATE_RESPONSE),
    ApiKey.ALTER_CONFIGS: S(2, 2, a.ALTER_CONFIGS_REQUEST, a.ALTER_CONFIGS_RESPONSE),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: S(
        1, 1, a.INCREMENTAL_ALTER_CONFIGS_REQUEST, a.INCREMENTAL_ALTER_CONFIGS_RESPONSE
    ),
    ApiKey.CREATE_PARTITIONS: S(3, 2, a.CREATE_PARTITIONS_REQUEST, a.CREATE_PARTITIONS_RESPONSE),
    ApiKey.DELETE_RECORDS: S(2, 2, a.DELETE_RECORDS_REQUEST, a.DELETE_RECORDS_RESPONSE),
    ApiKey.DELETE_GROUPS: S(2, 2, g.DELETE_GROUPS_REQUEST, g.DELETE_GROUPS_RESPONSE),
    ApiKey.OFFSET_DELETE: S(0, None, g.OFFSET_DELETE_REQUEST, g.OFFSET_DELETE_RESPONSE),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: S(
        1, 1, a.DESCRIBE_CLIENT_QUOTAS_REQUEST, a.DESCRIBE_CLIENT_QUOTAS_RESPONSE
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: S(
        1, 1, a.ALTER_CLIENT_QUOTAS_REQUEST, a.ALTER_CLIENT_QUOTAS_RESPONSE
    ),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: S(
        0,
        0,
        a.DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST,
        a.DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: S(
        0,
        0,
        a.ALTER_USER_SCRAM_CREDENTIALS_REQUEST,
        a.ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
    ),
    ApiKey.ELECT_LEADERS: S(2, 2, a.ELECT_LEADERS_REQUEST, a.ELECT_LEADERS_RESPONSE),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: S(
        0, 0, a.ALTER_PARTITION_REASSIGNMENTS_REQUEST, a.ALTER_PARTITION_REASSIGNMENTS_RESPONSE
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: S(
        0, 0, a.LIST_PARTITION_REASSIGNMENTS_REQUEST, a.LIST_PARTITION_REASSIGNMENTS_RESPONSE
    ),
    ApiKey.DESCRIBE_CLUSTER: S(1, 0, a.DESCRIBE_CLUSTER_REQUEST, a.DESCRIBE_CLUSTER_RESPONSE),
    ApiKey.DESCRIBE_LOG_DIRS: S(4, 2, a.DESCRIBE_LOG_DIRS_REQUEST, a.DESCRIBE_LOG_DIRS_RESPONSE),
    ApiKey.DESCRIBE_PRODUCERS: S(0, 0, t.DESCRIBE_PRODUCERS_REQUEST, t.DESCRIBE_PRODUCERS_RESPONSE),
    ApiKey.DESCRIBE_TRANSACTIONS: S(
        0, 0, t.DESCRIBE_TRANSACTIONS_REQUEST, t.DESCRIBE_TRANSACTIONS_RESPONSE
    ),
    ApiKey.LIST_TRANSACTIONS: S(1, 0, t.LIST_TRANSACTIONS_REQUEST, t.LIST_TRANSACTIONS_RESPONSE),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: S(
        1, 0, g.CONSUMER_GROUP_HEARTBEAT_REQUEST, g.CONSUMER_GROUP_HEARTBEAT_RESPONSE
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: S(
        1, 0, g.CONSUMER_GROUP_DESCRIBE_REQUEST, g.CONSUMER_GROUP_DESCRIBE_RESPONSE
    ),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: S(
        0, 0, a.DESCRIBE_TOPIC_PARTITIONS_REQUEST, a.DESCRIBE_TOPIC_PARTITIONS_RESPONSE
    ),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: S(
        0,
        0,
        tel.GET_TELEMETRY_SUBSCRIPTIONS_REQUEST,
        tel.GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE,
    ),
    ApiKey.PUSH_TELEMETRY: S(0, 0, tel.PUSH_TELEMETRY_REQUEST, tel.PUSH_TELEMETRY_RESPONSE),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: S(
        0,
        0,
        tel.LIST_CLIENT_METRICS_RESOURCES_REQUEST,
        tel.LIST_CLIENT_METRICS_RESOURCES_RESPONSE,
    ),
    # KIP-932: v0 was Kafka 4.0's early access, removed in 4.1
    ApiKey.SHARE_GROUP_HEARTBEAT: S(
        1, 0, sh.SHARE_GROUP_HEARTBEAT_REQUEST, sh.SHARE_GROUP_HEARTBEAT_RESPONSE, 1
    ),
    ApiKey.SHARE_GROUP_DESCRIBE: S(
        1, 0, sh.SHARE_GROUP_DESCRIBE_REQUEST, sh.SHARE_GROUP_DESCRIBE_RESPONSE, 1
    ),
    ApiKey.SHARE_FETCH: S(1, 0, sh.SHARE_FETCH_REQUEST, sh.SHARE_FETCH_RESPONSE, 1),
    ApiKey.SHARE_ACKNOWLEDGE: S(
        1, 0, sh.SHARE_ACKNOWLEDGE_REQUEST, sh.SHARE_ACKNOWLEDGE_RESPONSE, 1
    ),
    ApiKey.READ_SHARE_GROUP_STATE: S(
        0, 0, sh.READ_SHARE_GROUP_STATE_REQUEST, sh.READ_SHARE_GROUP_STATE_RESPONSE
    ),
    ApiKey.WRITE_SHARE_GROUP_STATE: S(
        0, 0, sh.WRITE_SHARE_GROUP_STATE_REQUEST, sh.WRITE_SHARE_GROUP_STATE_RESPONSE
    ),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: S(
        0, 0, sh.INITIALIZE_SHARE_GROUP_STATE_REQUEST, sh.INITIALIZE_SHARE_GROUP_STATE_RESPONSE
    ),
    ApiKey.DELETE_SHARE_GROUP_STATE: S(
        0, 0, sh.DELETE_SHARE_GROUP_STATE_REQUEST, sh.DELETE_SHARE_GROUP_STATE_RESPONSE
    ),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: S(
        0, 0, sh.DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST, sh.DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: S(
        0, 0, sh.ALTER_SHARE_GROUP_OFFSETS_REQUEST, sh.ALTER_SHARE_GROUP_OFFSETS_RESPONSE
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: S(
        0, 0, sh.DELETE_SHARE_GROUP_OFFSETS_REQUEST, sh.DELETE_SHARE_GROUP_OFFSETS_RESPONSE
    ),
}

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    key: (api.min_version, api.max_version) for key, api in SCHEMAS.items()
}


def is_flexible(api_key: int, version: int) -> bool:
    """Whether (api_key, version) uses KIP-482's compact fields and tagged sections
    (and so request header v2 / response header v1, except ApiVersions' response)."""
    api = SCHEMAS.get(api_key)
    return api is not None and api.flexible is not None and version >= api.flexible


class Codecs:
    """(api_key, version) -> the compiled codec of one side (`request` or
    `response`), compiled on first use. Compiling every version of every API at
    import took ~0.9 s of each broker's and command's start, most of it for versions
    no client of that process asks for. `compile_all()` is for the tests that hold
    every schema to Kafka's."""

    def __init__(self, side: str):
        self.side = side
        self._compiled: dict[tuple[int, int], MessageCodec] = {}

    def get(self, key: tuple[int, int]) -> MessageCodec | None:
        codec = self._compiled.get(key)
        if codec is None:
            api_key, version = key
            api = SCHEMAS.get(api_key)
            if api is None or not api.min_version <= version <= api.max_version:
                return None
            fields = api.request if self.side == "request" else api.response
            codec = compile_message(fields, version, is_flexible(api_key, version))
            self._compiled[key] = codec
        return codec

    def __getitem__(self, key: tuple[int, int]) -> MessageCodec:
        codec = self.get(key)
        if codec is None:
            raise KeyError(key)
        return codec

    def compile_all(self) -> dict[tuple[int, int], MessageCodec]:
        return {
            (key, v): self[(key, v)]
            for key, api in SCHEMAS.items()
            for v in range(api.min_version, api.max_version + 1)
        }


REQUEST_CODECS = Codecs("request")
RESPONSE_CODECS = Codecs("response")
