"""Configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

DescribeConfigs covers topic (2), broker (4), client-metrics (16) and group (32)
resources. Per version: v0 reports
`is_default`; v1+ `config_source` (1 topic override, 2 dynamic broker config, 3
dynamic cluster-wide default, 4 static broker config, 5 default) and, on request,
`synonyms` in Kafka's precedence order; v3 `config_type` and `documentation`.

Topic configs change as in Kafka: IncrementalAlterConfigs SETs or DELETEs single
overrides and APPENDs to or SUBTRACTs from list configs (cleanup.policy, the
throttled replica lists); the legacy AlterConfigs replaces the whole override set.
Every resource is checked first (unknown topic: UNKNOWN_TOPIC_OR_PARTITION; unknown
key or bad value: INVALID_CONFIG; a key twice, a null value to set, an unknown operation:
INVALID_REQUEST) and nothing is written for `validate_only`. A cluster writes the
new overrides to ZooKeeper and every broker applies them (topic_admin.py).

Broker configs (KIP-226, broker/dynamic_config.py): the resource "<id>" (this
broker's own; another id is INVALID_REQUEST, as Kafka answers) or "" (the
cluster-wide default) takes the keys Kafka marks dynamic (broker/dynamic_keys.py);
a read-only key, a bare ssl.* key, a per-broker key at the default level, a bad
value or a password without `password.encoder.secret` is INVALID_CONFIG with
Kafka's message ("Invalid config value for resource ConfigResource(type=BROKER,
name='0'): Cannot update these configs dynamically: Set(broker.id)"). The default
resource describes its dynamic configs only.

Client-metrics subscriptions (KIP-714, type 16, broker/telemetry): a subscription
describes the keys it has (source 7, CLIENT_METRICS_CONFIG; none if it does not
exist); altering checks the resulting keys as Kafka does (ClientMetricsConfigs) and
stores them; deleting every key removes the subscription.

Groups (KIP-848/932, type 32, broker/groups/group_config.py): a group describes
every group config, its own value first (source 8, GROUP_CONFIG), then the broker's
`group.<key>` as the layers set it; altering checks the group's resulting configs as
Kafka does (GroupConfig.validate: INVALID_CONFIG with its messages; the empty name
INVALID_REQUEST) and stores them.

Authorization: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic
(TOPIC_AUTHORIZATION_FAILED), on the group (GROUP_AUTHORIZATION_FAILED) or, for a
broker or a client-metrics subscription, on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections import Counter

from broker.config import KEYS, TOPIC_SYNONYMS
from broker.config_ops import APPEND, DELETE, SET, SUBTRACT, apply_list_op, list_op_refused
from broker.dynamic_config import key_type
from broker.dynamic_keys import (
    ALL_DYNAMIC,
    BROKER_QUOTAS,
    DynamicConfigError,
    apply_incremental,
    broker_synonyms,
    is_password,
    topic_synonym_family,
)
from broker.groups.group_config import BROKER_PREFIX, GroupConfigError
from broker.groups.group_config import KEYS as GROUP_KEYS
from broker.log.config import TOPIC_CONFIG_NAMES
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.errors import ApiError
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles
from broker.telemetry.subscriptions import ClientMetricsConfigError

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_CLIENT_METRICS = 7
SOURCE_GROUP = 8
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
    if rtype == RESOURCE_GROUP and not allowed(ctx, op, RT.GROUP, rname):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    cluster_wide = rtype in (RESOURCE_BROKER, RESOURCE_CLIENT_METRICS)
    if cluster_wide and not allowed(ctx, op, RT.CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


_LIST_TOPIC_CONFIGS = {
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}
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
        elif rtype == RESOURCE_CLIENT_METRICS:
            entries = _client_metrics_entries(ctx.core, rname, result)
        elif rtype == RESOURCE_GROUP:
            entries = _group_entries(ctx.core, rname, result)
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
        family = topic_synonym_family(key)
        synonyms += [s for s in _layer_synonyms(cfg, family) if s["source"] != SOURCE_DEFAULT]
        if key in TOPIC_SYNONYMS:  # a topic config no broker key gives (the throttled
            # replica lists) has no default synonym, as in Kafka
            synonyms.append(
                {"name": TOPIC_SYNONYMS[key], "value": defaults[key], "source": SOURCE_DEFAULT}
            )
        source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT
        entries.append(
            _entry(key, values[key], False, source, synonyms, _topic_type(key, values[key]), None)
        )
    return entries


def _topic_type(key: str, value: str) -> int:
    if key in _INT_TOPIC_CONFIGS:
        return TYPE_INT
    if key in _LIST_TOPIC_CONFIGS:
        return TYPE_LIST
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    return TYPE_LONG if value.lstrip("-").isdigit() else TYPE_STRING


def _layer_synonyms(cfg, names: list[str], sensitive: bool = False) -> list[dict]:
    """Kafka's configSynonyms: each of `names` (one setting's keys, in precedence
    order) as the dynamic per-broker, dynamic default, static and default layers set
    it, in that order."""
    layers = (
        (cfg.dynamic_broker, SOURCE_DYNAMIC_BROKER),
        (cfg.dynamic_default, SOURCE_DYNAMIC_DEFAULT),
        (cfg.static_values, SOURCE_STATIC_BROKER),
        (_DEFAULTS, SOURCE_DEFAULT),
    )
    return [
        {"name": n, "value": None if sensitive else str(layer[n]), "source": source}
        for layer, source in layers
        for n in names
        if n in layer
    ]


def _text(value) -> str | None:
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


_DEFAULTS = {k.name: _text(k.default) for k in KEYS.values() if k.default is not None}


def _broker_entries(core, name: str, result: dict) -> list[dict]:
    cfg = core.config
    if name == "":
        names = sorted(cfg.dynamic_default)
    elif name != str(core.broker_id):
        result["error_code"] = ErrorCode.INVALID_REQUEST
        result["error_message"] = (
            f"Unexpected broker id, expected {core.broker_id} or empty string, but received {name}"
        )
        return []
    else:
        extra = set(cfg.dynamic_broker) | set(cfg.dynamic_default)
        names = list(KEYS) + sorted(extra - set(KEYS))
    entries = []
    for key in names:
        kind = key_type(key)
        sensitive = kind == "password" or is_password(key)
        synonyms = _layer_synonyms(cfg, broker_synonyms(key, match_listener=True), sensitive)
        while synonyms and synonyms[0]["name"] != key:  # a base key: no listener override
            synonyms.pop(0)
        if name == "":
            synonyms = [s for s in synonyms if s["source"] == SOURCE_DYNAMIC_DEFAULT]
            value = cfg.dynamic_default[key]
        elif key in KEYS and key not in cfg.dynamic_broker and key not in cfg.dynamic_default:
            value = _text(cfg.get(key))
            if key == "log.dirs" and value is None:
                value = _text(cfg.get("log.dir"))
        else:
            value = cfg.dynamic_broker.get(key, cfg.dynamic_default.get(key))
        source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT
        read_only = key not in ALL_DYNAMIC and key not in BROKER_QUOTAS and key in KEYS
        spec = KEYS.get(key)
        entries.append(
            _entry(
                key,
                value,
                read_only,
                source,
                synonyms,
                TYPE_PASSWORD if sensitive else _BROKER_TYPES[kind],
                spec.doc if spec else None,
            )
        )
    return entries


def _client_metrics_entries(core, name: str, result: dict) -> list[dict]:
    try:
        props = core.telemetry.describe(name)
    except ClientMetricsConfigError as e:
        result["error_code"], result["error_message"] = e.code, str(e)
        return []
    return [
        _entry(k, v, False, SOURCE_CLIENT_METRICS, [], 0, None) for k, v in sorted(props.items())
    ]


def _group_entries(core, name: str, result: dict) -> list[dict]:
    """Kafka's createGroupConfigEntry: every group config, with the group's own value
    (source 8, GROUP_CONFIG) first among its synonyms, then the broker's `group.<key>`
    as the layers set it, or the key's default when the broker has no such key."""
    try:
        overrides, values = core.group_configs.describe(name)
    except GroupConfigError as e:
        result["error_code"], result["error_message"] = e.code, str(e)
        return []
    entries = []
    for key in sorted(GROUP_KEYS):
        spec = GROUP_KEYS[key]
        broker_key = BROKER_PREFIX + key
        if broker_key in KEYS:
            synonyms = _layer_synonyms(core.config, [broker_key])
        else:
            synonyms = [{"name": key, "value": str(spec.default), "source": SOURCE_DEFAULT}]
        if key in overrides:
            synonyms.insert(0, {"name": key, "value": values[key], "source": SOURCE_GROUP})
        source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT
        kind = TYPE_INT if spec.type == "int" else TYPE_STRING
        entries.append(_entry(key, values[key], False, source, synonyms, kind, spec.doc))
    return entries


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
                await _alter_broker(ctx.core, rname, res["configs"], incremental, body)
            elif rtype == RESOURCE_CLIENT_METRICS:
                await ctx.core.telemetry.alter(
                    rname, res["configs"], incremental, body["validate_only"]
                )
            elif rtype == RESOURCE_GROUP:
                await ctx.core.group_configs.alter(
                    rname, res["configs"], incremental, body["validate_only"]
                )
            else:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")
        except (ApiError, ClientMetricsConfigError, GroupConfigError) as e:
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


async def _alter_broker(core, name: str, changes: list, is_incremental: bool, body) -> None:
    """Kafka's alterBrokerConfigs: the resource's new dynamic config set, checked and
    stored (broker/dynamic_config.py); ApiError as Kafka answers."""
    if name != "":
        try:
            broker_id = int(name)
        except ValueError:
            raise ApiError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            ) from None
        if broker_id != core.broker_id:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {core.broker_id}, but received {name}",
            )
    for c in changes:
        op = c["config_operation"] if is_incremental else SET
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise ApiError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {c['name']}"
            )
        if op != DELETE and c["value"] is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c['name']}")
    try:
        if is_incremental:
            props = apply_incremental(core.dynamic.layer(name), changes)
        else:
            props = {c["name"]: c["value"] for c in changes}
        await core.dynamic.alter(name, props, body["validate_only"])
    except DynamicConfigError as e:
        raise ApiError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {e}",
        ) from None


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
            raise ApiError(ErrorCode.INVALID_CONFIG, list_op_refused(op, name))
        if effective is None:
            effective, _ = core.replicas.effective_configs(core.replicas.topic(topic))
        out[name] = apply_list_op(op, out.get(name, effective.get(name, "")), value)
    return out
