"""`logflume groups`: list and describe consumer groups (like kafka-consumer-groups.sh).

`--describe --group G` prints one row per partition the group has committed or
been assigned: committed offset, log end offset, lag and the member that owns it;
`--members` prints one row per member with its assignment instead. Works against any
Kafka-compatible broker: confluent-kafka's AdminClient for groups and offsets, a
Consumer's watermarks for log end offsets.
"""

import sys

_NONE = "-"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "groups",
        help="list or describe consumer groups",
        description="Inspect consumer groups on a Kafka-compatible broker "
        "(like kafka-consumer-groups.sh).",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list group ids")
    action.add_argument("--describe", action="store_true", help="offsets and lag of a group")
    p.add_argument("--group", help="the group to describe")
    p.add_argument("--members", action="store_true", help="--describe: one row per member")
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    p.set_defaults(func=run)


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def run(args) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    if args.describe and not args.group:
        return fail("--group is required with --describe")
    conf = {
        "bootstrap.servers": args.bootstrap_server,
        "socket.timeout.ms": args.timeout_ms,
        "log_level": 0,
        "logger": _Quiet(),
    }
    timeout = args.timeout_ms / 1000
    admin = AdminClient(conf)
    try:
        if args.list:
            listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
            for g in sorted(listed.valid, key=lambda g: g.group_id):
                print(g.group_id)
            return 0
        return _describe(admin, conf, args, timeout)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        return fail(err.str() if hasattr(err, "str") else str(err))


def _describe(admin, conf: dict, args, timeout: float) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions

    group = args.group
    desc = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout)
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
    )[group].result(timeout)
    committed = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions}
    if desc.state == ConsumerGroupState.DEAD and not committed:
        return fail(f"Consumer group '{group}' does not exist.")
    if not desc.members:
        print(f"\nConsumer group '{group}' has no active members.")
    if args.members:
        _print_members(group, desc.members)
        return 0
    owner = {}
    for m in desc.members:
        for tp in m.assignment.topic_partitions if m.assignment else []:
            owner[(tp.topic, tp.partition)] = m
    keys = sorted(set(committed) | set(owner))
    ends = _log_end_offsets(conf, keys, timeout)
    rows = []
    for key in keys:
        current = committed.get(key, -1)
        end = ends.get(key)
        member = owner.get(key)
        rows.append(
            [
                group,
                key[0],
                str(key[1]),
                str(current) if current >= 0 else _NONE,
                str(end) if end is not None else _NONE,
                str(max(end - current, 0)) if current >= 0 and end is not None else _NONE,
                member.member_id if member else _NONE,
                member.host if member else _NONE,
                member.client_id if member else _NONE,
            ]
        )
    header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    _print_table(header, rows)
    return 0


def _print_members(group: str, members) -> None:
    rows = []
    for m in members:
        tps = sorted(
            (tp.topic, tp.partition)
            for tp in (m.assignment.topic_partitions if m.assignment else [])
        )
        by_topic: dict[str, list[str]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(str(partition))
        assignment = ", ".join(f"{t}({','.join(ps)})" for t, ps in by_topic.items()) or _NONE
        rows.append([group, m.member_id, m.host, m.client_id, str(len(tps)), assignment])
    _print_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], rows)


def _log_end_offsets(conf: dict, keys, timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({**conf, "group.id": "logflume-groups-cli", "enable.auto.commit": False})
    ends = {}
    try:
        for topic, partition in keys:
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout
                )
            except KafkaException:
                continue
            ends[(topic, partition)] = high
    finally:
        consumer.close()
    return ends


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for r in [header, *rows]:
        print(" ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


class _Quiet:
    """A logger for librdkafka that drops its chatter (connection refused ...)."""

    def log(self, *args, **kwargs) -> None:
        return None

    def __getattr__(self, name):
        return self.log
