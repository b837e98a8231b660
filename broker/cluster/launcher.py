"""Local cluster launcher: one ZooKeeper and N brokers on loopback.

ZooKeeper comes from Debian's `zookeeper` package (jars under /usr/share/java) and
is started directly as `java -cp <jars> org.apache.zookeeper.server.quorum.QuorumPeerMain
<zoo.cfg>` with a generated standalone config (dataDir under the cluster's data
directory, client port on 127.0.0.1, admin server off). Brokers are
`python -m logflume broker --zookeeper ... --broker-id N` subprocesses, each with
its own data directory. `logflume cluster up` and `logflume up --cluster` run these
commands as supervised children (restarted when they die); `LocalCluster` runs them
itself, unsupervised, for benchmarks and tests that kill and restart brokers on
purpose. `logflume cluster up` writes pid files (`pid_file`) so that `logflume
cluster down` can stop a cluster started elsewhere (`stop_from_pid_files`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from common.hostport import free_port

JAR_DIRS = (Path("/usr/share/java"), Path("/usr/share/zookeeper/lib"))
ZK_JARS = ("zookeeper.jar", "zookeeper-jute.jar")
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class LauncherError(RuntimeError):
    """ZooKeeper or a broker could not be started."""


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


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def brokers_seen(port: int) -> int:
    """How many live brokers the broker on 127.0.0.1:`port` lists in its Metadata
    (0 when it does not answer). A broker listens before ZooKeeper has told it about
    its peers; a cluster is ready for RF > 1 topics only once every broker sees all."""
    from broker.protocol import ApiKey
    from broker.protocol.client import BlockingClient

    try:
        with BlockingClient("127.0.0.1", port, timeout=2, client_id="logflume-launcher") as c:
            return len(c.request(ApiKey.METADATA, 1, {"topics": []})["brokers"])
    except OSError:
        return 0


def wait_for_port(
    port: int, timeout_s: float, proc: subprocess.Popen | None = None, brokers: int = 0
) -> None:
    """Wait until 127.0.0.1:`port` accepts connections and, when `brokers` is given,
    its broker sees that many live brokers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise LauncherError(f"process exited with {proc.returncode} before listening")
        if port_open(port) and (not brokers or brokers_seen(port) >= brokers):
            return
        time.sleep(0.05)
    raise LauncherError(
        f"127.0.0.1:{port} not serving"
        + (f" with {brokers} live brokers" if brokers else "")
        + f" after {timeout_s}s"
    )


def _stop(proc: subprocess.Popen | None, timeout_s: float = 15.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class ZooKeeperProcess:
    """A standalone ZooKeeper server subprocess; owned by one thread."""

    def __init__(self, data_dir: Path, port: int | None = None, tick_ms: int = 500):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """Write the standalone config and return the server's command line (for
        callers that run it themselves, e.g. `logflume up --cluster`)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            f"minSessionTimeout={2 * self.tick_ms}\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            "4lw.commands.whitelist=*\n"
        )
        cmd = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-cp", zookeeper_classpath()]
        cmd += ["-Dzookeeper.jmx.log4j.disable=true", ZK_MAIN, str(cfg)]
        return cmd

    def start(self, timeout_s: float = 30.0) -> ZooKeeperProcess:
        cmd = self.command()
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        wait_for_port(self.port, timeout_s, self.proc)
        deadline = time.monotonic() + timeout_s
        while not self.is_serving():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise LauncherError(f"ZooKeeper on port {self.port} does not answer ruok")
            time.sleep(0.1)
        return self

    def is_serving(self) -> bool:
        """True once the server answers the `ruok` four-letter word with `imok`."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self) -> None:
        _stop(self.proc)
        if getattr(self, "_log", None):
            self._log.close()


def broker_command(
    data_dir: Path,
    port: int,
    zookeeper: str,
    broker_id: int,
    settings: dict | None = None,
    log_flags: list[str] | None = None,
) -> list[str]:
    """The broker's command line; `log_flags` are global `logflume` flags such as
    `--log-format json`, which go before the subcommand."""
    cmd = [sys.executable, "-m", "logflume", *(log_flags or []), "broker"]
    cmd += ["--data-dir", str(data_dir)]
    cmd += ["--listen", f"127.0.0.1:{port}", "--zookeeper", zookeeper]
    cmd += ["--broker-id", str(broker_id)]
    for key, value in (settings or {}).items():
        cmd += ["--set", f"{key}={value}"]
    return cmd


class LocalCluster:
    """ZooKeeper plus `brokers` broker processes under `data_dir`; one owner thread."""

    def __init__(
        self,
        data_dir: Path,
        brokers: int = 3,
        base_port: int | None = None,
        settings: dict | None = None,
        zk_tick_ms: int = 500,
    ):
        self.data_dir = Path(data_dir)
        self.count = brokers
        self.base_port = base_port
        self.settings = dict(settings or {})
        self.zookeeper = ZooKeeperProcess(self.data_dir / "zookeeper", tick_ms=zk_tick_ms)
        self.procs: dict[int, subprocess.Popen] = {}
        self.ports: dict[int, int] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[i]}" for i in sorted(self.ports))

    def start(self) -> LocalCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.zookeeper.start()
        for i in range(self.count):
            self.ports[i] = self.base_port + i if self.base_port else free_port()
            self._spawn(i)
        for i, proc in self.procs.items():
            wait_for_port(self.ports[i], 30, proc, brokers=self.count)
        return self

    def _spawn(self, i: int) -> None:
        log = open(self.data_dir / f"broker-{i}.log", "ab")
        proc = subprocess.Popen(
            broker_command(
                self.data_dir / f"broker-{i}",
                self.ports[i],
                self.zookeeper.connect,
                i,
                self.settings,
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[i] = proc

    def kill_broker(self, i: int) -> None:
        """SIGKILL broker `i` (no clean shutdown), for failover benchmarks."""
        proc = self.procs[i]
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def start_broker(self, i: int, timeout_s: float = 30.0) -> None:
        """Start broker `i` again (same id, port and data) after it stopped."""
        self._spawn(i)
        wait_for_port(self.ports[i], timeout_s, self.procs[i])

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            _stop(proc, 30)
        self.zookeeper.stop()


def pid_file(data_dir: Path, name: str) -> Path:
    """Where `logflume cluster up` keeps its own pid (`cluster`) and those of its
    children (`zookeeper`, `broker-N`)."""
    return Path(data_dir) / f"{name}.pid"


def stop_from_pid_files(data_dir: Path, timeout_s: float = 30.0) -> list[str]:
    """Stop a cluster started in the background. The `logflume cluster up` process
    (`cluster.pid`) gets SIGTERM first and stops its brokers and ZooKeeper in order;
    processes whose pid files are still there after that (their supervisor was
    SIGKILLed, and they outlived it) get SIGTERM one by one, brokers before ZooKeeper."""
    data_dir = Path(data_dir)
    stopped = []
    supervisor = pid_file(data_dir, "cluster")
    if _terminate(_read_pid(supervisor), timeout_s * 2):
        stopped.append("cluster")
    supervisor.unlink(missing_ok=True)
    files = sorted(data_dir.glob("broker-*.pid")) + [pid_file(data_dir, "zookeeper")]
    for path in files:
        if _terminate(_read_pid(path), timeout_s):
            stopped.append(path.stem)
        path.unlink(missing_ok=True)
    return stopped


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


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
        if not _alive(pid):
            return True
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _alive(pid: int) -> bool:
    """Running, i.e. neither gone nor a zombie waiting for its parent to reap it."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
