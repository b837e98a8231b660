"""`logflume cluster up|down`: a local ZooKeeper plus N brokers on loopback.

`up` starts ZooKeeper (Debian's package, run directly with java) and the brokers
under `--data-dir`, prints the bootstrap servers and stays in the foreground until
Ctrl-C or SIGTERM, which stops them all (so does a broker exiting on its own). `down`
stops a cluster started in the background: it signals the `up` process through
`<data dir>/cluster.pid`, or, if that one is gone, each process from its pid file.
"""

import os
import signal
import sys
import threading


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster",
        help="run a local ZooKeeper + N replicated brokers",
        description="Start or stop a local broker cluster on 127.0.0.1.",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start ZooKeeper and the brokers (foreground)")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--data-dir", required=True, help="directory for ZooKeeper and broker data")
    up.add_argument(
        "--base-port",
        type=int,
        default=19092,
        help="first broker port; brokers take consecutive ports (0: any free ports)",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker config for every broker (repeatable)",
    )
    down = sub.add_parser("down", help="stop a cluster started in the background")
    down.add_argument("--data-dir", required=True)
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from broker.cluster.launcher import (
        SUPERVISOR_PID,
        LauncherError,
        LocalCluster,
        stop_from_pid_files,
    )

    if args.action == "down":
        stopped = stop_from_pid_files(Path(args.data_dir))
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    if args.brokers < 1:
        print("logflume cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"logflume cluster: --set {item!r}: expected key=value", file=sys.stderr)
            return 2
        settings[key.strip()] = value
    settings.setdefault("default.replication.factor", str(min(3, args.brokers)))
    settings.setdefault("offsets.topic.replication.factor", str(min(3, args.brokers)))
    data_dir = Path(args.data_dir)
    cluster = LocalCluster(data_dir, args.brokers, args.base_port, settings)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    data_dir.mkdir(parents=True, exist_ok=True)
    pid_file = data_dir / SUPERVISOR_PID
    pid_file.write_text(f"{os.getpid()}\n")
    try:
        try:
            cluster.start()
        except LauncherError as e:
            print(f"logflume cluster: {e}", file=sys.stderr)
            return 1
        print(f"zookeeper: {cluster.zookeeper.connect}")
        print(f"bootstrap servers: {cluster.bootstrap}", flush=True)
        while not stop.wait(0.5):
            dead = [i for i, p in cluster.procs.items() if p.poll() is not None]
            if dead:
                print(f"broker(s) {dead} exited; stopping the cluster", file=sys.stderr)
                return 1
        return 0
    finally:
        cluster.stop()
        pid_file.unlink(missing_ok=True)
