"""`logflume topics`: create, list, describe, alter and delete topics (like
kafka-topics.sh, with its flags).

`--alter --partitions N` adds partitions (never removes: Kafka refuses). `--describe`
takes kafka-topics' filters: `--under-replicated-partitions` (ISR smaller than the
replicas), `--unavailable-partitions` (no live leader), `--under-min-isr-partitions`
(ISR smaller than the topic's min.insync.replicas); with a filter, only the matching
partition lines are printed. The internal topics (`__consumer_offsets`,
`__transaction_state`) are neither deleted nor altered, as kafka-topics refuses. Works against any Kafka-compatible broker through
confluent-kafka's AdminClient.

`--output json` (logflume/table.py): `--list` prints an array of topic names,
`--describe` one object per topic, `{"topic", "partition_count", "replication_factor",
"configs": {name: value}, "partitions": [{"partition", "leader", "replicas", "isr"}]}`
(leader null when there is none, -1 in text); with a filter, only the topics with a
matching partition, and only those partitions.
"""

import sys

from common.topic_names import is_internal
from logflume import client_config
from logflume.table import add_output_argument, print_json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "topics",
        help="create, list, describe, alter or delete topics",
        description="Manage topics on a Kafka-compatible broker (like kafka-topics.sh).",
    )
    client_config.add_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create --topic")
    action.add_argument("--list", action="store_true", help="list topic names")
    action.add_argument(
        "--describe", action="store_true", help="partitions, leaders, replicas and ISR"
    )
    action.add_argument("--alter", action="store_true", help="add partitions (--partitions)")
    action.add_argument("--delete", action="store_true", help="delete --topic")
    p.add_argument("--topic", help="the topic (--describe: default all)")
    p.add_argument(
        "--partitions",
        type=int,
        default=-1,
        help="--create: partition count (default num.partitions); --alter: the new count",
    )
    p.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="--create: copies of each partition (default: default.replication.factor)",
    )
    p.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="topic config"
    )
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if it exists")
    p.add_argument("--if-exists", action="store_true", help="--alter/--delete: no error if absent")
    filters = p.add_mutually_exclusive_group()
    filters.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="--describe: partitions whose ISR is smaller than their replicas",
    )
    filters.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="--describe: partitions without a live leader",
    )
    filters.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="--describe: partitions whose ISR is smaller than min.insync.replicas",
    )
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    add_output_argument(
        p,
        "--describe, --list: text as kafka-topics prints it (the default), or json: an "
        "array with an object per topic (--list: of names)",
    )
    p.set_defaults(func=run)


def fail(message: str) -> int:
    print(f"Error while executing topic command : {message}", file=sys.stderr)
    return 1


def run(args) -> int:
    from confluent_kafka import KafkaException

    if (args.create or args.delete or args.alter) and not args.topic:
        return fail("--topic is required with --create, --alter and --delete")
    if args.alter and args.partitions < 1:
        return fail("--alter needs --partitions N (the new partition count)")
    if args.create and (args.partitions == 0 or args.partitions < -1):
        return fail("The partitions must be greater than 0")
    if args.create and not (args.replication_factor == -1 or 1 <= args.replication_factor <= 32767):
        return fail("The replication factor must be between 1 and 32767 inclusive")
    configs = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            return fail(f"--config {item!r}: expected KEY=VALUE")
        configs[key] = value
    timeout = args.timeout_ms / 1000
    try:
        admin = client_config.admin_client(args)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return fail(client_config.describe_error(e))
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        return fail(client_config.request_error(e, admin, args))
    try:
        if args.create:
            return _create(admin, metadata, args, configs, timeout)
        if args.delete:
            return _delete(admin, metadata, args, timeout)
        if args.alter:
            return _alter(admin, metadata, args, timeout)
        if args.list:
            if args.output_format == "json":
                print_json(sorted(metadata.topics))
                return 0
            for name in sorted(metadata.topics):
                print(name)
            return 0
        return _describe(admin, metadata, args, timeout)
    except (KafkaException, ValueError, TimeoutError) as e:  # ValueError: confluent-kafka's checks
        return fail(client_config.request_error(e, admin, args))


def _create(admin, metadata, args, configs, timeout) -> int:
    from confluent_kafka.admin import NewTopic

    if args.if_not_exists and args.topic in metadata.topics:
        return 0
    topic = NewTopic(args.topic, args.partitions, args.replication_factor, config=configs)
    futures = admin.create_topics([topic], request_timeout=timeout)
    futures[args.topic].result(timeout)
    print(f"Created topic {args.topic}.")
    return 0


def _delete(admin, metadata, args, timeout) -> int:
    if args.topic not in metadata.topics:
        return 0 if args.if_exists else fail(f"Topic '{args.topic}' does not exist as expected")
    if is_internal(args.topic):
        return fail(
            f"Topic {args.topic} is a kafka internal topic and is not allowed to be marked "
            "for deletion."
        )
    admin.delete_topics([args.topic], request_timeout=timeout)[args.topic].result(timeout)
    print(f"Deleted topic {args.topic}.")
    return 0


def _alter(admin, metadata, args, timeout) -> int:
    from confluent_kafka.admin import NewPartitions

    if args.topic not in metadata.topics:
        return 0 if args.if_exists else fail(f"Topic '{args.topic}' does not exist as expected")
    if is_internal(args.topic):
        return fail(
            f"The number of partitions for the internal topic {args.topic} cannot be changed."
        )
    futures = admin.create_partitions(
        [NewPartitions(args.topic, args.partitions)], request_timeout=timeout
    )
    futures[args.topic].result(timeout)
    print(f"Altered topic {args.topic}: {args.partitions} partitions.")
    return 0


def _describe(admin, metadata, args, timeout) -> int:
    from confluent_kafka.admin import ConfigResource, ConfigSource

    names = sorted(metadata.topics) if not args.topic else [args.topic]
    if args.topic and args.topic not in metadata.topics:
        return fail(f"Topic '{args.topic}' does not exist as expected")
    resources = [ConfigResource("topic", n) for n in names]
    configs = admin.describe_configs(resources, request_timeout=timeout) if resources else {}
    overrides: dict[str, dict[str, str]] = {}
    min_isr = {}
    for res, future in configs.items():
        entries = future.result(timeout)
        overrides[res.name] = {
            e.name: e.value
            for e in sorted(entries.values(), key=lambda e: e.name)
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        }
        entry = entries.get("min.insync.replicas")
        min_isr[res.name] = int(entry.value) if entry is not None and entry.value else 1
    live = set(metadata.brokers)
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    filtered = filtered or args.under_min_isr_partitions
    described = []
    for name in names:
        topic = metadata.topics[name]
        parts = sorted(topic.partitions.values(), key=lambda p: p.id)
        rf = len(parts[0].replicas) if parts else 0
        config = overrides.get(name, {})
        if not filtered and args.output_format == "text":
            shown = ",".join(f"{k}={v}" for k, v in config.items())
            print(
                f"Topic: {name}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\t"
                f"Configs: {shown}"
            )
        rows = []
        for p in parts:
            if args.under_replicated_partitions and len(p.isrs) >= len(p.replicas):
                continue
            if args.unavailable_partitions and p.leader in live:
                continue
            if args.under_min_isr_partitions and len(p.isrs) >= min_isr[name]:
                continue
            rows.append(
                {"partition": p.id, "leader": p.leader if p.leader >= 0 else None,
                 "replicas": list(p.replicas), "isr": list(p.isrs)}
            )  # fmt: skip
            if args.output_format == "text":
                replicas = ",".join(map(str, p.replicas))
                isr = ",".join(map(str, p.isrs))
                print(
                    f"\tTopic: {name}\tPartition: {p.id}\tLeader: {p.leader}\t"
                    f"Replicas: {replicas}\tIsr: {isr}"
                )
        if rows or not filtered:
            described.append(
                {"topic": name, "partition_count": len(parts), "replication_factor": rf,
                 "configs": config, "partitions": rows}
            )  # fmt: skip
    if args.output_format == "json":
        print_json(described)
    return 0
