"""Entry point of the `logflume` command.

Each subcommand lives in its own module under `logflume/commands/` (found by
listing that package, so adding a command touches no other file) and exposes
`add_parser(subparsers)`, which registers its arguments and sets `func` to the code
to run. Command modules import their heavy dependencies inside `func`, so that
`logflume --help` stays fast.
"""

import argparse
import importlib
import logging
import pkgutil
import sys

import logflume.commands

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logflume",
        description="Log pipeline: agents, a Kafka-compatible broker and Spark ETL.",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        help="how much to log on stderr: " + ", ".join(LOG_LEVELS) + " (default INFO)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(logflume.commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"logflume.commands.{info.name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return args.func(args) or 0
