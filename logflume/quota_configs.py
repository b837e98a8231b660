"""Client quotas for `logflume configs` (kafka-configs' `--entity-type users|clients`):
DescribeClientQuotas and AlterClientQuotas over the broker's own codec
(broker/protocol/client.BlockingClient; librdkafka has no client quota API),
connecting to the first bootstrap server as --command-config says
(logflume/wire_config.py).

An entity is a list of (entity type, name) pairs, the type `users` or `clients`, the
name None for the type's default (`--entity-default`). Describing an entity type
without a name describes every entity of that type (and only of the types given),
as kafka-configs does. Text output is kafka-configs': `Quota configs for
user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0`.

Failures raise `QuotaCommandError` with the one line to print.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode

_WIRE_TYPE = {"users": "user", "clients": "client-id"}
_LABEL = {"user": "user-principal", "client-id": "client-id"}
_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2
ANY = "\0any"  # describe: a type given without --entity-name or --entity-default


class QuotaCommandError(Exception):
    """One line for stderr."""


Entity = list[tuple[str, str | None]]  # (users|clients, name or None: default)


def _request(args, key: ApiKey, body: dict) -> dict:
    from broker.protocol.client import BlockingClient, SaslAuthenticationError, SaslClientError
    from common.hostport import parse_hostport
    from logflume import wire_config

    first = args.bootstrap_server.split(",")[0]
    try:
        security = wire_config.security(args)
        host, port = parse_hostport(first, "--bootstrap-server")
        with BlockingClient(host, port, args.timeout_ms / 1000, security=security) as client:
            return client.request(key, 1, body)
    except (ValueError, SaslAuthenticationError, SaslClientError) as e:
        raise QuotaCommandError(str(e)) from None
    except OSError as e:  # refused, timed out, closed, TLS
        raise QuotaCommandError(
            f"cannot reach {first} within {args.timeout_ms} ms ({e.strerror or e})"
        ) from None


def _refused(code: int, message: str | None) -> QuotaCommandError:
    name = ErrorCode(code).name
    return QuotaCommandError(f"{name}: {message or 'the broker refused the request'}")


def alter(args, entity: Entity, added: dict[str, str], deleted: list[str]) -> None:
    ops = []
    for key, text in added.items():
        try:
            value = float(text)
        except ValueError:
            raise QuotaCommandError(f"--add-config {key}={text}: not a number") from None
        ops.append({"key": key, "value": value, "remove": False})
    ops += [{"key": key, "value": 0.0, "remove": True} for key in deleted]
    components = [{"entity_type": _WIRE_TYPE[t], "entity_name": n} for t, n in entity]
    body = {"entries": [{"entity": components, "ops": ops}], "validate_only": False}
    answer = _request(args, ApiKey.ALTER_CLIENT_QUOTAS, body)["entries"][0]
    if answer["error_code"]:
        raise _refused(answer["error_code"], answer["error_message"])


def describe(args, entity: Entity) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    """[(entity as [(user|client-id, name or None)], {key: value})] of the entities
    matching: a name exactly, None the default, a type without a name any name."""
    components = []
    for kind, name in entity:
        if name == ANY:
            components.append(
                {"entity_type": _WIRE_TYPE[kind], "match_type": _SPECIFIED, "match": None}
            )
        elif name is None:
            components.append(
                {"entity_type": _WIRE_TYPE[kind], "match_type": _DEFAULT, "match": None}
            )
        else:
            components.append(
                {"entity_type": _WIRE_TYPE[kind], "match_type": _EXACT, "match": name}
            )
    answer = _request(
        args, ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": True}
    )
    if answer["error_code"]:
        raise _refused(answer["error_code"], answer["error_message"])
    return [
        (
            [(c["entity_type"], c["entity_name"]) for c in entry["entity"]],
            {v["key"]: v["value"] for v in entry["values"]},
        )
        for entry in answer["entries"] or []
    ]


def label(found: list[tuple[str, str | None]]) -> str:
    """kafka-configs' description of an entity: "user-principal 'alice', client-id 'app'",
    "the default client-id"."""
    parts = []
    for kind, name in found:
        parts.append(f"the default {_LABEL[kind]}" if name is None else f"{_LABEL[kind]} '{name}'")
    return ", ".join(parts)


def text_line(found: list[tuple[str, str | None]], values: dict[str, float]) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted(values.items()))
    return f"Quota configs for {label(found)} are {configs}"


def json_object(found: list[tuple[str, str | None]], values: dict[str, float]) -> dict:
    """`{"entity_type": "users"|"clients", "entity_name", ["client_id" for a
    (user, client id) pair], "configs": [{"name", "value"}]}`."""
    names = dict(found)
    out: dict[str, object]
    if "user" in names:
        out = {"entity_type": "users", "entity_name": names["user"]}
        if "client-id" in names:
            out["client_id"] = names["client-id"]
    else:
        out = {"entity_type": "clients", "entity_name": names["client-id"]}
    out["configs"] = [{"name": k, "value": v} for k, v in sorted(values.items())]
    return out
