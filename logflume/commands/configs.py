"""`logflume configs`: describe and alter topic, broker and group configs (like
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

`--describe` prints the overrides (topics) or the dynamic configs (brokers: those of
the broker, DYNAMIC_BROKER_CONFIG) with their synonyms, as kafka-configs does; `--all`
prints every config. `--alter` uses IncrementalAlterConfigs: SET for `--add-config`
(a list value in square brackets), DELETE for `--delete-config`. Brokers take the keys
Kafka marks dynamic, per broker or as the cluster-wide default (KIP-226,
BROKER-CONFIGURATION.md); others the broker refuses with Kafka's message:

    logflume configs ... --entity-type brokers --entity-name 0 --alter \
        --add-config message.max.bytes=2000000,listener.name.ssl.ssl.keystore.location=/etc/new.pem
    logflume configs ... --entity-type brokers --entity-default --alter --add-config log.retention.ms=3600000

Client quotas (KIP-546), as kafka-configs sets them; a user's quotas share its
entity with its SCRAM credentials, and `--entity-type users --entity-name U
--entity-type clients --entity-name C` is the pair (either may be --entity-default):

    logflume configs ... --alter --entity-type clients --entity-name app \
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    logflume configs ... --alter --entity-type users --entity-default --delete-config consumer_byte_rate
    logflume configs ... --describe --entity-type users --entity-name alice --entity-type clients
    (logflume/quota_configs.py: DescribeClientQuotas, AlterClientQuotas)

Groups (dynamic group configs, KIP-848/KIP-932: broker/groups/group_config.py), as
kafka-configs sets them; `--describe` prints the group's own configs (GROUP_CONFIG),
`--all` every one:

    logflume configs ... --alter --entity-type groups --entity-name G \
        --add-config share.auto.offset.reset=earliest,consumer.session.timeout.ms=50000
    logflume configs ... --describe --entity-type groups --entity-name G [--all]

librdkafka has no GROUP config resource (its ResourceType GROUP is the ACL one, 3;
Kafka's config resource type is 32), so groups go over the broker's own codec too
(below).

`--entity-type brokers --entity-default` is the cluster-wide default, the broker
resource Kafka names "" (empty). librdkafka refuses a resource with an empty name
(confluent-kafka raised "ValueError: Invalid ConfigResource(4,)"), so that one goes
over the broker's own codec (broker/protocol/client.BlockingClient), connecting as
--command-config says (logflume/wire_config.py); `--describe` shows its configs
(DYNAMIC_DEFAULT_BROKER_CONFIG).

`--describe --output json` (logflume/table.py) prints one array, an object per
entity described: `{"entity_type", "entity_name" (null for --entity-default),
"configs": [{"name", "value" (null when sensitive), "sensitive", "source",
"read_only", "synonyms": [{"name", "value", "source"}]}]}`, the configs text mode
prints (sources by Kafka's names, DYNAMIC_TOPIC_CONFIG...); for users, `"configs":
[{"name": "SCRAM-SHA-512", "iterations": 8192}]` and quotas as `{"name":
"producer_byte_rate", "value": 1048576.0}`; a (user, client id) pair adds
`"client_id"`; a default entity's name is null.

Every failure, a flag combination kafka-configs refuses, a malformed --add-config,
an unreachable broker or the broker's refusal, is one line on stderr and exit
status 1; the broker's refusals carry Kafka's error name (INVALID_REQUEST: ...).
"""

import sys

from logflume import client_config
from logflume.table import add_output_argument, print_json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "configs",
        help="describe or alter topic, broker and group configs",
        description="Describe or alter configs on a Kafka-compatible broker (like kafka-configs.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument(
        "--entity-type",
        required=True,
        action="append",
        choices=("topics", "brokers", "users", "clients", "groups"),
        help="what the configs belong to; users and clients together: a user's client id",
    )
    p.add_argument(
        "--entity-name",
        action="append",
        dest="entity_names",
        help="the topic, broker id, user, client id or group id (default: all but for "
        "groups); one per --entity-type",
    )
    p.add_argument(
        "--entity-default",
        action="append_const",
        const=None,
        dest="entity_names",
        help="brokers: the cluster-wide default; users, clients: the default quota entity",
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
    add_output_argument(
        p,
        "--describe: text as kafka-configs prints it (the default), or json: an array "
        "with an object per entity and its configs",
    )
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
        entity = _entity(args)
        _check_flags(args)
        added = parse_add_config(args.add_config)
    except ValueError as e:
        return fail(str(e))
    deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    if args.alter and not (added or deleted):
        return fail("--alter needs --add-config or --delete-config")
    if args.alter and not (args.entity_name or args.entity_default):
        return fail("--alter needs --entity-name (or --entity-default)")
    user_quotas: list = []  # a users describe: their quotas, shown with their credentials
    if args.entity_type in ("users", "clients"):
        scram = {k: v for k, v in added.items() if k.startswith("SCRAM-")}
        scram_deleted = [k for k in deleted if k.startswith("SCRAM-")]
        quota = {k: v for k, v in added.items() if k not in scram}
        quota_deleted = [k for k in deleted if k not in scram_deleted]
        if len(entity) > 1 or args.entity_type == "clients" or args.entity_default:
            if scram or scram_deleted:
                return fail("SCRAM credentials belong to --entity-type users --entity-name U")
            return _quotas(args, entity, quota, quota_deleted)
        if args.alter and (quota or quota_deleted):
            status = _quotas(args, entity, quota, quota_deleted, quiet=bool(scram or scram_deleted))
            if status or not (scram or scram_deleted):
                return status
            added, deleted = scram, scram_deleted
        elif not args.alter:
            from logflume import quota_configs

            try:
                user_quotas = quota_configs.describe(args, entity)
            except quota_configs.QuotaCommandError as e:
                return fail(str(e))
    if args.entity_default:
        return _over_wire(args, _RESOURCE_BROKER, "", added, deleted, timeout)
    if args.entity_type == "groups":
        return _over_wire(args, _RESOURCE_GROUP, args.entity_name, added, deleted, timeout)
    try:
        admin = client_config.admin_client(args)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return fail(client_config.describe_error(e))
    if args.entity_type == "users":
        return _users(admin, args, added, deleted, timeout, user_quotas)
    try:
        names = _names(admin, args, timeout)
        if args.alter:
            return _alter(admin, args, names[0], added, deleted, timeout)
        described = [_describe(admin, args, name, timeout) for name in names]
        if args.output_format == "json":
            print_json(described)
        return 0
    except (KafkaException, ValueError, TimeoutError) as e:
        return fail(client_config.request_error(e, admin, args))


def _entity(args) -> list[tuple[str, str | None]]:
    """Pair each --entity-type with the --entity-name or --entity-default (None) given
    in the same position, as kafka-configs does (a type without one: every name, see
    logflume.quota_configs.ANY); sets `entity_type`, `entity_name` and
    `entity_default` from the first pair. ValueError for a combination kafka-configs
    refuses."""
    from logflume.quota_configs import ANY

    types = args.entity_type
    names = args.entity_names or []
    if len(names) > len(types):
        raise ValueError("each --entity-name or --entity-default needs its --entity-type")
    if len(types) > 1 and sorted(types) != ["clients", "users"]:
        raise ValueError(
            "only --entity-type users and --entity-type clients combine (a user's client id)"
        )
    entity = [(t, names[i] if i < len(names) else ANY) for i, t in enumerate(types)]
    args.entity_type, first = entity[0]
    args.entity_default = first is None
    args.entity_name = None if first in (None, ANY) else first
    if args.alter and any(n == ANY for _, n in entity):
        raise ValueError("--alter needs --entity-name (or --entity-default) for each --entity-type")
    return entity


def _check_flags(args) -> None:
    """The flag combinations kafka-configs refuses before connecting (ValueError)."""
    if args.entity_default and args.entity_type not in ("brokers", "users", "clients"):
        raise ValueError(f"--entity-default is for --entity-type brokers, not {args.entity_type}")
    if args.entity_name is not None and not args.entity_name.strip():
        raise ValueError("--entity-name is empty")
    if args.entity_type == "brokers" and args.entity_name and not args.entity_name.isdigit():
        raise ValueError(
            "The entity name for brokers must be a valid integer broker id, but it is: "
            + args.entity_name
        )
    if not args.alter and (args.add_config or args.delete_config):
        raise ValueError("--add-config and --delete-config go with --alter")
    if args.entity_type == "groups" and not args.entity_name:
        raise ValueError("--entity-type groups needs --entity-name (a group id)")


_TYPE = {"topics": "TOPIC", "brokers": "BROKER"}
_LABEL = {"topics": "topic", "brokers": "broker"}


def _names(admin, args, timeout: float) -> list[str]:
    """The entities to describe or alter: the one named, else every one. A broker id
    is checked first: librdkafka would wait for an unknown broker until the timeout."""
    if args.entity_name and args.entity_type == "topics":
        return [args.entity_name]
    metadata = admin.list_topics(timeout=timeout)
    if args.entity_type == "topics":
        return sorted(metadata.topics)
    ids = sorted(metadata.brokers)
    if not args.entity_name:
        return [str(b) for b in ids]
    if int(args.entity_name) not in ids:
        known = ", ".join(map(str, ids))
        raise ValueError(f"Broker {args.entity_name} is not in the cluster (brokers: {known})")
    return [args.entity_name]


def _describe(admin, args, name: str, timeout: float) -> dict | None:
    """Print `name`'s configs (text), or return them as --output json gives them."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    resource = ConfigResource(_TYPE[args.entity_type], name)
    futures = admin.describe_configs([resource], request_timeout=timeout)
    entries = futures[resource].result(timeout)
    explicit = (ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    kind = "All" if args.all else "Dynamic"
    return _show(
        args,
        f"{kind} configs for {_LABEL[args.entity_type]} {name} are:",
        name,
        [
            (e.name, e.value, e.is_sensitive, e.source, e.is_read_only,
             [(s.source, s.name, s.value) for s in e.synonyms.values()])
            for e in sorted(entries.values(), key=lambda e: e.name)
            if args.all or e.source in explicit
        ],
    )  # fmt: skip


def _show(args, heading: str, name: str | None, entries: list[tuple]) -> dict | None:
    """An entity's configs, (name, value, sensitive, source, read_only, synonyms)
    with synonyms as (source, name, value): printed as kafka-configs prints them,
    or (--output json) returned as an object."""
    from confluent_kafka.admin import ConfigSource

    if args.output_format == "json":
        configs = [
            {"name": n, "value": None if sensitive else v, "sensitive": sensitive,
             "source": ConfigSource(src).name, "read_only": read_only,
             "synonyms": [{"name": sn, "value": sv, "source": ConfigSource(ss).name}
                          for ss, sn, sv in synonyms]}
            for n, v, sensitive, src, read_only, synonyms in entries
        ]  # fmt: skip
        return {"entity_type": args.entity_type, "entity_name": name, "configs": configs}
    print(heading)
    for n, v, sensitive, _, _, synonyms in entries:
        shown = ", ".join(f"{ConfigSource(ss).name}:{sn}={sv}" for ss, sn, sv in synonyms)
        value = "null" if v is None else v
        print(f"  {n}={value} sensitive={str(sensitive).lower()} synonyms={{{shown}}}")
    return None


def _alter(admin, args, name: str, added: dict, deleted: list, timeout: float) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in added.items()
    ]
    entries += [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in deleted]
    resource = ConfigResource(_TYPE[args.entity_type], name, incremental_configs=entries)
    admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result(timeout)
    print(f"Completed updating config for {_LABEL[args.entity_type]} {name}.")
    return 0


# Kafka's numbers: the broker and group resource types, IncrementalAlterConfigs
# operations, and the sources of a dynamic cluster-wide default broker config and of
# a group's own config.
_RESOURCE_BROKER = 4
_RESOURCE_GROUP = 32
_OP_SET, _OP_DELETE = 0, 1
_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
_GROUP_CONFIG = 8


def _over_wire(args, rtype: int, name: str, added: dict, deleted: list, timeout: float) -> int:
    """--entity-default (the broker resource "") and --entity-type groups (a resource
    type librdkafka does not know): describe or alter on the first bootstrap server,
    over the broker's own codec (see the module docstring). A group's configs live in
    the cluster's metadata, so any broker answers for it."""
    from broker.protocol import ApiKey, ErrorCode
    from broker.protocol.client import BlockingClient, SaslAuthenticationError, SaslClientError
    from common.hostport import parse_hostport
    from logflume import wire_config

    resource = {"resource_type": rtype, "resource_name": name}
    first = args.bootstrap_server.split(",")[0]
    try:
        security = wire_config.security(args)
        host, port = parse_hostport(first, "--bootstrap-server")
        with BlockingClient(host, port, timeout, security=security) as client:
            if args.alter:
                configs = [
                    {"name": k, "config_operation": _OP_SET, "value": v} for k, v in added.items()
                ]
                configs += [
                    {"name": k, "config_operation": _OP_DELETE, "value": None} for k in deleted
                ]
                body = {"resources": [{**resource, "configs": configs}], "validate_only": False}
                answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"][0]
            else:
                body = {
                    "resources": [{**resource, "configuration_keys": None}],
                    "include_synonyms": True,
                }
                answer = client.request(ApiKey.DESCRIBE_CONFIGS, 1, body)["results"][0]
    except (ValueError, SaslAuthenticationError, SaslClientError) as e:
        return fail(str(e))  # --command-config or --bootstrap-server, a refused login
    except OSError as e:  # refused, timed out, closed, TLS
        return fail(f"cannot reach {first} within {args.timeout_ms} ms ({e.strerror or e})")
    if answer["error_code"]:
        name = ErrorCode(answer["error_code"]).name
        return fail(f"{name}: {answer['error_message'] or 'the broker refused the request'}")
    group = rtype == _RESOURCE_GROUP
    if args.alter:
        if group:
            print(f"Completed updating config for group {name}.")
        else:
            print("Completed updating default config for brokers in the cluster.")
        return 0
    if group:
        heading = f"{'All' if args.all else 'Dynamic'} configs for group {name} are:"
    else:
        heading = "Default configs for brokers in the cluster are:"
    own = _GROUP_CONFIG if group else _DYNAMIC_DEFAULT_BROKER_CONFIG
    described = _show(
        args,
        heading,
        name if group else None,
        [
            (c["name"], c["value"], c["is_sensitive"], c["config_source"], c["read_only"],
             [(s["source"], s["name"], s["value"]) for s in c["synonyms"]])
            for c in sorted(answer["configs"], key=lambda c: c["name"])
            if args.all or c["config_source"] == own
        ],
    )  # fmt: skip
    if args.output_format == "json":
        print_json([described])
    return 0


def _users(admin, args, added: dict, deleted: list, timeout: float, quotas: list) -> int:
    """SCRAM credentials: `SCRAM-SHA-512=[iterations=N,password=P]` to add, the
    mechanism name to delete. A describe shows the users' `quotas`
    (logflume.quota_configs.describe) first."""
    from confluent_kafka import KafkaException

    from logflume import quota_configs
    from logflume.commands import users

    mechanisms = ", ".join(users.MECHANISMS)
    for mechanism in [*added, *deleted]:
        if mechanism not in users.MECHANISMS:
            return fail(f"{mechanism}: users take {mechanisms}")
    try:
        if not args.alter:
            names = [args.entity_name] if args.entity_name else []
            found = sorted(users.describe(admin, names, timeout).items())
            if args.output_format == "json":
                described = {}
                for entity, values in quotas:
                    obj = quota_configs.json_object(entity, values)
                    described[obj["entity_name"]] = obj
                for user, infos in found:
                    obj = described.setdefault(
                        user, {"entity_type": "users", "entity_name": user, "configs": []}
                    )
                    obj["configs"] += [{"name": m, "iterations": n} for m, n in infos]
                print_json(list(described.values()))
                return 0
            for entity, values in quotas:
                print(quota_configs.text_line(entity, values))
            for user, infos in found:
                creds = ",".join(f"{m}=iterations={n}" for m, n in infos)
                print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
            return 0
        for mechanism, value in added.items():
            fields = dict(f.split("=", 1) for f in value.split(",") if "=" in f)
            if not fields.get("password"):
                return fail(f"--add-config {mechanism}: expected [password=...]")
            iterations = fields.get("iterations", "4096").strip()
            if not iterations.isdigit():
                return fail(f"--add-config {mechanism}: iterations={iterations} is not a number")
            users.upsert(
                admin, args.entity_name, mechanism, fields["password"], int(iterations), timeout
            )
        if deleted:
            users.delete(admin, args.entity_name, deleted, timeout)
    except (KafkaException, ValueError, TimeoutError) as e:
        return fail(client_config.request_error(e, admin, args))
    print(f"Completed updating config for user {args.entity_name}.")
    return 0


def _quotas(args, entity, added: dict, deleted: list, quiet: bool = False) -> int:
    """Client quotas (logflume.quota_configs): alter (`quiet`: no "Completed" line,
    the SCRAM credentials of the same command print it), or describe."""
    from logflume import quota_configs as q

    try:
        if args.alter:
            q.alter(args, entity, added, deleted)
            if not quiet:
                kind, name = entity[0]
                if name is None:
                    print(f"Completed updating default config for {kind} in the cluster.")
                else:
                    print(f"Completed updating config for {kind[:-1]} {name}.")
            return 0
        found = q.describe(args, entity)
    except q.QuotaCommandError as e:
        return fail(str(e))
    if args.output_format == "json":
        print_json([q.json_object(ent, values) for ent, values in found])
        return 0
    for ent, values in found:
        print(q.text_line(ent, values))
    return 0
