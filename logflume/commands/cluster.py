"""`logflume cluster up|down|restart`: a local ZooKeeper plus N brokers on loopback.

`up` starts ZooKeeper (Debian's package, run directly with java; one server, or an
ensemble with `--zookeepers 3`) and the brokers under `--data-dir` as children of a
`logflume.supervisor.Supervisor`, prints the bootstrap servers and stays in the
foreground until Ctrl-C or SIGTERM, which stops them all. A broker or ZooKeeper that dies meanwhile is reported on the console and
restarted with backoff while the others keep running, so that killing a partition
leader shows a follower taking over and the old leader rejoining. Each child's
output goes to its log file (`broker-N.log`, `zookeeper[-N]/zookeeper.log`) and its pid
to `<name>.pid`; `down` stops a cluster started in the background: it signals the
`up` process through `<data dir>/cluster.pid`, or, if that one is gone, each process
from its pid file. `logflume up --cluster` starts its cluster with `start_cluster`
too, with the output on the console. The brokers get our `--log-level` and
`--log-format`; ZooKeeper logs as its log4j set-up says. `up` also writes its brokers'
addresses to `<data dir>/bootstrap.servers`.

`up --hosts N` spreads the brokers over N loopback addresses, 127.0.0.1 to
127.0.0.N, in consecutive blocks (6 brokers on 3: 0 and 1 on 127.0.0.1, 2 and 3 on
127.0.0.2...): each address counts as a host for replica placement
(broker/cluster/assignment.py), so that one machine shows what brokers on N machines
do. `--pin-cores` runs broker i on one core (`taskset`), the i-th of those this
process may use, round the list: one broker per core, as deploy/README.md sets a
many-core host up.

`restart --rolling` restarts the brokers one at a time (logflume/rolling_restart.py):
those of a `cluster up --data-dir D`, each restarted by that supervisor on request
(`<data dir>/broker-N.restart`, `logflume.supervisor.ChildSpec.restart_file`), or
brokers run by systemd (`--systemd-unit`).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from pathlib import Path

from common.client_options import BOOTSTRAP_ENV, COMMAND_CONFIG_HELP, default_command_config
from common.ports import LOOPBACK


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster",
        help="run a local ZooKeeper + N replicated brokers",
        description="Start or stop a local broker cluster on loopback (127.0.0.1, or more "
        "loopback addresses with --hosts).",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser(
        "up", help="start ZooKeeper and the brokers (foreground; restarts what dies)"
    )
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument(
        "--zookeepers",
        type=int,
        default=1,
        metavar="N",
        help="ZooKeeper servers (default 1); 3 or 5 make an ensemble that keeps serving "
        "while 1 or 2 of them are down",
    )
    up.add_argument("--data-dir", required=True, help="directory for ZooKeeper and broker data")
    up.add_argument(
        "--base-port",
        type=int,
        default=19092,
        help="first broker port; brokers take consecutive ports (0: any free ports)",
    )
    up.add_argument(
        "--hosts",
        type=int,
        default=1,
        metavar="N",
        help="spread the brokers over N loopback addresses 127.0.0.1..127.0.0.N, in "
        "consecutive blocks, each a host for replica placement (default 1)",
    )
    up.add_argument(
        "--pin-cores",
        action="store_true",
        help="pin broker i to the i-th core this process may use (taskset), round the "
        "list: one broker per core",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker config for every broker (repeatable); a local cluster defaults to "
        "zookeeper.session.timeout.ms=3000 for failover in about 4 s",
    )
    restart = sub.add_parser(
        "restart",
        help="restart every broker, one at a time (--rolling)",
        description="Rolling restart: each broker in turn, the controller last, once no "
        "partition is under-replicated; a controlled shutdown moves its leaderships "
        "first; then wait until it serves, is back in every ISR and the preferred "
        "leaders lead again. The brokers of `cluster up --data-dir D` are restarted by "
        "that supervisor; brokers run by systemd by `systemctl restart` of "
        "--systemd-unit.",
    )
    restart.add_argument(
        "--rolling",
        action="store_true",
        help="one broker at a time (the only kind of restart offered)",
    )
    where = restart.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", help="the --data-dir of a running `logflume cluster up`")
    where.add_argument(
        "--systemd-unit",
        metavar="TEMPLATE",
        help="the brokers' systemd unit, {id} the broker id (e.g. logflume-broker@{id}); "
        "needs --bootstrap-server",
    )
    restart.add_argument(
        "--systemd-host",
        metavar="TEMPLATE",
        help="with --systemd-unit: the broker's host, {id} the broker id (e.g. "
        "root@broker{id}.example.net), reached by `systemctl --host` (ssh); "
        "default: this machine",
    )
    restart.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV) or None,
        metavar="HOST:PORT",
        help=f"broker(s) to ask for the cluster's state (default: ${BOOTSTRAP_ENV}; with "
        "--data-dir, the brokers `cluster up` started)",
    )
    restart.add_argument(
        "--command-config",
        default=default_command_config(),
        metavar="FILE",
        help=COMMAND_CONFIG_HELP,
    )
    restart.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="give up (status 1) when a step takes longer (default 300)",
    )
    restart.add_argument(
        "--dry-run", action="store_true", help="print the plan and restart nothing"
    )
    down = sub.add_parser("down", help="stop a cluster started in the background")
    down.add_argument(
        "--data-dir", required=True, help="the --data-dir the cluster was started with"
    )
    p.set_defaults(func=run)


def start_cluster(
    sup,
    root: Path,
    ports: list[int],
    settings: dict,
    stop: threading.Event,
    to_files: bool,
    timeout: float = 90.0,
    log_flags: list[str] | None = None,
    zookeepers: int = 1,
    hosts: list[str] | None = None,
    cores: list[int] | None = None,
) -> str:
    """Start ZooKeeper (one server, `zookeeper`, or an ensemble of `zookeepers`
    members, `zookeeper-1`...), then broker i (id i, data in `root/broker-i`) on
    `hosts[i]` (default 127.0.0.1) port `ports[i]`, pinned to core `cores[i]` if given,
    as children of `sup`, waiting until each serves and sees all the others (so that
    an RF N topic can be created at once); returns ZooKeeper's connect string.
    `to_files`: output to log files and pids to pid files under `root` instead of
    output to the console. `log_flags`: global `logflume` flags for the brokers
    (`logflume.cli.logging_flags`)."""
    from broker.cluster.launcher import (
        ZooKeeperProcess,
        broker_command,
        brokers_seen,
        ensemble_connect,
        pid_file,
        restart_file,
        zookeeper_ensemble,
    )
    from logflume.supervisor import ChildSpec

    def spec(name: str, argv: list[str], log: Path) -> ChildSpec:
        if not to_files:
            return ChildSpec(name, argv)
        return ChildSpec(
            name,
            argv,
            log_file=log,
            pid_file=pid_file(root, name),
            restart_file=restart_file(root, name),
        )

    root.mkdir(parents=True, exist_ok=True)
    if zookeepers == 1:
        servers = {"zookeeper": ZooKeeperProcess(root / "zookeeper")}
    else:
        members = zookeeper_ensemble(root, zookeepers)
        servers = {zk.data_dir.name: zk for zk in members}
    for name, zk in servers.items():
        sup.start(spec(name, zk.command(), zk.log_path))
    # An ensemble member serves only once a majority runs: start all, then wait.
    for name, zk in servers.items():
        sup.wait_for(name, zk.is_serving, timeout, stop)
    connect = ensemble_connect(list(servers.values()))
    hosts = hosts or [LOOPBACK] * len(ports)
    for i, port in enumerate(ports):
        argv = broker_command(
            root / f"broker-{i}", f"{hosts[i]}:{port}", connect, i, settings, log_flags
        )
        if cores is not None:
            argv = ["taskset", "--cpu-list", str(cores[i]), *argv]
        sup.start(spec(f"broker-{i}", argv, root / f"broker-{i}.log"))
    for i, port in enumerate(ports):
        sup.wait_for(
            f"broker-{i}",
            lambda p=port, h=hosts[i]: brokers_seen(p, h) >= len(ports),
            timeout,
            stop,
        )
    return connect


def loopback_hosts(brokers: int, hosts: int) -> list[str]:
    """The address of each of `brokers` brokers spread over `hosts` loopback
    addresses (127.0.0.1 up) in consecutive blocks as even as can be."""
    return [f"127.0.0.{1 + i * hosts // brokers}" for i in range(brokers)]


def pinned_cores(brokers: int, usable: set[int]) -> list[int]:
    """The core of each broker: the `usable` ones in order, round the list."""
    cores = sorted(usable)
    return [cores[i % len(cores)] for i in range(brokers)]


def restart(args) -> int:
    """`cluster restart --rolling` (logflume/rolling_restart.py)."""
    from logflume import wire_config
    from logflume.client_config import CommandConfigError
    from logflume.rolling_restart import (
        MetadataSource,
        Restarter,
        Roll,
        RollError,
        SupervisorRestarter,
        SystemdRestarter,
        data_dir_bootstrap,
    )

    def usage(message: str) -> int:
        print(f"logflume cluster restart: {message}", file=sys.stderr)
        return 2

    if not args.rolling:
        return usage("only rolling restarts are offered: give --rolling")
    if args.timeout <= 0:
        return usage("--timeout must be positive")
    restarter: Restarter
    try:
        if args.data_dir is not None:
            if args.systemd_host is not None:
                return usage("--systemd-host goes with --systemd-unit")
            restarter = SupervisorRestarter(Path(args.data_dir))
            restarter.check()
            bootstrap = args.bootstrap_server or data_dir_bootstrap(Path(args.data_dir))
        else:
            if "{id}" not in args.systemd_unit:
                return usage("--systemd-unit must name the broker id as {id}")
            if args.systemd_host is not None and "{id}" not in args.systemd_host:
                return usage("--systemd-host must name the broker id as {id}")
            if not args.bootstrap_server:
                return usage(f"--systemd-unit needs --bootstrap-server (or ${BOOTSTRAP_ENV})")
            restarter = SystemdRestarter(args.systemd_unit, args.systemd_host)
            bootstrap = args.bootstrap_server
        source = MetadataSource(bootstrap, wire_config.security(args))
    except (ValueError, CommandConfigError) as e:
        return usage(str(e))
    except RollError as e:
        print(f"logflume cluster restart: {e}", file=sys.stderr)
        return 1
    roll = Roll(source, restarter, args.timeout, sys.stdout)
    try:
        roll.run(dry_run=args.dry_run)
    except RollError as e:
        roll.say(f"stopped: {e}")
        print(f"logflume cluster restart: {e}", file=sys.stderr)
        return 1
    return 0


def run(args) -> int:
    from broker.cluster.launcher import (
        LOCAL_CLUSTER_DEFAULTS,
        bootstrap_file,
        pid_file,
        stop_from_pid_files,
    )
    from common.ports import free_port
    from logflume.cli import logging_flags
    from logflume.supervisor import Supervisor

    if args.action == "restart":
        return restart(args)
    data_dir = Path(args.data_dir)
    if args.action == "down":
        stopped = stop_from_pid_files(data_dir)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    if args.brokers < 1 or args.zookeepers < 1:
        print("logflume cluster: --brokers and --zookeepers must be at least 1", file=sys.stderr)
        return 2
    if not 1 <= args.hosts <= min(args.brokers, 254):
        print(
            "logflume cluster: --hosts must be between 1 and the number of brokers (at most 254)",
            file=sys.stderr,
        )
        return 2
    if args.pin_cores and shutil.which("taskset") is None:
        print("logflume cluster: --pin-cores needs taskset (util-linux)", file=sys.stderr)
        return 2
    hosts = loopback_hosts(args.brokers, args.hosts)
    cores = pinned_cores(args.brokers, os.sched_getaffinity(0)) if args.pin_cores else None
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"logflume cluster: --set {item!r}: expected key=value", file=sys.stderr)
            return 2
        settings[key.strip()] = value
    for key, value in LOCAL_CLUSTER_DEFAULTS.items():
        settings.setdefault(key, str(value))
    settings.setdefault("default.replication.factor", str(min(3, args.brokers)))
    settings.setdefault("offsets.topic.replication.factor", str(min(3, args.brokers)))
    ports = [args.base_port + i if args.base_port else free_port() for i in range(args.brokers)]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # A broker's controlled shutdown may take controlled.shutdown.timeout.ms (15 s)
    # before it flushes and exits: give it that and more before a SIGKILL.
    sup = Supervisor(log_format=args.log_format, grace=30.0)
    sup.label = "cluster"

    def start() -> None:
        zookeeper = start_cluster(
            sup,
            data_dir,
            ports,
            settings,
            stop,
            to_files=True,
            log_flags=logging_flags(args),
            zookeepers=args.zookeepers,
            hosts=hosts,
            cores=cores,
        )
        sup.say(f"zookeeper: {zookeeper}")
        bootstrap = ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=True))
        bootstrap_file(data_dir).write_text(bootstrap + "\n")
        sup.say("bootstrap servers: " + bootstrap)
        sup.say(f"logs and pid files in {data_dir}; what dies is restarted with backoff")

    data_dir.mkdir(parents=True, exist_ok=True)
    own_pid = pid_file(data_dir, "cluster")
    own_pid.write_text(f"{os.getpid()}\n")
    try:
        return sup.run(start, stop)
    finally:
        own_pid.unlink(missing_ok=True)
        bootstrap_file(data_dir).unlink(missing_ok=True)
