"""`logflume broker`: run a single-node Kafka-compatible broker in the foreground."""

import logging
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "broker",
        help="run the Kafka-compatible broker (foreground)",
        description="Run a single-node Kafka-compatible broker until SIGTERM/SIGINT.",
    )
    p.add_argument("--data-dir", default=None, help="data directory (log.dirs; or in --config)")
    p.add_argument(
        "--listen",
        default=None,
        help="listeners: HOST:PORT or NAME://HOST:PORT,... (default 127.0.0.1:9092)",
    )
    p.add_argument(
        "--advertised", default=None, help="advertised.listeners: HOST:PORT or NAME://HOST:PORT,..."
    )
    p.add_argument(
        "--config", default=None, help="broker properties file (Kafka's server.properties syntax)"
    )
    p.add_argument("--zookeeper", default=None, help="HOST:PORT[/chroot]: join a ZooKeeper cluster")
    p.add_argument("--broker-id", type=int, default=None, help="this broker's id (broker.id)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one broker config key (repeatable)",
    )
    p.add_argument(
        "--event-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop implementation (default asyncio: zero-copy sendfile)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from broker.config import BrokerConfig, ConfigError
    from broker.server.server import run as serve

    try:
        overrides = list(args.set)
        if args.zookeeper is not None:
            overrides.append(f"zookeeper.connect={args.zookeeper}")
        if args.broker_id is not None:
            overrides.append(f"broker.id={args.broker_id}")
        config = BrokerConfig.load(
            args.config, overrides, args.data_dir, args.listen, args.advertised
        )
    except ConfigError as e:
        print(f"logflume broker: configuration error: {e}", file=sys.stderr)
        return 2
    log = logging.getLogger("broker")
    if config.unused:
        log.warning(
            "ignoring %d Kafka setting(s) this broker does not use: %s",
            len(config.unused),
            ", ".join(config.unused),
        )
    log.info("starting broker with data dir %s", config.data_dir)
    return serve(config, args.event_loop)
