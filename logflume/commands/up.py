"""`logflume up`: the whole demo pipeline on one machine, in the foreground.

Theory of operation:

1. The agents' pipelines file is not run as is: it is compiled with the agent's
   compiler (agent/config.py; a file with errors stops `up` before anything starts,
   each error named as `logflume agent validate` names it), and a derived copy goes
   to `<data-dir>/run/pipelines.yaml` (logflume/demo_pipeline.py), because the
   repository's file names the demo's fixed addresses (broker 127.0.0.1:9092, UDP
   8285, metrics port) and files under `data/`. The copy points every `kafka` sink
   at our broker (`--broker-port`), re-roots relative `tail` paths under `data/`
   into `--data-dir`, and applies `--udp-port` / `--metrics-port` when given, so
   that tests (and a second demo) can run beside a first one on free ports. The
   repository file stays the one to edit.
2. Children start in order under `logflume.supervisor`: the broker (waited for on its
   port), then the topics are created (so consumers do not race auto-creation with
   default settings), the agents (waited for on /health), the traffic generator,
   the web console (`logflume console` on 127.0.0.1:`--console-port`, reading the
   broker, its metrics on 127.0.0.1:`--broker-metrics-port` for partition sizes (single
   node only), and the agents' metrics), the audit (`logflume audit --serve`, its
   metrics on 127.0.0.1:`--audit-port`), and the near-real-time Spark job unless
   `--no-spark`. The generator first writes
   `--backfill-seconds` of history into a new access log and Spark starts a new
   checkpoint at the earliest offsets, so complete minutes are reported as soon as
   Spark runs. Then a banner says what to try, and from then on crashed children
   are restarted with backoff.
3. `--cluster N` runs the broker as a local cluster instead: ZooKeeper and N brokers
   (`logflume cluster up`'s `start_cluster`, ports `--broker-port` .. +N-1, ids
   0..N-1), each a supervised child; topics get replication factor min(3, N) and
   min.insync.replicas=2 (when N >= 2), and the agents and Spark get all N bootstrap
   servers.
4. Every `logflume` child gets our `--log-level` and `--log-format`, and with
   `--log-format json` the console is JSON lines too (`logflume.supervisor`).
5. Ctrl-C, SIGTERM or SIGHUP stop everything in reverse start order (SIGTERM, a
   grace period, SIGKILL). A child exiting before the banner stops the demo with
   exit code 1: a demo that cannot start says so instead of restarting in a loop.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logflume.demo_pipeline import DemoConfig

TOPICS = {"nginx-access": 3, "netcat": 1, "nginx-stats": 1}
# A demo left running should not fill the disk: small segments, ~256 MiB per partition.
BROKER_SETTINGS = {"log.segment.bytes": 64 << 20, "log.retention.bytes": 256 << 20}
STARTUP_TIMEOUT = 90.0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "up",
        help="run the demo: broker, agents, traffic generator and Spark job, supervised",
        description="Run the whole demo pipeline in the foreground until Ctrl-C.",
    )
    p.add_argument("--data-dir", default="data", help="where everything is kept (default ./data)")
    p.add_argument("--config", default="pipelines.yaml", help="the agents' pipelines file")
    p.add_argument("--no-spark", action="store_true", help="skip the near-real-time Spark job")
    p.add_argument("--rate", type=float, default=200.0, help="generated nginx lines per second")
    p.add_argument(
        "--backfill-seconds",
        type=int,
        default=180,
        help="history the generator writes first into a new access log (default 180)",
    )
    p.add_argument(
        "--broker-port",
        type=int,
        default=9092,
        help="broker port on 127.0.0.1 (the first of N with --cluster N)",
    )
    p.add_argument(
        "--cluster",
        type=int,
        default=0,
        metavar="N",
        help="run ZooKeeper and N replicated brokers instead of a single node (e.g. 3)",
    )
    p.add_argument("--udp-port", type=int, help="override the agents' UDP source port")
    p.add_argument("--metrics-port", type=int, help="override the agent's /metrics port")
    p.add_argument(
        "--console-port",
        type=int,
        default=8288,
        help="the web console's port on 127.0.0.1 (default 8288)",
    )
    p.add_argument(
        "--broker-metrics-port",
        type=int,
        default=8287,
        help="the single-node broker's /metrics port on 127.0.0.1 (default 8287)",
    )
    p.add_argument(
        "--audit-port",
        type=int,
        default=8289,
        help="`logflume audit --serve`'s /metrics port on 127.0.0.1 (default 8289)",
    )
    p.add_argument("--grace", type=float, default=15.0, help="seconds each child gets to stop")
    p.set_defaults(func=run)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def udp_bound(port: int) -> bool:
    """Whether some socket is bound to UDP `port` (Linux: /proc/net/udp and udp6)."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        if any(int(row.split()[1].rsplit(":", 1)[1], 16) == port for row in rows):
            return True
    return False


def healthy(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1.0) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def create_topics(
    bootstrap: str,
    deadline: float,
    stop: threading.Event,
    replication: int = 1,
    config: dict[str, str] | None = None,
) -> list[str]:
    """Create the demo's topics (existing ones are fine); retried until `deadline`
    (a cluster refuses replication > registered brokers until all have joined)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    from logflume.client_config import Quiet
    from logflume.supervisor import Stopped

    # Quiet: librdkafka would print raw `%6|...` lines (e.g. "Purging 1 unserved
    # events" when the client is destroyed) on our console, past --log-format json;
    # what fails is reported from the futures.
    # confluent-kafka's types allow no logger object in the configuration (it takes one)
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": 5000,
            "logger": Quiet(),  # type: ignore[dict-item]
        }
    )
    wanted = dict(TOPICS)
    created = []
    while wanted:
        futures = admin.create_topics(
            [
                NewTopic(t, num_partitions=n, replication_factor=replication, config=config or {})
                for t, n in wanted.items()
            ],
            operation_timeout=10,
            request_timeout=10,
        )
        for topic, future in futures.items():
            try:
                future.result(timeout=15)
                created.append(topic)
                del wanted[topic]
            except Exception as exc:  # KafkaException wrapping a KafkaError
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    del wanted[topic]
                elif time.monotonic() > deadline:
                    raise RuntimeError(f"cannot create topic {topic}: {exc}") from exc
        if wanted and stop.wait(1.0):
            raise Stopped
    return created


class Demo:
    """One `logflume up` run: owns the supervisor and the stop flag (main thread only)."""

    def __init__(self, args: argparse.Namespace):
        from logflume.cli import logging_flags
        from logflume.supervisor import Supervisor

        self.args = args
        self.data_dir = Path(args.data_dir).resolve()
        self.ports = [args.broker_port + i for i in range(max(1, args.cluster))]
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.stop = threading.Event()
        self.sup = Supervisor(grace=args.grace, log_format=args.log_format)
        self.log_flags = logging_flags(args)
        self.py = [sys.executable, "-m", "logflume", *self.log_flags]
        # the single node serves /metrics (partition sizes in the console); a cluster's
        # brokers do not (`logflume cluster up` gives them no metrics port)
        self.broker_metrics = None if args.cluster else f"127.0.0.1:{args.broker_metrics_port}"

    def wait(self, what: str, ready, timeout: float = STARTUP_TIMEOUT) -> None:
        self.sup.wait_for(what, ready, timeout, self.stop)

    def start(self, config: DemoConfig, config_path: Path) -> None:
        from common.ports import port_open
        from logflume.supervisor import ChildSpec

        args, sup, data = self.args, self.sup, self.data_dir
        if args.cluster:
            replication, topic_config = self.start_cluster()
        else:
            broker = self.py + ["broker", "--data-dir", str(data / "broker")]
            broker += ["--listen", self.bootstrap]
            settings = {**BROKER_SETTINGS, "metrics.listen": self.broker_metrics}
            for key, value in settings.items():
                broker += ["--set", f"{key}={value}"]
            sup.start(ChildSpec("broker", broker))
            self.wait("broker", lambda: port_open(args.broker_port))
            replication, topic_config = 1, {}
        created = create_topics(
            self.bootstrap, time.monotonic() + 60, self.stop, replication, topic_config
        )
        described = f"replication factor {replication}" + "".join(
            f", {k}={v}" for k, v in topic_config.items()
        )
        sup.say(
            f"topics ready ({', '.join(TOPICS)}; {described}; created now:"
            f" {', '.join(created) or 'none'})"
        )
        access_log = data / "demo" / "access.log"
        # before the agents: their tail source refuses a directory that does not exist
        access_log.parent.mkdir(parents=True, exist_ok=True)
        for name in config.agents():
            argv = self.py + ["agent", "run", "--config", str(config_path), "--name", name]
            sup.start(ChildSpec(name, argv + ["--state-dir", str(data / "agent" / name)]))
        agents = [config.metrics_address(name) for name in config.agents()]
        # The demo's broker is plaintext: no client profile of the operator's applies
        # (an empty --command-config is none; common/client_options.py).
        plain = ["--bootstrap-server", self.bootstrap, "--command-config", ""]
        console = self.py + ["console", *plain]
        console += ["--listen", f"127.0.0.1:{args.console_port}"]
        console += ["--agents", ",".join(f"{h}:{p}" for h, p in filter(None, agents))]
        if self.broker_metrics:
            console += ["--broker-metrics", self.broker_metrics]
        sup.start(ChildSpec("console", console))
        audit = self.py + ["audit", "--serve", *plain]
        sup.start(ChildSpec("audit", audit + ["--listen", f"127.0.0.1:{args.audit_port}"]))
        sup.start(
            ChildSpec(
                "loggen",
                [sys.executable, "-m", "logflume.demo", "--output", str(access_log)]
                + ["--rate", f"{args.rate:g}", "--backfill-seconds", str(args.backfill_seconds)],
            )
        )
        if not args.no_spark:
            spark = self.py + ["etl", "realtime", *plain]
            spark += ["--topic", "nginx-access", "--output", str(data / "stats")]
            spark += ["--checkpoint", str(data / "checkpoints" / "realtime")]
            # earliest: a new checkpoint starts with the generator's backfill (complete
            # minutes to report at once); later starts resume from the checkpoint.
            spark += ["--starting-offsets", "earliest"]
            # SIGTERM to the driver only: it stops its queries and then its JVM, which
            # would otherwise abort the micro-batch in flight.
            sup.start(ChildSpec("spark", spark, term_group=False))
        # /health turns 200 when the agent's components are started, which may be a
        # moment before a source has bound its port: wait for the ports too, so that
        # a line sent right after the banner is not lost.
        for name in config.agents():
            address = config.metrics_address(name)
            if address is not None:
                self.wait(f"agent {name} /health", lambda a=address: healthy(*a))
            for proto, port in config.listeners(name):
                check = udp_bound if proto == "udp" else port_open
                self.wait(f"agent {name} {proto} port {port}", lambda c=check, p=port: c(p))
        self.wait("console", lambda: healthy("127.0.0.1", args.console_port))

    def start_cluster(self) -> tuple[int, dict[str, str]]:
        """ZooKeeper and `--cluster` brokers as supervised children, their output on
        the console; returns the topics' replication factor and config."""
        from broker.cluster.launcher import LOCAL_CLUSTER_DEFAULTS
        from logflume.commands.cluster import start_cluster

        n = self.args.cluster
        replication = min(3, n)
        settings = {**BROKER_SETTINGS, **LOCAL_CLUSTER_DEFAULTS}
        settings["default.replication.factor"] = replication
        settings["offsets.topic.replication.factor"] = replication
        self.zookeeper = start_cluster(
            self.sup,
            self.data_dir / "cluster",
            self.ports,
            settings,
            self.stop,
            to_files=False,
            timeout=STARTUP_TIMEOUT,
            log_flags=self.log_flags,
        )
        topic_config = {"min.insync.replicas": "2"} if n >= 2 else {}
        return replication, topic_config

    def banner(self, config: DemoConfig, config_path: Path) -> str:
        rel = _relative
        lines = [
            "ready: the demo pipeline is running.",
        ]
        if self.args.cluster:
            lines.append(
                f"  cluster  {self.args.cluster} brokers {self.bootstrap} (ids 0-"
                f"{self.args.cluster - 1}), ZooKeeper {self.zookeeper},"
                f" data in {rel(self.data_dir / 'cluster')}"
            )
        else:
            lines.append(f"  broker   {self.bootstrap}, data in {rel(self.data_dir / 'broker')}")
            lines.append(f"           metrics http://{self.broker_metrics}/metrics")
        for name in config.agents():
            for source, topics in config.routes(name):
                what = source.cls.type_name
                if what == "tail":
                    what += " " + ", ".join(rel(Path(p)) for p in source.config.paths)
                lines.append(f"  agent    {name}: {what} -> topic {', '.join(topics) or '-'}")
            address = config.metrics_address(name)
            if address:
                lines.append(f"           metrics http://{address[0]}:{address[1]}/metrics")
        lines.append(f"           config {rel(config_path)} (derived from {self.args.config})")
        lines.append(f"  console  http://127.0.0.1:{self.args.console_port}/")
        lines.append(
            f"  audit    http://127.0.0.1:{self.args.audit_port}/metrics: lines missing per host"
            " and minute, every 30s"
        )
        access = rel(self.data_dir / "demo" / "access.log")
        lines.append(f"  loggen   ~{self.args.rate:g} nginx lines/s appended to {access}")
        stats = rel(self.data_dir / "stats")
        if self.args.no_spark:
            lines.append("  spark    not started (--no-spark)")
        else:
            lines.append(
                f"  spark    per-minute stats -> {stats}/minute/ and topic nginx-stats"
                " (first results once Spark is up and a minute has closed)"
            )
        lines += ["", "Try:"]
        udp = config.udp_address()
        if udp:
            lines.append(f"  echo hello | nc -u -w1 {udp[0]} {udp[1]}")
        cli = _cli()
        consume = f"{cli} consume --bootstrap-server {self.bootstrap} --topic"
        lines.append(f"  {consume} netcat --from-beginning")
        lines.append(f"  {consume} nginx-access")
        lines.append(f"  {cli} audit --bootstrap-server {self.bootstrap} --from 15m --recount")
        if not self.args.no_spark:
            lines.append(f"  {consume} nginx-stats --from-beginning")
            lines.append(f"  ls {stats}/minute/")
        offline = rel(self.data_dir / "offline")
        checkpoint = rel(self.data_dir / "checkpoints" / "offline")
        lines.append(
            "  # the offline (scheduled) job: hourly tables of what arrived since its last run"
        )
        lines.append(
            f"  {cli} etl offline --bootstrap-server {self.bootstrap} --topic nginx-access"
            f" --output {offline} --checkpoint {checkpoint}"
        )
        lines += ["", "Ctrl-C stops everything."]
        return "\n".join(lines)


def _cli() -> str:
    """How the user runs `logflume`: plain if on PATH, else e.g. `.venv/bin/logflume`."""
    script = Path(sys.executable).parent / "logflume"
    found = shutil.which("logflume")
    if found and Path(found).resolve() == script.resolve():
        return "logflume"
    return _relative(script) if script.exists() else f"{sys.executable} -m logflume"


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run(args: argparse.Namespace) -> int:
    from agent.config import compile_file
    from logflume.demo_pipeline import DemoConfig

    config_file = Path(args.config)
    agents, errors = compile_file(config_file)
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        print(f"logflume up: {len(errors)} error(s) in {config_file}", file=sys.stderr)
        return 2
    if args.cluster < 0:
        print("logflume up: --cluster takes a number of brokers (e.g. 3)", file=sys.stderr)
        return 2
    for port in range(args.broker_port, args.broker_port + max(1, args.cluster)):
        if not port_free(port):
            print(
                f"logflume up: port {port} is in use (another `logflume up`?);"
                " pick another with --broker-port",
                file=sys.stderr,
            )
            return 2
    ports = [("--console-port", args.console_port), ("--audit-port", args.audit_port)]
    if not args.cluster:
        ports.append(("--broker-metrics-port", args.broker_metrics_port))
    for flag, port in ports:
        if not port_free(port):
            print(f"logflume up: port {port} is in use; pick another with {flag}", file=sys.stderr)
            return 2
    demo = Demo(args)
    config = DemoConfig(agents, demo.data_dir, demo.bootstrap, args.udp_port, args.metrics_port)
    config_path = demo.data_dir / "run" / "pipelines.yaml"
    config.write(config_path, config_file.resolve())

    def on_signal(signum, _frame):
        demo.stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    def start() -> None:
        demo.start(config, config_path)
        demo.sup.say(demo.banner(config, config_path))

    return demo.sup.run(start, demo.stop)
