"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546, as Kafka 3.9 in
ZooKeeper mode answers them; the quotas are `core.client_quotas` (broker.quotas).

Describe: the filter's components (user and client-id; match EXACT a name, DEFAULT
the default entity, SPECIFIED any name of the type) select the entities with quotas
(broker.quotas.entity.matches); `strict` leaves out entities with a type the filter
does not name. A bad filter (an empty or custom entity type, a type twice, an
unknown match type) fails the whole request: INVALID_REQUEST, or UNSUPPORTED_VERSION
for a custom entity type, with entries null.

Alter: each entry is applied or refused on its own. INVALID_REQUEST for an empty
entity, an empty name (it would have no znode) or a type twice, an unknown key (removing an unknown key is a no-op, as in
Kafka), a value that is not positive, a fraction for a byte rate;
UNSUPPORTED_VERSION for a custom entity type. `validate_only` checks without
writing.

Authorization: describing needs DESCRIBE_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED for the request), altering ALTER_CONFIGS (else
CLUSTER_AUTHORIZATION_FAILED for every entry).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.quotas.entity import (
    Configs,
    Entity,
    QuotaError,
    apply_ops,
    matches,
    parse_entity,
    parse_filter,
)
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import answer_when_written, handles


def _error(e: QuotaError) -> ErrorCode:
    return ErrorCode.UNSUPPORTED_VERSION if e.unsupported else ErrorCode.INVALID_REQUEST


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
def describe_client_quotas(ctx, body):
    answer: dict[str, object] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "entries": None,
    }
    if not allowed(ctx, Op.DESCRIBE_CONFIGS, RT.CLUSTER):
        answer["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return answer
    try:
        wanted = parse_filter(body["components"])
    except QuotaError as e:
        answer.update(error_code=_error(e), error_message=str(e))
        return answer
    quotas = ctx.core.client_quotas.quotas
    answer["entries"] = [
        {
            "entity": entity.components(),
            "values": [{"key": k, "value": v} for k, v in sorted(configs.items())],
        }
        for entity, configs in sorted(quotas.items(), key=lambda item: repr(item[0]))
        if configs and matches(wanted, entity, body["strict"])
    ]
    return answer


@handles(ApiKey.ALTER_CLIENT_QUOTAS)
def alter_client_quotas(ctx, body):
    entries = body["entries"]
    if not allowed(ctx, Op.ALTER_CONFIGS, RT.CLUSTER):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {
            "throttle_time_ms": 0,
            "entries": [
                {"error_code": denied, "error_message": None, "entity": e["entity"]}
                for e in entries
            ],
        }
    store = ctx.core.client_quotas
    changes: dict[Entity, Configs] = {}
    results = []
    for entry in entries:
        code, message = ErrorCode.NONE, None
        try:
            entity = parse_entity(entry["entity"])
            base = changes.get(entity, store.quotas.get(entity, {}))
            changes[entity] = apply_ops(base, entry["ops"])
        except QuotaError as e:
            code, message = _error(e), str(e)
        results.append({"error_code": code, "error_message": message, "entity": entry["entity"]})
    response = {"throttle_time_ms": 0, "entries": results}
    if body["validate_only"] or not changes:
        return response
    written = store.apply(changes)
    if written is None:
        return response
    return answer_when_written(written, response)
