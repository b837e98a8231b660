"""CreateTopics, DeleteTopics and DescribeConfigs.

CreateTopics accepts per-topic configs (any topic config the log understands:
retention.ms, retention.bytes, segment.bytes, segment.ms, cleanup.policy,
min.insync.replicas, max.message.bytes ...) and `validate_only`. A single node
accepts replication factor 1 (or -1 = `default.replication.factor`) and manual
assignments naming only itself. Errors: TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST (a topic
named twice in one request).

CreateTopics v5+ also answers the created topic's partitions, replication factor and
configs (v7: its id); DeleteTopics v6 may name topics by id.

DescribeConfigs covers topic (2) and broker (4) resources. Per version: v0 reports
`is_default`; v1+ `config_source` (1 topic override, 4 static broker config, 5
default) and, on request, `synonyms`; v3 `config_type` and `documentation`.
"""

from __future__ import annotations

from collections import Counter

from broker.cluster.names import InvalidTopicName, validate_topic_name
from broker.cluster.replica_manager import TopicError
from broker.config import KEYS, TOPIC_SYNONYMS
from broker.log.config import TOPIC_CONFIG_NAMES
from broker.protocol import ApiKey, ErrorCode
from broker.server.dispatch import handles
from broker.server.handlers.metadata import NO_TOPIC_ID, named_topic, topic_uuid

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
# Kafka's DescribeConfigs ConfigType numbers.
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = range(1, 8)
_BROKER_TYPES = {
    "bool": TYPE_BOOLEAN,
    "string": TYPE_STRING,
    "int": TYPE_INT,
    "short": TYPE_SHORT,
    "long": TYPE_LONG,
    "double": TYPE_DOUBLE,
    "list": TYPE_LIST,
}
_INT_TOPIC_CONFIGS = {
    "segment.bytes",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "min.insync.replicas",
}


@handles(ApiKey.CREATE_TOPICS)
def create_topics(ctx, body):
    replicas = ctx.core.replicas
    counts = Counter(t["name"] for t in body["topics"])
    results = []
    for topic in body["topics"]:
        name = topic["name"]
        code, message = ErrorCode.NONE, None
        try:
            if counts[name] > 1:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST, f"Create topics request has duplicate topic {name}."
                )
            partitions, rf = topic["num_partitions"], topic["replication_factor"]
            if topic["assignments"]:
                partitions, rf = _check_assignments(ctx.core.broker_id, topic)
            configs = {c["name"]: c["value"] for c in topic["configs"]}
            replicas.create_topic(
                name, partitions, rf, configs, validate_only=body["validate_only"]
            )
        except TopicError as e:
            code, message = e.code, e.message
        result = {"name": name, "error_code": code, "error_message": message}
        if code == ErrorCode.NONE and ctx.api_version >= 5:
            result |= _created(ctx.core, name, topic, partitions, rf, body["validate_only"])
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}


def _created(core, name: str, topic: dict, partitions: int, rf: int, validate_only: bool):
    """What v5+ tells about a created topic: id, partitions, replication and configs
    (for validate_only, the topic as it would be)."""
    meta = core.replicas.topic(name)
    if meta is None:  # validate_only: nothing was made
        configs = {c["name"]: c["value"] for c in topic["configs"]}
        values = core.replicas.log_config(configs).to_props()
        sources = dict.fromkeys(configs, SOURCE_TOPIC)
        topic_id = None
    else:
        values, _ = core.replicas.effective_configs(meta)
        sources = dict.fromkeys(meta.configs, SOURCE_TOPIC)
        partitions, rf = meta.partitions, len(meta.assignments[0])
        topic_id = topic_uuid(meta)
    if partitions == -1:
        partitions = core.config["num.partitions"]
    if rf == -1:
        rf = core.config["default.replication.factor"]
    return {
        "topic_id": topic_id or NO_TOPIC_ID,
        "num_partitions": partitions,
        "replication_factor": rf,
        "configs": [
            {
                "name": key,
                "value": value,
                "read_only": False,
                "config_source": sources.get(key, SOURCE_DEFAULT),
                "is_sensitive": False,
            }
            for key, value in values.items()
        ],
    }


def _check_assignments(broker_id: int, topic: dict) -> tuple[int, int]:
    if topic["num_partitions"] != -1 or topic["replication_factor"] != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set.",
        )
    indexes = sorted(a["partition_index"] for a in topic["assignments"])
    if indexes != list(range(len(indexes))):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be 0..n-1.")
    for a in topic["assignments"]:
        if a["broker_ids"] != [broker_id]:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Assignment {a['broker_ids']} names brokers other than {broker_id}.",
            )
    return len(indexes), 1


@handles(ApiKey.DELETE_TOPICS)
def delete_topics(ctx, body):
    """v0-5 name topics; v6 names them or gives their ids (an unknown id answers
    UNKNOWN_TOPIC_ID with a null name)."""
    if ctx.api_version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
    else:
        wanted = [(name, NO_TOPIC_ID) for name in body["topic_names"]]
    results = []
    for name, topic_id in wanted:
        if name is None:
            name = named_topic({"topic_id": topic_id}, ctx.core.replicas.topics())
            if isinstance(name, dict):
                results.append(name | {"error_message": "unknown topic id"})
                continue
        meta = ctx.core.replicas.topic(name)
        result = {
            "name": name,
            "topic_id": topic_uuid(meta) if meta is not None else NO_TOPIC_ID,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        try:
            ctx.core.replicas.delete_topic(name)
        except TopicError as e:
            result["error_code"], result["error_message"] = e.code, e.message
        results.append(result)
    return {"throttle_time_ms": 0, "responses": results}


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
        if rtype == RESOURCE_TOPIC:
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
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == SOURCE_DEFAULT,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": synonyms,
        "config_type": config_type,
        "documentation": doc,
    }


def _topic_entries(core, name: str, result: dict) -> list[dict]:
    try:
        validate_topic_name(name)
    except InvalidTopicName as e:
        result["error_code"], result["error_message"] = ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)
        return []
    meta = core.replicas.topic(name)
    if meta is None:
        result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        result["error_message"] = f"Topic {name} does not exist."
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
    if name not in ("", str(core.broker_id)):
        result["error_code"] = ErrorCode.INVALID_REQUEST
        result["error_message"] = f"This is broker {core.broker_id}, not {name}"
        return []
    entries = []
    for key, value, is_default in core.config.describe():
        source = SOURCE_DEFAULT if is_default else SOURCE_STATIC_BROKER
        spec = KEYS[key]
        synonyms = [{"name": key, "value": value, "source": source}]
        entries.append(
            _entry(key, value, True, source, synonyms, _BROKER_TYPES[spec.type], spec.doc)
        )
    return entries
