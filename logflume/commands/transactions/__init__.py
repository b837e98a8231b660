"""`logflume transactions`: list and describe transactions, describe a partition's
producers, find hanging transactions and abort one (like kafka-transactions.sh,
with its subcommands and flags): the parser and its checks here, the work in
`tool.py`, connecting as --command-config says (logflume/wire_config.py: TLS, SASL
PLAIN/SCRAM)."""

import sys


def add_parser(subparsers) -> None:
    from logflume import client_config
    from logflume.table import add_output_argument

    p = subparsers.add_parser(
        "transactions",
        help="transactions: list, describe, describe-producers, find-hanging, abort",
        description="List and describe the transactions of a Kafka-compatible broker, "
        "describe a partition's producers, find hanging transactions and abort one "
        "(like kafka-transactions.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    add_output_argument(p)
    p.add_argument(
        "subcommand",
        choices=("list", "describe", "describe-producers", "find-hanging", "abort"),
        metavar="SUBCOMMAND",
        help="list (every transactional id), describe (one), describe-producers (of a "
        "partition), find-hanging (transactions) or abort (one on a partition)",
    )
    p.add_argument("--transactional-id", help="describe: the id to describe")
    p.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        metavar="MINUTES",
        help="find-hanging: report transactions whose last write is older than this (default 15)",
    )
    p.add_argument(
        "--topic", help="describe-producers, abort: the partition's topic; find-hanging: search it"
    )
    p.add_argument(
        "--partition",
        type=int,
        help="describe-producers, abort: the partition; find-hanging: search it only",
    )
    p.add_argument(
        "--broker-id",
        type=int,
        help="find-hanging: search the partitions with a replica on this broker, asking it; "
        "describe-producers: ask this replica instead of the leader",
    )
    p.add_argument(
        "--start-offset", type=int, help="abort: the first offset of the transaction to abort"
    )
    p.add_argument("--producer-id", type=int, help="abort: the transaction's producer id")
    p.add_argument("--producer-epoch", type=int, help="abort: the transaction's producer epoch")
    p.add_argument(
        "--coordinator-epoch", type=int, default=0, help="abort: the marker's coordinator epoch"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from logflume import wire_config
    from logflume.commands.transactions import tool

    problem = _missing(args)
    if problem:
        print(f"Error: {problem}", file=sys.stderr)
        return 1
    try:
        security = wire_config.security(args)
    except wire_config.CommandConfigError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return tool.run(args, security)


def _missing(args) -> str | None:
    """What the subcommand's flags lack, worded as Kafka's tool words it."""
    sub, partition = args.subcommand, args.partition is not None
    if sub == "describe" and not args.transactional_id:
        return "describe needs --transactional-id"
    if sub in ("describe-producers", "abort") and (args.topic is None or not partition):
        return f"{sub} needs --topic and --partition"
    if (
        sub == "abort"
        and args.start_offset is None
        and None
        in (
            args.producer_id,
            args.producer_epoch,
        )
    ):
        return "abort needs --start-offset, or --producer-id and --producer-epoch"
    if sub == "find-hanging" and args.topic is None and args.broker_id is None:
        return (
            "The `find-hanging` command requires either --topic or --broker-id to limit "
            "the scope of the search"
        )
    if sub == "find-hanging" and partition and args.topic is None:
        return "The --partition argument requires --topic to be provided"
    return None
