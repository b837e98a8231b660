"""`logflume transactions`: list, describe and find hanging transactions (like
kafka-transactions.sh, with its subcommands and flags); the work is done by
`broker.transactions.tool`, connecting as --command-config says
(logflume/wire_config.py: TLS, SASL PLAIN/SCRAM)."""

import sys


def add_parser(subparsers) -> None:
    from logflume import client_config

    p = subparsers.add_parser(
        "transactions",
        help="list or describe transactions",
        description="Inspect the transactions of a Kafka-compatible broker "
        "(like kafka-transactions.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    p.add_argument(
        "subcommand",
        choices=("list", "describe", "find-hanging", "abort"),
        help="list every transactional id, describe one, find hanging transactions or "
        "abort one on a partition",
    )
    p.add_argument("--transactional-id", help="describe: the id to describe")
    p.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        metavar="MINUTES",
        help="find-hanging: report transactions open longer than this (default 15)",
    )
    p.add_argument("--topic", help="abort: the partition's topic")
    p.add_argument("--partition", type=int, help="abort: the partition")
    p.add_argument("--producer-id", type=int, help="abort: the transaction's producer id")
    p.add_argument("--producer-epoch", type=int, help="abort: the transaction's producer epoch")
    p.add_argument(
        "--coordinator-epoch", type=int, default=0, help="abort: the marker's coordinator epoch"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from broker.transactions import tool
    from logflume import wire_config

    if args.subcommand == "describe" and not args.transactional_id:
        print("Error: describe needs --transactional-id", file=sys.stderr)
        return 1
    needed = (args.topic, args.partition, args.producer_id, args.producer_epoch)
    if args.subcommand == "abort" and None in needed:
        print(
            "Error: abort needs --topic, --partition, --producer-id and --producer-epoch",
            file=sys.stderr,
        )
        return 1
    try:
        security = wire_config.security(args)
    except wire_config.CommandConfigError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return tool.run(args, security)
