"""`logflume broker`: run a Kafka-compatible broker in the foreground, or print the
reference of its configuration keys (BROKER-CONFIGURATION.md, from broker/config.py)."""

import logging
import sys
from pathlib import Path

EPILOG = (
    "Every configuration key, for --config FILE and --set KEY=VALUE, with its type, "
    "default and meaning, is in BROKER-CONFIGURATION.md; `logflume broker --reference` "
    "prints it."
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "broker",
        help="run the Kafka-compatible broker (foreground)",
        description="Run a Kafka-compatible broker (single node, or a node of a ZooKeeper "
        "cluster) until SIGTERM/SIGINT.",
        epilog=EPILOG,
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
    p.add_argument(
        "--reference",
        action="store_true",
        help="print the reference of every configuration key, in Markdown, and exit",
    )
    p.add_argument("--output", metavar="FILE", help="--reference: write to FILE, not stdout")
    p.set_defaults(func=run)


def reference(output: str | None) -> int:
    """BROKER-CONFIGURATION.md is this command's output."""
    from broker.reference import markdown

    if not output:
        sys.stdout.write(markdown())
        return 0
    try:
        Path(output).write_text(markdown())
    except OSError as e:
        print(f"logflume broker: --output {output}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


def run(args) -> int:
    from broker.config import BrokerConfig, ConfigError
    from broker.server.server import run as serve

    if args.reference:
        return reference(args.output)
    if args.output:
        print("logflume broker: --output goes with --reference", file=sys.stderr)
        return 2
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
