"""`--bootstrap-server` and `--command-config`, declared once for every command that
talks to a broker: the `logflume` client commands (logflume/client_config.py) and
the ETL jobs (spark_etl/command.py, which spark-submit runs without `logflume`).

The flag wins. Without it, the broker list is $LOGFLUME_BOOTSTRAP_SERVER, and the
client properties are the file $LOGFLUME_COMMAND_CONFIG names, else the profile
~/.config/logflume/client.properties if it exists (as kcat reads $KCAT_CONFIG, else
~/.config/kcat.conf); an empty `--command-config ''` reads none. Both defaults are
read when the parser is built, that is, once per run of a command.
"""

from __future__ import annotations

import argparse
import os

BOOTSTRAP_ENV = "LOGFLUME_BOOTSTRAP_SERVER"
COMMAND_CONFIG_ENV = "LOGFLUME_COMMAND_CONFIG"
PROFILE = "~/.config/logflume/client.properties"

COMMAND_CONFIG_HELP = (
    "Kafka client properties (security.protocol, sasl.*, ssl.*), as for Kafka's tools "
    f"(default: ${COMMAND_CONFIG_ENV}, else {PROFILE} if it exists; an empty FILE for none)"
)


def default_command_config() -> str | None:
    """The --command-config of a command run without the flag: the file
    $LOGFLUME_COMMAND_CONFIG names (reading it fails if it is missing: a variable
    set on purpose is not ignored), else the profile if it exists."""
    named = os.environ.get(COMMAND_CONFIG_ENV)
    if named:
        return named
    profile = os.path.expanduser(PROFILE)
    return profile if os.path.isfile(profile) else None


def add_arguments(
    parser: argparse.ArgumentParser,
    *,
    fallback: str | None = None,
    command_config_help: str = COMMAND_CONFIG_HELP,
) -> None:
    """Add both options to `parser`. With neither the flag nor $LOGFLUME_BOOTSTRAP_SERVER
    the broker list is `fallback`; without a fallback the command stops, status 2, with
    one line naming both.

    That check is the option's `type`: argparse converts a string default through it
    only when the flag is absent, after the arguments given, which is the one moment it
    offers to act on a missing option; `required=True` could not name the variable."""
    default = os.environ.get(BOOTSTRAP_ENV) or fallback or ""
    where = f" (default: ${BOOTSTRAP_ENV}" + (f", else {fallback})" if fallback else ")")

    def bootstrap_server(value: str) -> str:
        if not value.strip():
            parser.exit(
                2,
                f"{parser.prog}: error: no broker to connect to: give --bootstrap-server "
                f"HOST:PORT or set {BOOTSTRAP_ENV}\n",
            )
        return value

    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_server,
        default=default,
        metavar="HOST:PORT",
        help="broker(s) to connect to first, comma-separated" + where,
    )
    parser.add_argument(
        "--command-config",
        default=default_command_config(),
        metavar="FILE",
        help=command_config_help,
    )
