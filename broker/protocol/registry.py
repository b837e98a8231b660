"""The one place that maps (api_key, version) to a compiled schema.

`SCHEMAS` lists, per API, the highest version implemented (the last non-flexible one,
so no tagged fields are ever needed) and the request/response declarations.
`SUPPORTED_VERSIONS` (advertised by ApiVersions, min 0 everywhere: librdkafka enables
features only when a broker range contains specific old versions) and the compiled
codec tables are derived from it at import time.
"""

from __future__ import annotations

from broker.protocol import messages_admin as a
from broker.protocol import messages_data as d
from broker.protocol import messages_groups as g
from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import MessageCodec, compile_message

SCHEMAS: dict[ApiKey, tuple[int, list, list]] = {
    ApiKey.PRODUCE: (8, d.PRODUCE_REQUEST, d.PRODUCE_RESPONSE),
    ApiKey.FETCH: (11, d.FETCH_REQUEST, d.FETCH_RESPONSE),
    ApiKey.LIST_OFFSETS: (5, d.LIST_OFFSETS_REQUEST, d.LIST_OFFSETS_RESPONSE),
    ApiKey.METADATA: (8, d.METADATA_REQUEST, d.METADATA_RESPONSE),
    ApiKey.OFFSET_COMMIT: (7, g.OFFSET_COMMIT_REQUEST, g.OFFSET_COMMIT_RESPONSE),
    ApiKey.OFFSET_FETCH: (5, g.OFFSET_FETCH_REQUEST, g.OFFSET_FETCH_RESPONSE),
    ApiKey.FIND_COORDINATOR: (2, g.FIND_COORDINATOR_REQUEST, g.FIND_COORDINATOR_RESPONSE),
    ApiKey.JOIN_GROUP: (5, g.JOIN_GROUP_REQUEST, g.JOIN_GROUP_RESPONSE),
    ApiKey.HEARTBEAT: (3, g.HEARTBEAT_REQUEST, g.HEARTBEAT_RESPONSE),
    ApiKey.LEAVE_GROUP: (3, g.LEAVE_GROUP_REQUEST, g.LEAVE_GROUP_RESPONSE),
    ApiKey.SYNC_GROUP: (3, g.SYNC_GROUP_REQUEST, g.SYNC_GROUP_RESPONSE),
    ApiKey.DESCRIBE_GROUPS: (4, g.DESCRIBE_GROUPS_REQUEST, g.DESCRIBE_GROUPS_RESPONSE),
    ApiKey.LIST_GROUPS: (2, g.LIST_GROUPS_REQUEST, g.LIST_GROUPS_RESPONSE),
    ApiKey.SASL_HANDSHAKE: (1, a.SASL_HANDSHAKE_REQUEST, a.SASL_HANDSHAKE_RESPONSE),
    ApiKey.API_VERSIONS: (2, a.API_VERSIONS_REQUEST, a.API_VERSIONS_RESPONSE),
    ApiKey.CREATE_TOPICS: (4, a.CREATE_TOPICS_REQUEST, a.CREATE_TOPICS_RESPONSE),
    ApiKey.DELETE_TOPICS: (3, a.DELETE_TOPICS_REQUEST, a.DELETE_TOPICS_RESPONSE),
    ApiKey.INIT_PRODUCER_ID: (1, a.INIT_PRODUCER_ID_REQUEST, a.INIT_PRODUCER_ID_RESPONSE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (
        3,
        d.OFFSET_FOR_LEADER_EPOCH_REQUEST,
        d.OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    ),
    ApiKey.DESCRIBE_CONFIGS: (3, a.DESCRIBE_CONFIGS_REQUEST, a.DESCRIBE_CONFIGS_RESPONSE),
    ApiKey.SASL_AUTHENTICATE: (1, a.SASL_AUTHENTICATE_REQUEST, a.SASL_AUTHENTICATE_RESPONSE),
}

SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    key: (0, max_version) for key, (max_version, _, _) in SCHEMAS.items()
}

REQUEST_CODECS: dict[tuple[int, int], MessageCodec] = {
    (key, v): compile_message(req, v)
    for key, (max_version, req, _) in SCHEMAS.items()
    for v in range(max_version + 1)
}

RESPONSE_CODECS: dict[tuple[int, int], MessageCodec] = {
    (key, v): compile_message(resp, v)
    for key, (max_version, _, resp) in SCHEMAS.items()
    for v in range(max_version + 1)
}
