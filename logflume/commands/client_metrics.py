"""`logflume client-metrics`: client-metrics subscriptions (KIP-714), what
kafka-client-metrics.sh does, with its flags:

    logflume client-metrics --bootstrap-server H:P --list
    logflume client-metrics --bootstrap-server H:P --describe [--name N]
    logflume client-metrics --bootstrap-server H:P --alter (--name N | --generate-name) \\
        [--metrics m1,m2] [--interval MS] [--match k1=v1,k2=v2]
    logflume client-metrics --bootstrap-server H:P --delete --name N

A subscription is a config resource of type CLIENT_METRICS (16): `--alter` SETs the
keys given (`metrics`, `interval.ms`, `match`; an empty value DELETEs the key) with
IncrementalAlterConfigs, `--delete` deletes every key, `--describe` shows them
(DescribeConfigs), `--list` names them (ListClientMetricsResources). The broker
checks them (broker/telemetry/subscriptions.py). The requests go to the first
bootstrap server over broker/protocol/client.BlockingClient, connecting as
--command-config says (logflume/wire_config.py: TLS, SASL PLAIN/SCRAM).
"""

from __future__ import annotations

import sys
import uuid

CLIENT_METRICS = 16  # Kafka's ConfigResource.Type.CLIENT_METRICS
SET, DELETE = 0, 1
SELECTORS = (
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


def add_parser(subparsers) -> None:
    from logflume import client_config

    p = subparsers.add_parser(
        "client-metrics",
        help="client-metrics subscriptions: what clients push to the brokers (KIP-714)",
        description="List, describe, alter and delete the client-metrics subscriptions of "
        "a Kafka-compatible broker (like kafka-client-metrics.sh): which metrics the "
        "matching clients push, and how often.",
    )
    client_config.add_arguments(p)
    p.add_argument("--timeout-ms", type=int, default=30000, help="give up after this long")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--alter", action="store_true", help="alter the configuration of a subscription"
    )
    action.add_argument(
        "--delete", action="store_true", help="delete the configuration of a subscription"
    )
    action.add_argument(
        "--describe", action="store_true", help="list the configuration of subscriptions"
    )
    action.add_argument("--list", action="store_true", help="list the subscriptions")
    p.add_argument("--name", help="name of the client metrics configuration resource")
    p.add_argument("--generate-name", action="store_true", help="generate a UUID as the name")
    p.add_argument("--interval", type=int, help="the metrics push interval in milliseconds")
    p.add_argument(
        "--match",
        metavar="k1=v1,k2=v2",
        help="matching selectors (regular expressions), among: " + ", ".join(SELECTORS),
    )
    p.add_argument("--metrics", metavar="m1,m2", help="telemetry metric name prefixes")
    p.set_defaults(func=run)


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def check(args) -> str | None:
    """What is wrong with the flags, worded as kafka-client-metrics.sh words it."""
    settings = {
        "--generate-name": args.generate_name,
        "--interval": args.interval is not None,
        "--match": args.match is not None,
        "--metrics": args.metrics is not None,
    }
    if args.list and args.name is not None:
        settings["--name"] = True
    if not args.alter:
        action = "--delete" if args.delete else "--describe" if args.describe else "--list"
        given = [flag for flag, present in settings.items() if present]
        if given:
            return f'Option "[{action[2:]}]" can\'t be used with option "[{given[0][2:]}]"'
    if args.alter and (args.name is not None) == args.generate_name:
        return "One of --name or --generate-name must be specified with --alter."
    if args.delete and args.name is None:
        return "A client metrics resource name must be specified with --delete."
    return None


def alter_changes(args) -> list[dict]:
    """The IncrementalAlterConfigs changes of `--alter`: SET, or DELETE for ""."""
    values = {}
    if args.interval is not None:
        values["interval.ms"] = str(args.interval)
    if args.metrics is not None:
        values["metrics"] = args.metrics
    if args.match is not None:
        values["match"] = args.match
    return [
        {"name": k, "config_operation": SET if v else DELETE, "value": v or None}
        for k, v in values.items()
    ]


def run(args) -> int:
    from broker.protocol.client import SaslAuthenticationError, SaslClientError
    from logflume import wire_config

    problem = check(args)
    if problem:
        return fail(problem)
    try:
        security = wire_config.security(args)
    except wire_config.CommandConfigError as e:
        return fail(str(e))
    try:
        return _run(args, security)
    except (SaslAuthenticationError, SaslClientError, ValueError) as e:
        return fail(str(e))
    except OSError as e:  # refused, timed out, closed, TLS
        where = f"{args.bootstrap_server} within {args.timeout_ms} ms"
        return fail(f"cannot reach {where} ({e.strerror or e})")


class CommandError(Exception):
    """The broker refused a request: Kafka's error name and message."""


def _run(args, security) -> int:
    from broker.protocol.client import BlockingClient
    from common.hostport import parse_hostport

    host, port = parse_hostport(args.bootstrap_server.split(",")[0], "--bootstrap-server")
    with BlockingClient(host, port, args.timeout_ms / 1000, security=security) as client:
        try:
            if args.alter:
                name = str(uuid.uuid4()) if args.generate_name else args.name
                _alter(client, name, alter_changes(args))
                print(f"Altered client metrics config for {name}.")
            elif args.delete:
                keys = [k for k, _ in _describe(client, args.name)]
                _alter(
                    client,
                    args.name,
                    [{"name": k, "config_operation": DELETE, "value": None} for k in keys],
                )
                print(f"Deleted client metrics config for {args.name}.")
            elif args.describe:
                names = [args.name] if args.name is not None else _list(client)
                for name in names:
                    print(f"Client metrics configs for {name} are:")
                    for key, value in _describe(client, name):
                        print(f"  {key}={value}")
            else:
                for name in _list(client):
                    print(name)
        except CommandError as e:
            return fail(f"Error while executing client metrics command : {e}")
    return 0


def _raise_for(code: int, message: str | None) -> None:
    from broker.protocol import ErrorCode

    if code:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        raise CommandError(f"{name}: {message}" if message else name)


def _alter(client, name: str, changes: list[dict]) -> None:
    from broker.protocol import ApiKey

    resource = {"resource_type": CLIENT_METRICS, "resource_name": name, "configs": changes}
    answer = client.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [resource], "validate_only": False}
    )
    result = answer["responses"][0]
    _raise_for(result["error_code"], result["error_message"])


def _describe(client, name: str) -> list[tuple[str, str]]:
    from broker.protocol import ApiKey

    body = {
        "resources": [
            {"resource_type": CLIENT_METRICS, "resource_name": name, "configuration_keys": None}
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    result = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]
    _raise_for(result["error_code"], result["error_message"])
    return [(c["name"], c["value"]) for c in result["configs"]]


def _list(client) -> list[str]:
    from broker.protocol import ApiKey

    answer = client.request(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, {})
    _raise_for(answer["error_code"], None)
    return [r["name"] for r in answer["client_metrics_resources"]]
