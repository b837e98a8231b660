"""`logflume console`: the web console (console/server.py) in the foreground.

It reads the cluster through --bootstrap-server (and --command-config, as the other
client commands), the agents' /metrics and /health at --agents, partition sizes at
--broker-metrics (the brokers' metrics.listen; without it sizes show as "—"), and
the realtime job's per-minute rows on --stats-topic. It logs its URL and runs until
SIGTERM or Ctrl-C.
"""

import asyncio
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
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"logflume console: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    from confluent_kafka import KafkaException

    from common.hostport import parse_hostport
    from console.model import parse_urls
    from console.server import serve

    try:
        host, port = parse_hostport(args.listen, "--listen")
        conf = client_config.client_config(args)
    except (client_config.CommandConfigError, ValueError) as e:
        return _error(str(e))
    try:
        asyncio.run(
            serve(
                conf,
                host,
                port,
                agents=parse_urls(args.agents),
                broker_metrics=parse_urls(args.broker_metrics),
                stats_topic=args.stats_topic,
            )
        )
    except KafkaException as e:
        return _error(client_config.describe_error(e))
    except OSError as e:
        return _error(f"cannot listen on {args.listen}: {e.strerror or e}")
    return 0
