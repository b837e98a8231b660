"""`logflume configs`: describe and alter topic and broker configs (like
kafka-configs.sh, with its flags).

    logflume configs --bootstrap-server H:P --entity-type topics --entity-name T --describe [--all]
    logflume configs ... --entity-type topics --entity-name T --alter \\
        --add-config retention.ms=3600000,cleanup.policy=[compact,delete] --delete-config segment.ms
    logflume configs ... --entity-type brokers --entity-name 0 --describe

Users (SCRAM credentials, as kafka-configs takes them; see `logflume users`):

    logflume configs ... --alter --entity-type users --entity-name alice \
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    logflume configs ... --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    logflume configs ... --describe --entity-type users [--entity-name alice]

`--describe` prints the overrides (topics) or the explicitly set keys (brokers, all
static here) with their synonyms, as kafka-configs does; `--all` prints every config. `--alter` uses
IncrementalAlterConfigs: SET for `--add-config` (a list value in square brackets),
DELETE for `--delete-config`. A broker resource's configs are static on logflume's
broker (the broker says so when asked to alter them).
"""

import sys

from logflume import client_config


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "configs",
        help="describe or alter topic and broker configs",
        description="Describe or alter configs on a Kafka-compatible broker (like kafka-configs.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument(
        "--entity-type",
        required=True,
        choices=("topics", "brokers", "users"),
        help="what the configs belong to",
    )
    name = p.add_mutually_exclusive_group()
    name.add_argument("--entity-name", help="the topic or broker id (default: all)")
    name.add_argument(
        "--entity-default", action="store_true", help="brokers: the cluster-wide default"
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="print the configs")
    action.add_argument(
        "--alter", action="store_true", help="change configs (--add-config, --delete-config)"
    )
    p.add_argument("--all", action="store_true", help="--describe: every config, not overrides")
    p.add_argument("--add-config", default="", metavar="K=V,K2=[A,B]", help="--alter: set")
    p.add_argument("--delete-config", default="", metavar="K,K2", help="--alter: remove")
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    p.set_defaults(func=run)


def fail(message: str) -> int:
    print(f"Error while executing config command with args: {message}", file=sys.stderr)
    return 1


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' --add-config: `k=v,k2=v2`, a value with commas in [brackets]."""
    out: dict[str, str] = {}
    rest = text.strip()
    while rest:
        key, sep, rest = rest.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config {text!r}: expected K=V[,K=V...]")
        if rest.startswith("["):
            value, bracket, rest = rest[1:].partition("]")
            if not bracket:
                raise ValueError(f"--add-config {text!r}: unclosed [")
            rest = rest.removeprefix(",")
        else:
            value, _, rest = rest.partition(",")
        out[key.strip()] = value.strip()
    return out


def run(args) -> int:
    from confluent_kafka import KafkaException

    timeout = args.timeout_ms / 1000
    try:
        added = parse_add_config(args.add_config)
        deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
        admin = client_config.admin_client(args)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return fail(client_config.describe_error(e))
    if args.alter and not (added or deleted):
        return fail("--alter needs --add-config or --delete-config")
    if args.alter and not (args.entity_name or args.entity_default):
        return fail("--alter needs --entity-name (or --entity-default for brokers)")
    if args.entity_type == "users":
        return _users(admin, args, added, deleted, timeout)
    try:
        names = _names(admin, args, timeout)
        if args.alter:
            return _alter(admin, args, names[0], added, deleted, timeout)
        for name in names:
            _describe(admin, args, name, timeout)
        return 0
    except (KafkaException, TimeoutError) as e:
        return fail(client_config.describe_error(e, admin))


_TYPE = {"topics": "TOPIC", "brokers": "BROKER"}
_LABEL = {"topics": "topic", "brokers": "broker"}


def _names(admin, args, timeout: float) -> list[str]:
    if args.entity_default:
        return [""]
    if args.entity_name:
        return [args.entity_name]
    metadata = admin.list_topics(timeout=timeout)
    if args.entity_type == "topics":
        return sorted(metadata.topics)
    return [str(b) for b in sorted(metadata.brokers)]


def _describe(admin, args, name: str, timeout: float) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource

    resource = ConfigResource(_TYPE[args.entity_type], name)
    futures = admin.describe_configs([resource], request_timeout=timeout)
    entries = futures[resource].result(timeout)
    label = f"{_LABEL[args.entity_type]} {name}" if name else "the default broker"
    explicit = (ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value)
    shown = sorted(
        (e for e in entries.values() if args.all or e.source in explicit), key=lambda e: e.name
    )
    kind = "All" if args.all else ("Dynamic" if args.entity_type == "topics" else "Static")
    print(f"{kind} configs for {label} are:")
    for e in shown:
        synonyms = ", ".join(
            f"{ConfigSource(s.source).name}:{s.name}={s.value}" for s in e.synonyms.values()
        )
        value = "null" if e.value is None else e.value
        print(f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")


def _alter(admin, args, name: str, added: dict, deleted: list, timeout: float) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in added.items()
    ]
    entries += [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in deleted]
    resource = ConfigResource(_TYPE[args.entity_type], name, incremental_configs=entries)
    admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result(timeout)
    label = f"{_LABEL[args.entity_type]} {name}" if name else "the default broker"
    print(f"Completed updating config for {label}.")
    return 0


def _users(admin, args, added: dict, deleted: list, timeout: float) -> int:
    """SCRAM credentials: `SCRAM-SHA-512=[iterations=N,password=P]` to add, the
    mechanism name to delete."""
    from confluent_kafka import KafkaException

    from logflume.commands import users

    try:
        if not args.alter:
            names = [args.entity_name] if args.entity_name else []
            for user, infos in sorted(users.describe(admin, names, timeout).items()):
                creds = ",".join(f"{m}=iterations={n}" for m, n in infos)
                print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
            return 0
        for mechanism, value in added.items():
            if mechanism not in users.MECHANISMS:
                return fail(f"--add-config {mechanism}: users take {', '.join(users.MECHANISMS)}")
            fields = dict(f.split("=", 1) for f in value.split(",") if "=" in f)
            if not fields.get("password"):
                return fail(f"--add-config {mechanism}: expected [password=...]")
            iterations = int(fields.get("iterations", 4096))
            users.upsert(
                admin, args.entity_name, mechanism, fields["password"], iterations, timeout
            )
        if deleted:
            users.delete(admin, args.entity_name, deleted, timeout)
    except (KafkaException, ValueError, TimeoutError) as e:
        return fail(client_config.describe_error(e, admin))
    print(f"Completed updating config for user {args.entity_name}.")
    return 0
