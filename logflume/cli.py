"""Entry point of the `logflume` command.

Each subcommand lives in its own module under `logflume/commands/` (found by
listing that package, so adding a command touches no other file) and exposes
`add_parser(subparsers)`, which registers its arguments and sets `func` to the code
to run. Command modules import their heavy dependencies inside `func`, so that
`logflume --help` stays fast.
"""

import argparse
import importlib
import pkgutil

import logflume
import logflume.commands
from common.logformat import LOG_FORMATS, configure_logging

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logflume",
        description="Log pipeline: agents, a Kafka-compatible broker and Spark ETL.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {logflume.__version__}",
        help="print the version and exit",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        help="how much to log on stderr: " + ", ".join(LOG_LEVELS) + " (default INFO)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="how to log on stderr: text (default) or json, one object per line with "
        "timestamp, level, logger, message, pid and exception, for journald, Fluent Bit "
        "or Vector; up and cluster up pass it on to the processes they start",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(logflume.commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"logflume.commands.{info.name}").add_parser(sub)
    return parser


def logging_flags(args: argparse.Namespace) -> list[str]:
    """The global flags that give a child `logflume` process this one's logging."""
    return ["--log-level", args.log_level, "--log-format", args.log_format]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    return args.func(args) or 0
