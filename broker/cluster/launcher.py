"""Local cluster launcher: how ZooKeeper and brokers are started, and how to tell
that they serve. The one place that knows their command lines; three runners use it:

- `logflume cluster up` and `logflume up --cluster` (`logflume.commands.cluster.
  start_cluster`) run the commands as children of a `logflume.supervisor.Supervisor`,
  restarted when they die;
- the test harness (`testkit.procs.BrokerProcess`, `BrokerCluster`) and the benchmarks
  run them as plain subprocesses on loopback, to kill and restart brokers on purpose;
- the fleet lab (`testkit.netns.NetnsCluster`) runs them inside network namespaces,
  each on its namespace's own address.

ZooKeeper comes from Debian's `zookeeper` package (jars under /usr/share/java) and
is started directly as `java -cp <jars> org.apache.zookeeper.server.quorum.QuorumPeerMain
<zoo.cfg>` with a generated config (dataDir under the given directory, client port on
the given address, admin server off): standalone, or one member of an ensemble
(`zookeeper_ensemble`: `server.N` lines naming every member and a `myid` file), which
serves as long as a majority of its members run. A broker is `python -m logflume
broker --data-dir ... [--listen ...] [--zookeeper ... --broker-id N] [--set k=v ...]`.
Readiness: ZooKeeper answers `srvr` with its mode (standalone, leader or follower; a
member without a quorum says it is not serving); a broker of a cluster lists every
broker in its Metadata (it listens before ZooKeeper has told it about its peers).
`logflume cluster up` writes pid files (`pid_file`) so that `logflume cluster down`
can stop a cluster started elsewhere (`stop_from_pid_files`), `restart_file`s so
that `logflume cluster restart --rolling` can have it restart a broker, and its
brokers' addresses (`bootstrap_file`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.ports import LOOPBACK, free_port, wait_for_port
from common.processes import running

JAR_DIRS = (Path("/usr/share/java"), Path("/usr/share/zookeeper/lib"))
ZK_JARS = ("zookeeper.jar", "zookeeper-jute.jar")
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class LauncherError(RuntimeError):
    """ZooKeeper cannot be started here: its jars are missing."""


# What `logflume cluster up` and `logflume up --cluster` give every broker unless
# `--set` says otherwise. A leader that dies or is cut off from ZooKeeper is replaced
# after about zookeeper.session.timeout.ms + ZooKeeper's tick (expiry granularity) +
# the election (~0.1 s) + the client's metadata refresh (< 1 s): about 4 s here. Kafka's
# 18 s default suits machines that a network separates; brokers on one machine can
# have a shorter session (deploy/README.md, "Several brokers: ZooKeeper and failover").
LOCAL_CLUSTER_DEFAULTS = {"zookeeper.session.timeout.ms": 3000}


def zookeeper_classpath() -> str:
    for d in JAR_DIRS:
        if (d / ZK_JARS[0]).exists():
            jars = [d / j for j in ZK_JARS if (d / j).exists()]
            return ":".join(str(j) for j in jars)
    raise LauncherError(
        "ZooKeeper jars not found (install the Debian package: apt-get install zookeeper)"
    )


def brokers_seen(port: int, host: str = LOOPBACK) -> int:
    """How many live brokers the broker on `host`:`port` lists in its Metadata (0 when
    it does not answer). A broker listens before ZooKeeper has told it about its
    peers; a cluster is ready for RF > 1 topics only once every broker sees all."""
    from broker.protocol import ApiKey
    from broker.protocol.client import BlockingClient

    try:
        with BlockingClient(host, port, timeout=2, client_id="logflume-launcher") as c:
            return len(c.request(ApiKey.METADATA, 1, {"topics": []})["brokers"])
    except OSError:
        return 0


def stop_process(proc: subprocess.Popen | None, timeout_s: float = 15.0) -> None:
    """SIGTERM `proc` and wait for it, SIGKILL after `timeout_s`: the graceful path."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@dataclass(frozen=True)
class QuorumPeer:
    """One member of a ZooKeeper ensemble as every member's config names it: its
    `server.N` id, the address clients and peers reach it on, and its three ports."""

    server_id: int
    host: str
    client_port: int
    quorum_port: int
    election_port: int

    def config_line(self) -> str:
        return f"server.{self.server_id}={self.host}:{self.quorum_port}:{self.election_port}"


class ZooKeeperProcess:
    """A ZooKeeper server on `host`:`port` (loopback and a free port unless given) with
    its config, data and log under `data_dir`: standalone, or, given `peers` (every
    member, itself included) and its own `server_id`, one member of that ensemble.
    `start()` runs it as this process's child; `command()` is for callers that run it
    themselves. Owned by one thread. `force_sync=False` (ZooKeeper's `forceSync=no`)
    stops it fsyncing its transaction log before each answer: for test machines, where
    every session and write would otherwise wait on a disk shared with everything else
    running; never for a cluster that must survive a power loss."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        tick_ms: int = 500,
        host: str = LOOPBACK,
        force_sync: bool = True,
        peers: Sequence[QuorumPeer] = (),
        server_id: int | None = None,
    ):
        if peers and server_id not in {p.server_id for p in peers}:
            raise ValueError(f"server id {server_id} is not one of the ensemble's members")
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.force_sync = force_sync
        self.peers = tuple(peers)
        self.server_id = server_id
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        """Write the config (and an ensemble member's `myid`) and return the server's
        command line."""
        data = self.data_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={data}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            f"minSessionTimeout={2 * self.tick_ms}",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "4lw.commands.whitelist=*",
            f"forceSync={'yes' if self.force_sync else 'no'}",
        ]
        if self.peers:
            # A follower has initLimit ticks to sync with a new leader and is dropped
            # after syncLimit ticks without hearing from it (ZooKeeper's usual 10 and 5).
            lines += ["initLimit=10", "syncLimit=5"]
            lines += [peer.config_line() for peer in self.peers]
            (data / "myid").write_text(f"{self.server_id}\n")
        (self.data_dir / "zoo.cfg").write_text("\n".join(lines) + "\n")
        cmd = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-cp", zookeeper_classpath()]
        cmd += ["-Dzookeeper.jmx.log4j.disable=true", ZK_MAIN, str(self.data_dir / "zoo.cfg")]
        return cmd

    def wait_serving(self, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
        """Wait until the server (run as `proc`) serves clients."""
        wait_for_port(self.port, timeout_s, proc, self.host, ready=self.is_serving)

    def start(self, timeout_s: float = 30.0, wait: bool = True) -> ZooKeeperProcess:
        """Run the server; `wait=False` returns at once (an ensemble member serves
        only once a majority of the members run, so start them all, then wait)."""
        cmd = self.command()
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if wait:
            self.wait_serving(self.proc, timeout_s)
        return self

    def mode(self) -> str | None:
        """`standalone`, `leader` or `follower` as the server reports it (`srvr`);
        None while it does not serve clients (down, or a member without a quorum)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=2) as s:
                s.sendall(b"srvr")
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
        except OSError:
            return None
        for line in reply.decode(errors="replace").splitlines():
            if line.startswith("Mode: "):
                return line.removeprefix("Mode: ").strip()
        return None

    def is_serving(self) -> bool:
        return self.mode() is not None

    def stop(self) -> None:
        stop_process(self.proc)
        if getattr(self, "_log", None):
            self._log.close()


def zookeeper_ensemble(
    root: Path,
    count: int,
    host: str = LOOPBACK,
    tick_ms: int = 500,
    force_sync: bool = True,
) -> list[ZooKeeperProcess]:
    """`count` members of one ensemble (ids 1..count, data in `root/zookeeper-N`, free
    ports on `host`), not started. Three members survive the loss of any one; five,
    of two. `ensemble_connect` gives the connect string a broker is started with."""
    peers = [
        QuorumPeer(i, host, free_port(), free_port(), free_port()) for i in range(1, count + 1)
    ]
    return [
        ZooKeeperProcess(
            Path(root) / f"zookeeper-{p.server_id}",
            p.client_port,
            tick_ms,
            host,
            force_sync,
            peers,
            p.server_id,
        )
        for p in peers
    ]


def ensemble_connect(servers: Sequence[ZooKeeperProcess]) -> str:
    """The ZooKeeper connect string naming every server: `host:port,host:port,...`."""
    return ",".join(zk.connect for zk in servers)


def broker_command(
    data_dir: Path,
    listen: str | None = None,
    zookeeper: str | None = None,
    broker_id: int | None = None,
    settings: dict | None = None,
    log_flags: list[str] | None = None,
    extra_args: list[str] | None = None,
) -> list[str]:
    """The command line of a `logflume broker` with its data in `data_dir`.
    `listen`: its `--listen` address (none: the `listeners` setting or the default);
    `zookeeper` and `broker_id`: join that cluster as that broker; `settings`: broker
    config, each as `--set key=value`; `log_flags`: global `logflume` flags such as
    `--log-format json`, which go before the subcommand; `extra_args`: further
    `logflume broker` options, e.g. `--event-loop`."""
    cmd = [sys.executable, "-m", "logflume", *(log_flags or []), "broker"]
    cmd += ["--data-dir", str(data_dir)]
    if listen is not None:
        cmd += ["--listen", listen]
    if zookeeper is not None:
        cmd += ["--zookeeper", zookeeper]
    if broker_id is not None:
        cmd += ["--broker-id", str(broker_id)]
    for key, value in (settings or {}).items():
        cmd += ["--set", f"{key}={value}"]
    return cmd + list(extra_args or [])


def pid_file(data_dir: Path, name: str) -> Path:
    """Where `logflume cluster up` keeps its own pid (`cluster`) and those of its
    children (`zookeeper`, `broker-N`)."""
    return Path(data_dir) / f"{name}.pid"


def restart_file(data_dir: Path, name: str) -> Path:
    """The file that asks `logflume cluster up` to restart its child `name` gracefully
    (`logflume.supervisor.ChildSpec.restart_file`); it removes the file when it acts."""
    return Path(data_dir) / f"{name}.restart"


def bootstrap_file(data_dir: Path) -> Path:
    """Where `logflume cluster up` writes its brokers' addresses, comma-separated, for
    the commands that act on the cluster by its data directory."""
    return Path(data_dir) / "bootstrap.servers"


def read_pid(path: Path) -> int | None:
    """The pid in a pid file, None when there is none (yet)."""
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def stop_from_pid_files(data_dir: Path, timeout_s: float = 30.0) -> list[str]:
    """Stop a cluster started in the background. The `logflume cluster up` process
    (`cluster.pid`) gets SIGTERM first and stops its brokers and ZooKeeper in order;
    processes whose pid files are still there after that (their supervisor was
    SIGKILLed, and they outlived it) get SIGTERM one by one, brokers before ZooKeeper
    (`zookeeper`, or the members of an ensemble, `zookeeper-N`)."""
    data_dir = Path(data_dir)
    stopped = []
    supervisor = pid_file(data_dir, "cluster")
    if _terminate(read_pid(supervisor), timeout_s * 2):
        stopped.append("cluster")
    supervisor.unlink(missing_ok=True)
    files = sorted(data_dir.glob("broker-*.pid")) + sorted(data_dir.glob("zookeeper*.pid"))
    for path in files:
        if _terminate(read_pid(path), timeout_s):
            stopped.append(path.stem)
        path.unlink(missing_ok=True)
    return stopped


def _terminate(pid: int | None, timeout_s: float) -> bool:
    """SIGTERM `pid` and wait for it to exit (SIGKILL past `timeout_s`); False if it
    was not running."""
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not running(pid):
            return True
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True
