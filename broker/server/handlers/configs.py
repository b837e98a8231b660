"""Configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

DescribeConfigs covers topic (2) and broker (4) resources. Per version: v0 reports
`is_default`; v1+ `config_source` (1 topic override, 4 static broker config, 5
default) and, on request, `synonyms`; v3 `config_type` and `documentation`.

Topic configs change as in Kafka: IncrementalAlterConfigs SETs or DELETEs single
overrides and APPENDs to or SUBTRACTs from list configs (cleanup.policy); the
legacy AlterConfigs replaces the whole override set. Every resource is checked
first (unknown topic: UNKNOWN_TOPIC_OR_PARTITION; unknown key or bad value:
INVALID_CONFIG; a key twice, a null value to set, an unknown operation:
INVALID_REQUEST) and nothing is written for `validate_only`. A cluster writes the
new overrides to ZooKeeper and every broker applies them (topic_admin.py).
Broker configs are static here (no dynamic broker config yet): altering one, for a
broker or for the cluster-wide default (the broker resource named ""), is refused
with INVALID_REQUEST naming the keys, as Kafka refuses a read-only key, and the
default resource is described with no configs (it holds only dynamic ones).

Authorization: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic
(TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
(CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections import Counter

from broker.config import KEYS, TOPIC_SYNONYMS
from broker.log.config import TOPIC_CONFIG_NAMES
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.errors import ApiError
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
# Kafka's DescribeConfigs ConfigType numbers.
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = range(1, 8)
TYPE_PASSWORD = 9
_BROKER_TYPES = {
    "bool": TYPE_BOOLEAN,
    "string": TYPE_STRING,
    "int": TYPE_INT,
    "short": TYPE_SHORT,
    "long": TYPE_LONG,
    "double": TYPE_DOUBLE,
    "list": TYPE_LIST,
    "password": TYPE_PASSWORD,
}


def _config_refusal(ctx, op: Op, rtype: int, rname: str) -> ErrorCode | None:
    """The code a resource answers when the caller may not `op` its configs."""
    if rtype == RESOURCE_TOPIC and not allowed(ctx, op, RT.TOPIC, rname):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rtype == RESOURCE_BROKER and not allowed(ctx, op, RT.CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


_INT_TOPIC_CONFIGS = {
    "segment.bytes",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "min.insync.replicas",
}


@handles(ApiKey.DESCRIBE_CONFIGS)
def describe_configs(ctx, body):
    results = []
    for res in body["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        result = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": rtype,
            "resource_name": rname,
            "configs": [],
        }
        refused = _config_refusal(ctx, Op.DESCRIBE_CONFIGS, rtype, rname)
        if refused is not None:
            result["error_code"] = refused
            entries = []
        elif rtype == RESOURCE_TOPIC:
            entries = _topic_entries(ctx.core, rname, result)
        elif rtype == RESOURCE_BROKER:
            entries = _broker_entries(ctx.core, rname, result)
        else:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = f"Unsupported resource type {rtype}"
            entries = []
        wanted = res["configuration_keys"]
        for entry in entries:
            if wanted is not None and entry["name"] not in wanted:
                continue
            if not body["include_synonyms"]:
                entry["synonyms"] = []
            if not body["include_documentation"]:
                entry["documentation"] = None
            result["configs"].append(entry)
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _entry(name, value, read_only, source, synonyms, config_type, doc) -> dict:
    """One config entry; a password's value (a private key, say) is never sent: null
    and is_sensitive, as Kafka answers."""
    sensitive = config_type == TYPE_PASSWORD
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": read_only,
        "is_default": source == SOURCE_DEFAULT,
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": synonyms,
        "config_type": config_type,
        "documentation": doc,
    }


def _topic_entries(core, name: str, result: dict) -> list[dict]:
    try:
        meta = core.topic_admin.existing_topic(name)
    except ApiError as e:
        result["error_code"], result["error_message"] = e.code, str(e)
        return []
    values, _ = core.replicas.effective_configs(meta)
    defaults = core.replicas.default_log_config.to_props()
    cfg = core.config
    entries = []
    for key in TOPIC_CONFIG_NAMES:
        synonyms = []
        if key in meta.configs:
            synonyms.append({"name": key, "value": meta.configs[key], "source": SOURCE_TOPIC})
        broker_key = cfg.topic_default_source(key)
        if broker_key is not None:
            synonyms.append(
                {"name": broker_key, "value": defaults[key], "source": SOURCE_STATIC_BROKER}
            )
        synonyms.append(
            {"name": TOPIC_SYNONYMS.get(key, key), "value": defaults[key], "source": SOURCE_DEFAULT}
        )
        source = synonyms[0]["source"]
        entries.append(
            _entry(key, values[key], False, source, synonyms, _topic_type(key, values[key]), None)
        )
    return entries


def _topic_type(key: str, value: str) -> int:
    if key in _INT_TOPIC_CONFIGS:
        return TYPE_INT
    if key == "cleanup.policy":
        return TYPE_LIST
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    return TYPE_LONG if value.lstrip("-").isdigit() else TYPE_STRING


def _broker_entries(core, name: str, result: dict) -> list[dict]:
    if name == "":
        # The cluster-wide default resource holds the dynamic default configs only
        # (Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG); broker configs are static here.
        return []
    if name != str(core.broker_id):
        result["error_code"] = ErrorCode.INVALID_REQUEST
        result["error_message"] = f"This is broker {core.broker_id}, not {name}"
        return []
    entries = []
    for key, value, is_default in core.config.describe():
        source = SOURCE_DEFAULT if is_default else SOURCE_STATIC_BROKER
        spec = KEYS[key]
        shown = None if spec.type == "password" else value
        synonyms = [{"name": key, "value": shown, "source": source}]
        entries.append(
            _entry(key, value, True, source, synonyms, _BROKER_TYPES[spec.type], spec.doc)
        )
    return entries


SET, DELETE, APPEND, SUBTRACT = range(4)
_LIST_TOPIC_CONFIGS = {"cleanup.policy"}


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
def incremental_alter_configs(ctx, body):
    return _alter(ctx, body, incremental=True)


@handles(ApiKey.ALTER_CONFIGS)
def alter_configs(ctx, body):
    return _alter(ctx, body, incremental=False)


async def _alter(ctx, body, incremental: bool) -> dict:
    topic_admin = ctx.core.topic_admin
    responses = []
    for res in body["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        code, message = ErrorCode.NONE, None
        try:
            names = Counter(c["name"] for c in res["configs"])
            if any(n > 1 for n in names.values()):
                raise ApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            refused = _config_refusal(ctx, Op.ALTER_CONFIGS, rtype, rname)
            if refused is not None:
                raise ApiError(refused)
            if rtype == RESOURCE_TOPIC:
                current = topic_admin.existing_topic(rname).configs
                overrides = _new_overrides(ctx.core, rname, current, res["configs"], incremental)
                meta = topic_admin.with_configs(rname, overrides)
                if not body["validate_only"]:
                    await topic_admin.alter_topic(meta)
            elif rtype == RESOURCE_BROKER:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    "Cannot update these configs dynamically: " + ", ".join(sorted(names)),
                )
            else:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")
        except ApiError as e:
            code, message = e.code, str(e)
        responses.append(
            {
                "error_code": code,
                "error_message": message,
                "resource_type": rtype,
                "resource_name": rname,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}


def _new_overrides(core, topic: str, current: dict, changes: list, incremental: bool) -> dict:
    """The override set after `changes` (AlterConfigs: exactly the given ones)."""
    if not incremental:
        out = {}
        for c in changes:
            if c["value"] is None:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c['name']}"
                )
            out[c["name"]] = c["value"]
        return out
    out = dict(current)
    effective = None
    for c in changes:
        name, op, value = c["name"], c["config_operation"], c["value"]
        if op == DELETE:
            out.pop(name, None)
            continue
        if op not in (SET, APPEND, SUBTRACT):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {name}")
        if value is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == SET:
            out[name] = value
            continue
        if name not in _LIST_TOPIC_CONFIGS:
            verb = "append" if op == APPEND else "subtract"
            raise ApiError(
                ErrorCode.INVALID_CONFIG,
                f"Config value {verb} is not allowed for config key: {name}",
            )
        if effective is None:
            effective, _ = core.replicas.effective_configs(core.replicas.topic(topic))
        items = [v for v in out.get(name, effective.get(name, "")).split(",") if v]
        given = [v.strip() for v in value.split(",") if v.strip()]
        if op == APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        out[name] = ",".join(items)
    return out
