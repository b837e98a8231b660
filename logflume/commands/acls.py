"""`logflume acls`: add, list and remove ACLs (like kafka-acls.sh, with its flags).

Resources: `--topic T`, `--group G`, `--transactional-id X` (each repeatable) and
`--cluster`, with `--resource-pattern-type literal|prefixed` (and, for --list and
--remove, `match` or `any`). `--add` makes one binding per resource x principal x
host x operation: `--allow-principal P [--allow-host H]` and/or `--deny-principal P
[--deny-host H]` (hosts default to `*`), `--operation` repeatable (default All).
`--producer` means WRITE, DESCRIBE and CREATE on the topics (and WRITE, DESCRIBE on
the transactional ids; `--idempotent` adds IDEMPOTENT_WRITE on the cluster),
`--consumer` READ and DESCRIBE on the topics and READ on the groups, as kafka-acls.
`--remove` deletes the bindings matching the same options (every binding of the
resources when no principal or operation is given); it asks first unless `--force`.
`--list` prints the bindings of the resources given (of every resource without one),
optionally only those of `--principal P`; with `--output json` (logflume/table.py),
an array with one object per binding, `{"resource_type", "resource_name",
"pattern_type", "principal", "host", "operation", "permission_type"}`, named as the
text prints them (TOPIC, PREFIXED, READ, ALLOW). Works against any Kafka-compatible
broker through confluent-kafka's AdminClient.
"""

import argparse
import itertools
import sys

from logflume import client_config
from logflume.table import Table, add_output_argument

CLUSTER_NAME = "kafka-cluster"
_OPERATIONS = (
    "All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
    "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
)  # fmt: skip


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "acls",
        help="add, list or remove ACLs",
        description="Manage the ACLs of a Kafka-compatible broker (like kafka-acls.sh).",
    )
    client_config.add_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove matching ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    p.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument(
        "--transactional-id", action="append", default=[], help="a transactional id (repeatable)"
    )
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument(
        "--resource-pattern-type",
        choices=("literal", "prefixed", "match", "any"),
        default="literal",
        help="how resource names match (match/any: --list and --remove only)",
    )
    for kind in ("allow", "deny"):
        p.add_argument(
            f"--{kind}-principal", action="append", default=[], metavar="P",
            help=f"principal to {kind}, e.g. User:alice or User:* (repeatable)",
        )  # fmt: skip
        p.add_argument(
            f"--{kind}-host", action="append", default=[], metavar="H",
            help=f"host the {kind} applies to (repeatable; default *)",
        )  # fmt: skip
    p.add_argument("--principal", action="append", default=[], help="--list: only these")
    p.add_argument(
        "--operation", action="append", default=[], type=_operation_name,
        help="operation (repeatable): " + ", ".join(_OPERATIONS),
    )  # fmt: skip
    p.add_argument("--producer", action="store_true", help="what a producer needs")
    p.add_argument("--consumer", action="store_true", help="what a consumer needs")
    p.add_argument("--idempotent", action="store_true", help="--producer: IdempotentWrite too")
    p.add_argument("--force", action="store_true", help="--remove: do not ask")
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    add_output_argument(
        p,
        "--list: text as kafka-acls prints it (the default), or json: an array with an "
        "object per ACL binding",
    )
    p.set_defaults(func=run)


def _operation_name(text: str) -> str:
    for name in _OPERATIONS:
        if name.lower() == text.replace("_", "").replace("-", "").lower():
            return name
    raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(_OPERATIONS)}")


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def _upper_snake(name: str) -> str:
    return "".join("_" + c if c.isupper() else c for c in name).lstrip("_").upper()


def _resources(args) -> list[tuple[str, str]]:
    out = [("TOPIC", t) for t in args.topic] + [("GROUP", g) for g in args.group]
    out += [("TRANSACTIONAL_ID", x) for x in args.transactional_id]
    return out + ([("CLUSTER", CLUSTER_NAME)] if args.cluster else [])


def _operations(args, rtype: str) -> list[str]:
    """The operations to add or remove on a resource of `rtype`."""
    ops = [_upper_snake(o) for o in args.operation]
    if args.producer:
        ops += {
            "TOPIC": ["WRITE", "DESCRIBE", "CREATE"],
            "TRANSACTIONAL_ID": ["WRITE", "DESCRIBE"],
        }.get(rtype, [])
    if args.consumer:
        ops += {"TOPIC": ["READ", "DESCRIBE"], "GROUP": ["READ"]}.get(rtype, [])
    if args.producer and args.idempotent and rtype == "CLUSTER":
        ops.append("IDEMPOTENT_WRITE")
    return list(dict.fromkeys(ops))


def _entries(args) -> list[tuple[str, str, str]]:
    """(principal, host, permission) from the allow/deny options."""
    out = []
    for principals, hosts, perm in (
        (args.allow_principal, args.allow_host, "ALLOW"),
        (args.deny_principal, args.deny_host, "DENY"),
    ):
        out += [(p, h, perm) for p in principals for h in hosts or ["*"]]
    return out


def _plan_bindings(args, ack):
    """`--add`: the bindings to create (errors as ValueError)."""
    if args.resource_pattern_type not in ("literal", "prefixed"):
        raise ValueError("--add takes --resource-pattern-type literal or prefixed")
    entries = _entries(args)
    if not entries:
        raise ValueError("--add needs --allow-principal or --deny-principal")
    resources = _resources(args)
    if args.producer and args.idempotent:
        resources.append(("CLUSTER", CLUSTER_NAME))
    if not resources:
        raise ValueError("give a resource: --topic, --group, --transactional-id or --cluster")
    if args.consumer and not args.group:
        raise ValueError("--consumer needs --group")
    bindings = []
    for rtype, name in dict.fromkeys(resources):
        ops = _operations(args, rtype) or (["ALL"] if not (args.producer or args.consumer) else [])
        for op in ops:
            for principal, host, perm in entries:
                bindings.append(
                    ack.AclBinding(
                        _resource_type(ack, rtype), name,
                        ack.ResourcePatternType[args.resource_pattern_type.upper()],
                        principal, host, ack.AclOperation[op], ack.AclPermissionType[perm],
                    )
                )  # fmt: skip
    return bindings


def _filters(args, ack) -> list:
    """`--list` / `--remove`: the filters the options describe."""
    pattern = ack.ResourcePatternType[args.resource_pattern_type.upper()]
    resources: list[tuple[str, str | None]] = [*_resources(args)] or [("ANY", None)]
    if not _resources(args):
        pattern = ack.ResourcePatternType.ANY
    principals = args.principal if args.list else None
    entries: list[tuple[str | None, str | None, str | None]]
    entries = [(p, None, None) for p in principals or [None]]
    if args.remove:
        entries = [(p, h, perm) for p, h, perm in _entries(args)] or [(None, None, None)]
    filters = []
    for rtype, name in resources:
        ops = (_operations(args, rtype) if args.remove else []) or ["ANY"]
        for principal, host, perm in entries:
            for op in ops:
                filters.append(
                    ack.AclBindingFilter(
                        _resource_type(ack, rtype), name, pattern, principal, host,
                        ack.AclOperation[op],
                        ack.AclPermissionType[perm] if perm else ack.AclPermissionType.ANY,
                    )
                )  # fmt: skip
    return filters


def _resource_type(ack, rtype: str):
    """confluent-kafka's member for Kafka's resource type `rtype`: it calls the
    cluster resource (Kafka's CLUSTER, 4) BROKER."""
    return ack.ResourceType.BROKER if rtype == "CLUSTER" else ack.ResourceType[rtype]


def _show(bindings, output_format: str = "text") -> None:
    """The bindings under their resource patterns, as kafka-acls prints them, or
    (--output json) one object per binding."""
    header = ["resourceType", "resourceName", "patternType", "principal", "host", "operation",
              "permissionType"]  # fmt: skip
    rows = Table(header)
    for b in bindings:
        rtype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
        rows.add(rtype, b.name, b.resource_pattern_type.name, b.principal, b.host,
                 b.operation.name, b.permission_type.name)  # fmt: skip
    rows.rows.sort(key=lambda r: r[:6])
    if output_format == "json":
        rows.print("json")
        return
    for (rtype, name, pattern), group in itertools.groupby(rows.rows, key=lambda r: r[:3]):
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={name}, "
            f"patternType={pattern})`:"
        )
        for _, _, _, principal, host, operation, permission in group:
            print(
                f" \t(principal={principal}, host={host}, operation={operation}, "
                f"permissionType={permission})"
            )
        print()


def _confirmed() -> bool:
    try:
        answer = input("Are you sure you want to remove the ACLs matching these options? (y/n) ")
    except EOFError:
        return False
    return answer.strip().lower() == "y"


def run(args) -> int:
    import confluent_kafka.admin as ack
    from confluent_kafka import KafkaException

    timeout = args.timeout_ms / 1000
    admin = None
    try:
        conf = client_config.client_config(args, **{"socket.timeout.ms": args.timeout_ms})
        admin = ack.AdminClient(conf)
        if args.add:
            bindings = _plan_bindings(args, ack)
            for f in admin.create_acls(bindings, request_timeout=timeout).values():
                f.result(timeout)
            print("Adding ACLs:")
            _show(bindings)
            return 0
        filters = _filters(args, ack)
        if args.list:
            found: dict[object, None] = {}  # the bindings, in order, once each
            for f in filters:
                for b in admin.describe_acls(f, request_timeout=timeout).result(timeout):
                    found[b] = None
            _show(found, args.output_format)
            return 0
        if not args.force and not _confirmed():
            return 0
        removed: dict[object, None] = {}
        for f in admin.delete_acls(filters, request_timeout=timeout).values():
            for b in f.result(timeout):
                removed[b] = None
        print("Removed ACLs:")
        _show(removed)
        return 0
    except (client_config.CommandConfigError, KafkaException, ValueError, TimeoutError) as e:
        return fail(client_config.request_error(e, admin, args))
