"""The ETL jobs' command line: the options of `offline` and `realtime` and how a
parsed command line runs its job. Shared by `logflume etl` (logflume/commands/etl.py)
and spark-submit's entry point (spark_etl/submit.py), which must not need the
`logflume` command to run on a cluster.

`offline` processes what arrived since its last run (Trigger.AvailableNow over a
checkpoint) into hourly Parquet tables, then exits: schedule it hourly
(deploy/etl/). `realtime` runs until interrupted, publishing per-minute windows to
a broker topic every half second and final ones to Parquet. See spark_etl/jobs/.
Spark and the jobs are imported when a job runs, so that building the parser is
quick (`logflume --help`).
"""

import argparse
import os
import signal
import sys
import threading

from common import client_options
from common.topic_names import AUDIT_TOPIC

JOBS = ("offline", "realtime")


def add_job_parsers(parser: argparse.ArgumentParser) -> None:
    """The jobs as subcommands of `parser`, each setting `func` to its run."""
    jobs = parser.add_subparsers(dest="job", metavar="JOB", required=True)
    off = jobs.add_parser(
        "offline",
        help="process everything new since the last run into hourly tables, then exit",
    )
    _common(off, "/var/lib/logflume/etl/offline")
    off.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=1_000_000,
        help="records per micro-batch, spread over partitions by backlog (default 1000000)",
    )
    off.set_defaults(func=run_offline)
    rt = jobs.add_parser("realtime", help="per-minute windows to Parquet and a topic, until ^C")
    _common(rt, "/var/lib/logflume/etl/realtime")
    rt.add_argument(
        "--trigger-seconds",
        type=float,
        default=0.5,
        help="micro-batch interval: how often provisional rows are published (default 0.5)",
    )
    rt.add_argument(
        "--no-provisional",
        dest="provisional",
        action="store_false",
        help="publish final rows only (a minute's final row comes once the watermark passes it)",
    )
    rt.add_argument("--stats-topic", default="nginx-stats", help="topic for the JSON windows")
    rt.add_argument("--watermark", default="1 minute", help="allowed event-time lateness")
    rt.add_argument(
        "--starting-offsets",
        default="latest",
        help="earliest, latest or JSON, for a new checkpoint (default latest)",
    )
    rt.set_defaults(func=run_realtime)


def _common(p, base: str) -> None:
    client_options.add_arguments(
        p,
        fallback="127.0.0.1:9092",
        command_config_help=client_options.COMMAND_CONFIG_HELP
        + "; passed to the data source as kafka.* options",
    )
    p.add_argument("--topic", default="nginx-access", help="topic(s) to read, comma-separated")
    p.add_argument("--output", default=f"{base}/out", help="output directory or URI")
    p.add_argument("--checkpoint", default=f"{base}/checkpoint", help="checkpoint directory")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument(
        "--spark-ui",
        type=_ui_address,
        default=None,
        metavar="[HOST:]PORT",
        help="serve Spark's web UI there (a bare port: on 127.0.0.1); with a local master it "
        "is off by default and the driver listens only on 127.0.0.1",
    )
    p.add_argument(
        "--spark-log",
        metavar="FILE",
        help="Spark's own log (warnings kept off the console, INFO lines), rolled at 10 MiB; "
        "default spark.log in a local --checkpoint directory",
    )
    p.add_argument(
        "--no-fail-on-data-loss",
        dest="fail_on_data_loss",
        action="store_false",
        help="skip offsets deleted by retention (with a warning) instead of failing",
    )
    p.add_argument(
        "--audit-topic",
        default=AUDIT_TOPIC,
        help=f"where the job publishes what it read per host and minute, for `logflume audit` "
        f"(default {AUDIT_TOPIC})",
    )
    p.add_argument(
        "--no-audit",
        dest="audit_topic",
        action="store_const",
        const=None,
        help="publish no audit totals (a run that reprocesses data another job counted)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )


def _ui_address(value: str) -> tuple[str, int]:
    from common.hostport import parse_hostport

    if value.isdigit():
        value = f"127.0.0.1:{value}"
    try:
        return parse_hostport(value, "--spark-ui")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def session_conf(args, defaults: dict[str, str] | None = None) -> dict[str, str]:
    """`defaults`, then every --conf KEY=VALUE (which wins)."""
    conf = dict(defaults or {})
    conf.update(kv.split("=", 1) for kv in args.conf)
    return conf


def spark_log(args) -> str | None:
    """--spark-log, else spark.log in the checkpoint directory when it is local."""
    if args.spark_log or "://" in args.checkpoint:
        return args.spark_log
    return os.path.join(args.checkpoint, "spark.log")


def _spark(args, app: str):
    from spark_etl.session import spark_session

    return spark_session(
        args.master,
        app=app,
        conf=session_conf(args),
        ui=args.spark_ui,
        log_file=spark_log(args),
    )


def _command_config(args) -> dict[str, str] | None:
    """The --command-config properties, checked before Spark starts (raises
    PropertiesError naming the key); the data source translates them."""
    from common.kafka_properties import read, translate

    if not args.command_config:
        return None
    props = read(args.command_config)
    translate(props)
    return props


def run_offline(args) -> int:
    from common.kafka_properties import PropertiesError
    from spark_etl.jobs.offline import run_offline as job

    try:
        client = _command_config(args)
    except PropertiesError as e:
        print(f"logflume etl: {e}", file=sys.stderr)
        return 2
    spark = _spark(args, "logflume-etl-offline")
    try:
        job(
            spark,
            bootstrap=args.bootstrap_server,
            topic=args.topic,
            output=args.output,
            checkpoint=args.checkpoint,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            fail_on_data_loss=args.fail_on_data_loss,
            client=client,
            audit_topic=args.audit_topic,
        )
    finally:
        spark.stop()
    return 0


def run_realtime(args) -> int:
    from common.kafka_properties import PropertiesError
    from spark_etl.jobs.realtime import run_realtime as job

    try:
        client = _command_config(args)
    except PropertiesError as e:
        print(f"logflume etl: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    spark = _spark(args, "logflume-etl-realtime")
    try:
        job(
            spark,
            stop=stop,
            bootstrap=args.bootstrap_server,
            topic=args.topic,
            output=args.output,
            checkpoint=args.checkpoint,
            stats_topic=args.stats_topic,
            trigger_seconds=args.trigger_seconds,
            provisional=args.provisional,
            watermark=args.watermark,
            starting_offsets=args.starting_offsets,
            fail_on_data_loss=args.fail_on_data_loss,
            client=client,
            audit_topic=args.audit_topic,
        )
    finally:
        spark.stop()
    return 0
