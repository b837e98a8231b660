"""`logflume groups`: list, describe, reset, delete consumer groups and share groups
and their offsets (like kafka-consumer-groups.sh and kafka-share-groups.sh, with their
flags).

`--list` prints the group ids; `--list --type` adds each group's type (classic or
consumer: KIP-848's consumer group protocol) and `--list --type consumer` lists only
groups of that type, as kafka-consumer-groups.sh --list --type.

`--describe --group G` prints one row per partition the group has committed or
been assigned: committed offset, log end offset, lag and the member that owns it;
`--members` prints one row per member with its assignment instead.

`--reset-offsets` moves the committed offsets of an inactive group (no members, as
Kafka requires) for `--topic T` / `--topic T:0,2` / `--all-topics`: `--to-earliest`,
`--to-latest`, `--to-current`, `--to-offset N`, `--shift-by N`, `--to-datetime
2026-11-25T06:00:00.000` (local time unless it ends in Z or +hh:mm) or `--by-duration
PnDTnHnMnS`; new offsets are kept within the log start and end. Without `--execute`
it only prints the plan (`--dry-run`). `--delete` deletes whole (inactive) groups;
`--delete-offsets --topic T` deletes one group's offsets of T (Kafka's OffsetDelete:
refused for topics a live member subscribes to).

Share groups (KIP-932) are handled as kafka-share-groups.sh handles them, found by
their id (ShareGroupDescribe on the group's coordinator, where the broker serves
share groups) or named so with `--type share`: `--list --type share` lists them (and
`--list --type` shows their TYPE, share); `--describe` prints each share-partition's
LEADER-EPOCH, START-OFFSET and LAG (the log end offset minus the start offset: the
records not yet past the share-partition start, those in flight included),
`--members` the members and their assignments, `--state` the coordinator, state and
member count (consumer groups too); `--reset-offsets` sets the start offsets of an
empty share group (`--to-earliest`, `--to-latest`, `--to-datetime`, `--to-offset`;
`--dry-run` or `--execute`): the next share consumer starts there; `--delete` deletes
an empty share group with its durable state; `--delete-offsets --topic T` removes
T's share-partitions from an empty share group.

Works against any Kafka-compatible broker: confluent-kafka's AdminClient for groups
and offsets, a Consumer's watermarks for log end offsets, and for OffsetDelete and
the share-group APIs, which confluent-kafka does not offer, the broker's own codec
(broker/protocol/client.BlockingClient, logflume/share_admin.py), connecting with
TLS and SASL as --command-config says (logflume/wire_config.py).
"""

import dataclasses
import re
import sys
import time
from datetime import datetime

from logflume import client_config
from logflume.share_admin import ShareAdmin, ShareAdminError, ShareGroupInfo
from logflume.table import Table, add_output_argument


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "groups",
        help="list, describe, reset or delete consumer and share groups",
        description="Inspect and manage consumer groups and share groups on a "
        "Kafka-compatible broker (like kafka-consumer-groups.sh and kafka-share-groups.sh).",
    )
    client_config.add_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list group ids")
    action.add_argument("--describe", action="store_true", help="offsets and lag of a group")
    action.add_argument("--reset-offsets", action="store_true", help="move committed offsets")
    action.add_argument("--delete", action="store_true", help="delete inactive groups")
    action.add_argument("--delete-offsets", action="store_true", help="delete a group's offsets")
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument("--members", action="store_true", help="--describe: one row per member")
    p.add_argument(
        "--state", action="store_true", help="--describe: the coordinator, state and members"
    )
    p.add_argument(
        "--offsets", action="store_true", help="--describe: one row per partition (the default)"
    )
    p.add_argument(
        "--type",
        nargs="*",
        metavar="TYPE",
        choices=("classic", "consumer", "share"),
        help="--list: show each group's type; with types, only groups of those types "
        "(share: the groups named are share groups)",
    )
    p.add_argument("--topic", action="append", default=[], help="TOPIC or TOPIC:P,P (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic")
    spec = p.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    spec.add_argument("--to-latest", action="store_true", help="reset to the log end")
    spec.add_argument(
        "--to-current", action="store_true", help="reset to the committed offset (or the end)"
    )
    spec.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    spec.add_argument(
        "--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)"
    )
    spec.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset to the first record at or after this time",
    )
    spec.add_argument(
        "--by-duration", metavar="PnDTnHnMnS", help="reset to the first record this long ago"
    )
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="print the plan (default)")
    run_mode.add_argument("--execute", action="store_true", help="apply the reset")
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    add_output_argument(p)
    p.set_defaults(func=run)


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def run(args) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from broker.protocol import ProtocolError

    if not args.list and not args.group:
        return fail("--group is required")
    if args.delete_offsets and (len(args.group) != 1 or not args.topic):
        return fail("--delete-offsets needs one --group and --topic")
    if args.members + args.state + args.offsets > 1:
        return fail("--members, --state and --offsets are exclusive")
    timeout = args.timeout_ms / 1000
    try:
        shares = _share_groups(args, timeout)
    except ShareLookupError as e:
        return fail(str(e))
    if args.delete_offsets and (shares is None or not shares.groups):
        return _delete_offsets(args, timeout)
    try:
        conf = client_config.client_config(args, **{"socket.timeout.ms": args.timeout_ms})
        admin = AdminClient(conf)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return fail(client_config.describe_error(e))
    try:
        if args.list:
            return _list(admin, args, timeout)
        if shares is not None and shares.groups:
            return _share_run(admin, conf, args, shares, timeout)
        if args.reset_offsets:
            return _reset(admin, args, timeout)
        if args.delete:
            return _delete(admin, args, timeout)
        header = _describe_header(args)
        rows = Table(header) if args.output_format == "json" else None
        status = max(_describe(admin, conf, args, group, timeout, rows) for group in args.group)
        if rows is not None:
            rows.print("json")
        return status
    except (KafkaException, ValueError, OSError, ShareAdminError, ProtocolError) as e:
        return fail(client_config.request_error(e, admin, args))


def _describe_header(args) -> list[str]:
    if args.members:
        return MEMBERS_HEADER
    return STATE_HEADER if args.state else OFFSETS_HEADER


def _list(admin, args, timeout: float) -> int:
    from confluent_kafka import ConsumerGroupType, KafkaException

    wanted = set(args.type or ())
    share_states = _share_listing(args, timeout) if not wanted or "share" in wanted else {}
    rows: dict[str, tuple[str | None, str | None]] = {}  # group -> (state, type)
    if wanted != {"share"}:
        kinds = {ConsumerGroupType[t.upper()] for t in wanted - {"share"}}
        listed = admin.list_consumer_groups(request_timeout=timeout, types=kinds).result(timeout)
        if listed.errors:  # e.g. the request's own timeout, after a failed login
            raise KafkaException(listed.errors[0])
        for g in listed.valid:
            known = g.type is not None and g.type != ConsumerGroupType.UNKNOWN
            rows[g.group_id] = (
                g.state.name if g.state is not None else None,
                g.type.name.lower() if known else None,
            )
    for group_id, share_state in share_states.items():
        rows[group_id] = (share_state.upper(), "share")
    groups = sorted(rows.items())
    if args.output_format == "json":
        table = Table(["GROUP", "STATE", "TYPE"])
        for group_id, (state, kind) in groups:
            table.add(group_id, state, kind)
        table.print("json")
    elif args.type is not None:
        table = Table(["GROUP", "TYPE"])
        for group_id, (_, kind) in groups:
            table.add(group_id, kind)
        table.print()
    else:
        for group_id, _ in groups:
            print(group_id)
    return 0


OFFSETS_HEADER = [
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
MEMBERS_HEADER = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
STATE_HEADER = ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"]


def _describe(admin, conf: dict, args, group: str, timeout: float, rows: Table | None) -> int:
    """Print `group`'s table, or add its rows to `rows` (JSON: one array for all)."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions

    desc = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout)
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
    )[group].result(timeout)
    committed = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions}
    if desc.state == ConsumerGroupState.DEAD and not committed:
        return fail(f"Consumer group '{group}' does not exist.")
    if not desc.members and not args.state:
        print(
            f"\nConsumer group '{group}' has no active members.",
            file=sys.stdout if rows is None else sys.stderr,
        )
    table = rows if rows is not None else Table(_describe_header(args))
    if args.members:
        _members(table, group, desc.members)
    elif args.state:
        c = desc.coordinator
        state = desc.state.name.title().replace("_", "")
        table.add(group, f"{c.host}:{c.port} ({c.id})", state, len(desc.members))
    else:
        _offsets(table, conf, group, desc.members, committed, timeout)
    if rows is None:
        print()
        table.print()
    return 0


def _offsets(table: Table, conf: dict, group: str, members, committed, timeout: float) -> None:
    owner = {}
    for m in members:
        for tp in m.assignment.topic_partitions if m.assignment else []:
            owner[(tp.topic, tp.partition)] = m
    keys = sorted(set(committed) | set(owner))
    ends = _log_end_offsets(conf, keys, timeout)
    for key in keys:
        current = committed.get(key, -1)
        end = ends.get(key)
        member = owner.get(key)
        table.add(
            group,
            key[0],
            key[1],
            current if current >= 0 else None,
            end,
            max(end - current, 0) if current >= 0 and end is not None else None,
            member.member_id if member else None,
            member.host if member else None,
            member.client_id if member else None,
        )


def _members(table: Table, group: str, members) -> None:
    for m in members:
        tps = sorted(
            (tp.topic, tp.partition)
            for tp in (m.assignment.topic_partitions if m.assignment else [])
        )
        table.add(group, m.member_id, m.host, m.client_id, len(tps), _assignment(tps))


def _assignment(tps: list[tuple[str, int]]) -> str | None:
    """kafka-consumer-groups' ASSIGNMENT column: `t(0,1), u(2)`."""
    by_topic: dict[str, list[str]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(str(partition))
    return ", ".join(f"{t}({','.join(ps)})" for t, ps in by_topic.items()) or None


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


# -- --reset-offsets ---------------------------------------------------------------------


PLAN_HEADER = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


def _show_plan(planned: Table, group: str, plan: dict, json_out: bool) -> None:
    """A group's new offsets: printed as its own table, or added to `planned` (all
    groups' rows, printed once as JSON at the end)."""
    table = planned if json_out else Table(planned.header)
    for (t, p), o in sorted(plan.items()):
        table.add(group, t, p, o)
    if not json_out:
        print()
        table.print()


def _warn_without_execute(args) -> bool:
    """kafka-consumer-groups' warning when a reset has neither --execute nor --dry-run
    (on stderr under --output json, to keep stdout JSON); whether the output is JSON."""
    json_out = args.output_format == "json"
    if not args.execute and not args.dry_run:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "Use --dry-run to print the plan only, --execute to apply it.",
            file=sys.stderr if json_out else sys.stdout,
        )
    return json_out


def _reset(admin, args, timeout: float) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

    specs = (
        args.to_earliest,
        args.to_latest,
        args.to_current,
        args.to_offset,
        args.shift_by,
        args.to_datetime,
        args.by_duration,
    )
    if all(v in (None, False) for v in specs):
        return fail(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
            "--to-offset, --shift-by, --to-datetime, --by-duration"
        )
    if not args.topic and not args.all_topics:
        return fail("--reset-offsets needs --topic or --all-topics")
    json_out = _warn_without_execute(args)
    status = 0
    planned = Table(PLAN_HEADER)
    for group in args.group:
        desc = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
        state = desc.result(timeout).state
        if state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
            print(
                f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {state.name.title().replace('_', '')}.",
                file=sys.stderr,
            )
            status = 1
            continue
        committed = _committed(admin, group, timeout)
        partitions = _partitions(admin, args, committed, timeout)
        plan = _new_offsets(admin, args, partitions, committed, timeout)
        _show_plan(planned, group, plan, json_out)
        if args.execute and plan:
            tps = [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())]
            request = [ConsumerGroupTopicPartitions(group, tps)]
            admin.alter_consumer_group_offsets(request, request_timeout=timeout)[group].result(
                timeout
            )
    if json_out:
        planned.print("json")
    return status


def _committed(admin, group: str, timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
    )[group].result(timeout)
    return {
        (tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions if tp.offset >= 0
    }


def _partitions(admin, args, committed, timeout: float) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    metadata = admin.list_topics(timeout=timeout)
    out = []
    for item in args.topic:
        topic, numbers = topic_spec(item)
        if topic not in metadata.topics:
            raise ValueError(f"Topic '{topic}' does not exist")
        known = sorted(metadata.topics[topic].partitions)
        wanted = numbers if numbers is not None else known
        unknown = [n for n in wanted if n not in known]
        if unknown:
            raise ValueError(f"Topic '{topic}' has no partition {unknown[0]}")
        out += [(topic, n) for n in wanted]
    return out


def topic_spec(item: str) -> tuple[str, list[int] | None]:
    """kafka-consumer-groups' --topic: `T` (every partition: None) or `T:0,2`."""
    topic, sep, numbers = item.partition(":")
    parts = [n.strip() for n in numbers.split(",")] if sep else []
    if not topic.strip() or not all(n.isdigit() for n in parts):
        raise ValueError(f"--topic {item!r}: expected TOPIC or TOPIC:PARTITION,...")
    return topic.strip(), [int(n) for n in parts] if sep else None


def _new_offsets(admin, args, partitions, committed, timeout: float) -> dict:
    from confluent_kafka.admin import OffsetSpec

    earliest = _list_offsets(admin, partitions, OffsetSpec.earliest(), timeout)
    latest = _list_offsets(admin, partitions, OffsetSpec.latest(), timeout)

    def clamp(tp, offset: int) -> int:
        return min(max(offset, earliest[tp]), latest[tp])

    if args.to_earliest:
        return dict(earliest)
    if args.to_latest:
        return dict(latest)
    if args.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.shift_by is not None:
        return {tp: clamp(tp, committed.get(tp, latest[tp]) + args.shift_by) for tp in partitions}
    if args.to_datetime is not None:
        ts_ms = parse_datetime(args.to_datetime)
    else:
        ts_ms = int(time.time() * 1000) - parse_duration(args.by_duration)
    found = _list_offsets(admin, partitions, OffsetSpec.for_timestamp(ts_ms), timeout)
    return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}


def _list_offsets(admin, partitions, spec, timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    request = {TopicPartition(t, p): spec for t, p in partitions}
    futures = admin.list_offsets(request, request_timeout=timeout)
    return {(tp.topic, tp.partition): f.result(timeout).offset for tp, f in futures.items()}


def parse_datetime(text: str) -> int:
    """kafka-consumer-groups' --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss', local time
    unless followed by Z or an offset; -> epoch milliseconds."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration as kafka-consumer-groups' --by-duration takes it
    (PnDTnHnMnS) -> milliseconds."""
    m = _DURATION.match(text.strip().upper())
    if not m or not any(m.groupdict().values()):
        raise ValueError(f"--by-duration {text!r}: expected PnDTnHnMnS, e.g. PT1H30M")
    days, hours, minutes = (int(m[k] or 0) for k in "dhm")
    seconds = float(m["s"] or 0)
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


# -- --delete, --delete-offsets ---------------------------------------------------------


def _delete(admin, args, timeout: float, kind: str = "consumer") -> int:
    """DeleteGroups (a share group's too: the broker deletes its durable state)."""
    futures = admin.delete_consumer_groups(args.group, request_timeout=timeout)
    failed = {}
    for group, future in futures.items():
        try:
            future.result(timeout)
        except Exception as e:  # noqa: BLE001 - each group's error is reported
            failed[group] = client_config.describe_error(e, admin)
    done = [g for g in args.group if g not in failed]
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        print(f"Deletion of requested {kind} groups ({names}) was successful.")
    if failed:
        print(f"Error: Deletion of some {kind} groups failed:", file=sys.stderr)
        for group, message in failed.items():
            print(f"* Group '{group}' could not be deleted due to: {message}", file=sys.stderr)
        return 1
    return 0


def _delete_offsets(args, timeout: float) -> int:
    """OffsetDelete through the group's coordinator (FindCoordinator first)."""
    from broker.protocol.client import SaslAuthenticationError, SaslClientError
    from logflume import wire_config

    try:
        return _offset_delete(args, wire_config.security(args), timeout)
    except (SaslAuthenticationError, SaslClientError, ValueError) as e:
        return fail(str(e))
    except OSError as e:  # refused, timed out, closed, TLS
        where = f"{args.bootstrap_server} within {args.timeout_ms} ms"
        return fail(f"cannot reach {where} ({e.strerror or e})")


def _offset_delete(args, security, timeout: float) -> int:
    from broker.protocol import ApiKey, ErrorCode
    from broker.protocol.client import BlockingClient
    from common.hostport import parse_hostport

    group = args.group[0]
    topics = dict(topic_spec(item) for item in args.topic)
    host, port = parse_hostport(args.bootstrap_server.split(",")[0], "--bootstrap-server")
    with BlockingClient(host, port, timeout, security=security) as client:
        found = client.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
        if found["error_code"]:
            return fail(
                f"no coordinator for group '{group}': {ErrorCode(found['error_code']).name}"
            )
        meta = client.request(ApiKey.METADATA, 1, {"topics": [{"name": t} for t in topics]})
    counts = {t["name"]: len(t["partitions"]) for t in meta["topics"] if not t["error_code"]}
    body_topics = []
    for topic, numbers in topics.items():
        wanted = numbers if numbers is not None else list(range(counts.get(topic, 0)))
        body_topics.append({"name": topic, "partitions": [{"partition_index": n} for n in wanted]})
    with BlockingClient(found["host"], found["port"], timeout, security=security) as coordinator:
        answer = coordinator.request(
            ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": body_topics}
        )
    if answer["error_code"]:
        return fail(f"Encounter some unknown error: {ErrorCode(answer['error_code']).name}")
    table, status = Table(["TOPIC", "PARTITION", "STATUS"]), 0
    for t in answer["topics"]:
        for p in t["partitions"]:
            code = ErrorCode(p["error_code"])
            table.add(
                t["name"], p["partition_index"], "Successful" if not code else f"Error: {code.name}"
            )
            status |= bool(code)
    if args.output_format == "json":
        table.print("json")
        return status
    print(f"Request succeed for deleting offsets from group '{group}'.")
    print()
    table.print()
    return status


# -- share groups (KIP-932) ------------------------------------------------------------


class ShareLookupError(Exception):
    """The groups named cannot be told apart (or, with --type share, reached)."""


@dataclasses.dataclass(slots=True)
class ShareGroups:
    """The share groups among --group: id -> what ShareGroupDescribe says (None: not
    there, for a group named a share group by --type share)."""

    admin: ShareAdmin
    groups: dict[str, ShareGroupInfo | None]


def _share_admin(args, timeout: float, explicit: bool) -> ShareAdmin | None:
    """A ShareAdmin when the broker serves share groups; None otherwise (or when this
    command cannot speak to it itself and share groups were not asked for)."""
    from broker.protocol import ProtocolError
    from broker.protocol.client import SaslAuthenticationError, SaslClientError
    from logflume import wire_config

    try:
        admin = ShareAdmin(args.bootstrap_server, wire_config.security(args), timeout)
        if admin.supported():
            return admin
        problem = "the broker serves no share groups"
    except (
        client_config.CommandConfigError,
        SaslAuthenticationError,
        SaslClientError,
        ProtocolError,
        ValueError,
        OSError,
    ) as e:
        problem = str(e)
    if explicit:
        raise ShareLookupError(problem)
    return None


def _share_groups(args, timeout: float) -> ShareGroups | None:
    if args.list:
        return None
    explicit = args.type is not None and "share" in args.type
    admin = _share_admin(args, timeout, explicit)
    if admin is None:
        return None
    found: dict[str, ShareGroupInfo | None] = {}
    for group in args.group:
        try:
            info = admin.describe(group)
        except (ShareAdminError, OSError) as e:
            if explicit:
                raise ShareLookupError(f"share group '{group}': {e}") from None
            continue
        if info is not None or explicit:
            found[group] = info
    if found and len(found) != len(set(args.group)):
        raise ShareLookupError("share groups and consumer groups cannot be named together")
    return ShareGroups(admin, found)


def _share_listing(args, timeout: float) -> dict[str, str]:
    """Share group id -> state, of every broker; {} where there are none."""
    explicit = args.type is not None and "share" in args.type
    admin = _share_admin(args, timeout, explicit)
    return dict(admin.list_groups()) if admin is not None else {}


SHARE_OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]


def _share_run(admin, conf: dict, args, shares: ShareGroups, timeout: float) -> int:
    if args.reset_offsets:
        return _share_reset(admin, args, shares, timeout)
    if args.delete_offsets:
        return _share_delete_offsets(args, shares)
    if args.delete:
        return _delete(admin, args, timeout, kind="share")
    header = _describe_header(args) if args.members or args.state else SHARE_OFFSETS_HEADER
    json_out = args.output_format == "json"
    rows = Table(header)
    status = 0
    for group, info in shares.groups.items():
        if info is None:
            status = fail(f"Share group '{group}' does not exist.")
            continue
        table = rows if json_out else Table(header)
        if not info.members and not args.state:
            print(
                f"\nShare group '{group}' has no active members.",
                file=sys.stderr if json_out else sys.stdout,
            )
        if args.members:
            for m in info.members:
                tps = [(t, p) for t, ps in sorted(m.assignment.items()) for p in ps]
                table.add(group, m.member_id, m.host, m.client_id, len(tps), _assignment(tps))
        elif args.state:
            node, host, port = shares.admin.coordinator(group)
            table.add(group, f"{host}:{port} ({node})", info.state, len(info.members))
        else:
            _share_offsets(table, conf, group, shares.admin.offsets(group), timeout)
        if not json_out:
            print()
            table.print()
    if json_out:
        rows.print("json")
    return status


def _share_offsets(table: Table, conf: dict, group: str, offsets: dict, timeout: float) -> None:
    ends = _log_end_offsets(conf, sorted(offsets), timeout)
    for (topic, partition), (start, epoch, code) in sorted(offsets.items()):
        if code:
            print(f"Error: {topic}-{partition}: {code.name}", file=sys.stderr)
            continue
        end = ends.get((topic, partition))
        lag = max(end - start, 0) if start >= 0 and end is not None else None
        table.add(
            group,
            topic,
            partition,
            epoch if epoch >= 0 else None,
            start if start >= 0 else None,
            lag,
        )


def _share_reset(admin, args, shares: ShareGroups, timeout: float) -> int:
    if args.to_current or args.shift_by is not None or args.by_duration is not None:
        return fail(
            "a share group's offsets reset --to-earliest, --to-latest, --to-datetime or --to-offset"
        )
    if not (args.to_earliest or args.to_latest or args.to_datetime or args.to_offset is not None):
        return fail(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-datetime, --to-offset"
        )
    if not args.topic and not args.all_topics:
        return fail("--reset-offsets needs --topic or --all-topics")
    json_out = _warn_without_execute(args)
    planned = Table(PLAN_HEADER)
    status = 0
    for group, info in shares.groups.items():
        if info is not None and info.state != "Empty":
            status = fail(
                f"Share group '{group}' offsets can only be reset if the group is inactive, "
                f"but the current state is {info.state}."
            )
            continue
        if args.all_topics:
            partitions = sorted(shares.admin.offsets(group)) if info is not None else []
        else:
            partitions = _partitions(admin, args, {}, timeout)
        plan = _new_offsets(admin, args, partitions, {}, timeout)
        _show_plan(planned, group, plan, json_out)
        if args.execute and plan:
            for (t, p), code in sorted(shares.admin.alter(group, plan).items()):
                if code:
                    status = fail(f"{group}: {t}-{p} not reset: {code.name}")
    if json_out:
        planned.print("json")
    return status


def _share_delete_offsets(args, shares: ShareGroups) -> int:
    (group,) = shares.groups
    topics = []
    for item in args.topic:
        topic, numbers = topic_spec(item)
        if numbers is not None:
            return fail("a share group's offsets are deleted by whole topics: --topic TOPIC")
        topics.append(topic)
    results = shares.admin.delete_offsets(group, topics)
    table, status = Table(["TOPIC", "STATUS"]), 0
    for topic in topics:
        code = results.get(topic)
        table.add(topic, "Successful" if not code else f"Error: {code.name}")
        status |= bool(code)
    if args.output_format == "json":
        table.print("json")
        return status
    print(f"Request succeeded for deleting offsets from group '{group}'.")
    print()
    table.print()
    return status
