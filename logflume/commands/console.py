"""`logflume console`: the web console (console/server.py) in the foreground.

It reads the cluster through --bootstrap-server (and --command-config, as the other
client commands), the agents' /metrics and /health at --agents, partition sizes at
--broker-metrics (the brokers' metrics.listen; without it sizes show as "—"), and
the realtime job's per-minute rows on --stats-topic. It logs its URL and runs until
SIGTERM or Ctrl-C.

With --auth-file (console/auth.py: users with scrypt hashes, bearer tokens' SHA-256)
every page and JSON endpoint needs a login, and only then may --listen name an
address other than loopback; --tls-cert/--tls-key (PEM, as the broker's) serve it
over HTTPS. --hash-password NAME and --hash-token NAME print an auth file's line
(the secret read from standard input) and exit, as --help does: no broker needed.
"""

import argparse
import asyncio
import getpass
import logging
import sys

from logflume import client_config


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "console",
        help="serve a web page showing brokers, topics, groups, agents and nginx stats",
        description="Serve the web console: brokers and controller, topics with their "
        "partitions, consumer groups with lag, agents, a live chart of the per-minute "
        "nginx stats and a message browser, refreshed on its own.",
    )
    client_config.add_arguments(p)
    p.add_argument(
        "--agents",
        metavar="URL,...",
        default="",
        help="agents' metrics addresses (their metrics.listen), e.g. 127.0.0.1:8286",
    )
    p.add_argument(
        "--broker-metrics",
        metavar="URL,...",
        default="",
        help="brokers' metrics addresses (metrics.listen), for partition sizes",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8288",
        help="where to serve the page (default 127.0.0.1:8288)",
    )
    p.add_argument(
        "--stats-topic",
        default="nginx-stats",
        help="the realtime job's per-minute rows (default nginx-stats)",
    )
    p.add_argument(
        "--auth-file",
        metavar="FILE",
        help="require a login: the users and bearer tokens of FILE, NAME:HASH lines "
        "(see --hash-password); needed to listen beyond loopback",
    )
    p.add_argument(
        "--tls-cert",
        metavar="PEM",
        help="serve HTTPS with this certificate chain (PEM; may hold the key too, as "
        "the broker.pem of logflume certs)",
    )
    p.add_argument(
        "--tls-key",
        metavar="PEM",
        help="the private key of --tls-cert, when it is a file of its own",
    )
    p.add_argument(
        "--hash-password",
        metavar="NAME",
        action=_PrintLine,
        help="read a password (prompted, or a line of standard input), print the auth "
        "file line of NAME and exit",
    )
    p.add_argument(
        "--hash-token",
        metavar="NAME",
        action=_PrintLine,
        help="read a bearer token (32 characters or more, e.g. from openssl rand -hex "
        "32) from standard input, print the auth file line of NAME and exit",
    )
    p.set_defaults(func=run)


class _PrintLine(argparse.Action):
    """--hash-password / --hash-token: print an auth file line and exit while the
    arguments are parsed, as --help does, so that no broker option is needed."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from console.auth import hash_password, hash_token

        name = str(values)
        token = option_string == "--hash-token"
        if not name or ":" in name:
            parser.exit(2, f"logflume console: {option_string}: a NAME without ':'\n")
        if sys.stdin.isatty():
            secret = getpass.getpass("token: " if token else f"password for {name}: ")
            if not token and getpass.getpass("again: ") != secret:
                parser.exit(1, "logflume console: the two passwords differ\n")
        else:
            secret = sys.stdin.readline().rstrip("\r\n")
        try:
            hashed = hash_token(secret) if token else hash_password(secret)
        except ValueError as e:
            parser.exit(2, f"logflume console: {option_string}: {e}\n")
        print(f"{name}:{hashed}")
        parser.exit(0)


def _error(message: str) -> int:
    print(f"logflume console: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    from confluent_kafka import KafkaException

    from common.hostport import parse_hostport
    from console.auth import AuthFile, check_listen
    from console.groups import admin_config
    from console.model import parse_urls
    from console.server import serve, tls_context

    if args.tls_key and not args.tls_cert:
        return _error("--tls-key needs --tls-cert")
    try:
        host, port = parse_hostport(args.listen, "--listen")
        auth = AuthFile.load(args.auth_file) if args.auth_file else None
        warning = check_listen(host, auth is not None, args.tls_cert is not None)
        tls = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
        conf = client_config.client_config(args)
        admin_config(conf, 1.0)  # settings the groups' reader cannot use: said now
    except (client_config.CommandConfigError, ValueError) as e:
        return _error(str(e))
    if warning:
        logging.getLogger("console").warning("%s", warning)
    try:
        asyncio.run(
            serve(
                conf,
                host,
                port,
                agents=parse_urls(args.agents),
                broker_metrics=parse_urls(args.broker_metrics),
                stats_topic=args.stats_topic,
                auth=auth,
                tls=tls,
            )
        )
    except KafkaException as e:
        return _error(client_config.describe_error(e))
    except OSError as e:
        return _error(f"cannot listen on {args.listen}: {e.strerror or e}")
    return 0
