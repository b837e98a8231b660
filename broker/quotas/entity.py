"""Client quota entities and their configs, as Kafka 3.9 in ZooKeeper mode has them
(KIP-13, KIP-55, KIP-546): no I/O.

An entity is a user, a client id, or a (user, client id) pair; `Entity.user` and
`Entity.client_id` are the name, `DEFAULT` (Kafka's `<default>`, a null name on the
wire) or `None` when the entity has no component of that type.

Keys (Kafka's QuotaConfigs): `producer_byte_rate` and `consumer_byte_rate` (longs,
bytes per second) are enforced (broker.quotas.manager); `request_percentage` and
`controller_mutation_rate` (doubles) are accepted and stored as Kafka does but not
enforced: the broker has no request-time or topic-mutation quotas.

`resolve` picks the quota a (user, client id) connection is held to: the first entity,
in Kafka's order below, that sets the key, and the metric entity the usage is
counted under (all clients of a user share a user-level quota; a default quota is
every user's or client's own):

1. /config/users/<user>/clients/<client-id>
2. /config/users/<user>/clients/<default>
3. /config/users/<user>
4. /config/users/<default>/clients/<client-id>
5. /config/users/<default>/clients/<default>
6. /config/users/<default>
7. /config/clients/<client-id>
8. /config/clients/<default>
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

USER = "user"
CLIENT_ID = "client-id"
DEFAULT = "<default>"  # a default entity's name, as Kafka stores it

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
KEY_TYPES = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
ENFORCED = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})

# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Configs = dict[str, float]
_LONG_MAX = 2**63 - 1


class QuotaError(ValueError):
    """A request Kafka answers INVALID_REQUEST (or UNSUPPORTED_VERSION when
    `unsupported`: an entity type other than user and client-id)."""

    def __init__(self, message: str, unsupported: bool = False):
        super().__init__(message)
        self.unsupported = unsupported


@dataclasses.dataclass(frozen=True, slots=True)
class Entity:
    user: str | None = None  # a name, DEFAULT, or None: no user component
    client_id: str | None = None

    def components(self) -> list[dict]:
        """The wire form: [{"entity_type", "entity_name" (None: default)}], user first."""
        out = []
        for kind, name in ((USER, self.user), (CLIENT_ID, self.client_id)):
            if name is not None:
                out.append({"entity_type": kind, "entity_name": None if name == DEFAULT else name})
        return out


def parse_entity(components: list[dict]) -> Entity:
    """The entity an AlterClientQuotas entry names; QuotaError as Kafka refuses it."""
    if not components:
        raise QuotaError("Invalid empty client quota entity")
    names: dict[str, str] = {}
    for c in components:
        kind, name = c["entity_type"], c["entity_name"]
        if kind == "":
            raise QuotaError("Unexpected empty quota entity type")
        if kind not in (USER, CLIENT_ID):
            raise QuotaError(f"Custom entity type {kind} not supported", unsupported=True)
        if kind in names:
            raise QuotaError(f"Duplicate {'user' if kind == USER else 'clientId'} entity")
        if name == "":
            raise QuotaError(f"Empty {kind} name: use a null name for the default {kind}")
        names[kind] = DEFAULT if name is None else name
    return Entity(names.get(USER), names.get(CLIENT_ID))


def check_value(key: str, value: float) -> float:
    """A value to set for `key`, as Kafka stores it (a long key rounded to its integer
    when within 1e-6); QuotaError for an unknown key, a fraction on a long key, or a
    value that is not a positive number."""
    kind = KEY_TYPES.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise QuotaError(f"Configuration {key} must be a positive value, got {value}")
    if kind == "LONG":
        whole = math.floor(value + 1e-6)
        if abs(whole - value) > 1e-6 or whole > _LONG_MAX:
            raise QuotaError(f"Configuration {key} must be a {kind} value")
        return float(whole)
    return value


def apply_ops(configs: Mapping[str, float], ops: list[dict]) -> Configs:
    """An entity's configs after an entry's ops (set, or remove when `remove`)."""
    out = dict(configs)
    for op in ops:
        if op["remove"]:
            out.pop(op["key"], None)
        else:
            out[op["key"]] = check_value(op["key"], op["value"])
    return out


# -- DescribeClientQuotas filters -------------------------------------------------------

_ANY = object()  # MATCH_SPECIFIED: any name of the type, the default included


def parse_filter(components: list[dict]) -> dict[str, object]:
    """{entity type: a name, DEFAULT, or _ANY}; QuotaError as Kafka refuses it."""
    out: dict[str, object] = {}
    for c in components:
        kind = c["entity_type"]
        if kind == "":
            raise QuotaError("Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID):
            raise QuotaError(f"Custom entity type '{kind}' not supported", unsupported=True)
        if kind in out:
            raise QuotaError(
                f"Duplicate {'user' if kind == USER else 'clientId'} filter component entity type"
            )
        match_type, match = c["match_type"], c["match"]
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(f"Exact match on {kind} needs a name")
            out[kind] = match
        elif match_type == MATCH_DEFAULT:
            out[kind] = DEFAULT
        elif match_type == MATCH_SPECIFIED:
            out[kind] = _ANY
        else:
            raise QuotaError(f"Unexpected match type: {match_type}")
    return out


def matches(wanted: dict[str, object], entity: Entity, strict: bool) -> bool:
    """Kafka's rule: a filtered type must be in the entity and match; an unfiltered
    type may be in the entity only when not `strict`."""
    for kind, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        want = wanted.get(kind)
        if kind not in wanted:
            if name is not None and strict:
                return False
        elif name is None or (want is not _ANY and want != name):
            return False
    return True


# -- enforcement: which quota a connection is held to -------------------------------------


def precedence(user: str, client_id: str) -> list[tuple[Entity, tuple[str, str]]]:
    """Kafka's order of the entities whose quota may apply to (user, client_id), each
    with the (user, client id) metric tags its usage is counted under."""
    both = (user, client_id)
    return [
        (Entity(user, client_id), both),
        (Entity(user, DEFAULT), both),
        (Entity(user, None), (user, "")),
        (Entity(DEFAULT, client_id), both),
        (Entity(DEFAULT, DEFAULT), both),
        (Entity(DEFAULT, None), (user, "")),
        (Entity(None, client_id), ("", client_id)),
        (Entity(None, DEFAULT), ("", client_id)),
    ]


def resolve(
    quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[float, tuple[str, str]] | None:
    """(quota, metric tags) for `key` of a connection, or None: not limited."""
    for entity, tags in precedence(user, client_id):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, tags
    return None
