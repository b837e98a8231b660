"""Real processes for tests and benchmarks: brokers as subprocesses on loopback.

Tests start the broker exactly as a user would (`python -m logflume broker ...`, its
command line from `broker.cluster.launcher`) and talk to it over TCP on 127.0.0.1,
so what passes here passes for real clients.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

from broker.cluster.launcher import (
    ZooKeeperProcess,
    broker_command,
    brokers_seen,
    stop_process,
    zookeeper_ensemble,
)
from common.ports import LOOPBACK, free_port, wait_for_port


def wait_until(check, timeout: float = 30.0, what="condition", every: float = 0.05):
    """Poll `check()` until it returns a true value, which is returned; AssertionError
    at the deadline naming `what` (a string, or a callable giving one then)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            told = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {told}")
        time.sleep(every)


class ManagedProcess:
    """What every test subprocess wrapper shares: `proc`, `log_path`, kill, stop."""

    proc: subprocess.Popen | None = None
    log_path: Path
    stop_timeout: float = 15.0

    def kill(self) -> None:
        """SIGKILL: no flush, no clean shutdown, like a power cut for the process."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout`): the graceful shutdown path."""
        stop_process(self.proc, self.stop_timeout if timeout is None else timeout)
        return self.proc.returncode if self.proc else None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class BrokerProcess(ManagedProcess):
    """A `logflume broker` subprocess with its own data dir and port; restartable.
    With `listeners` in the settings, `host` is that of the listener on `port`, and
    without `port` both are the first listener's (a loopback address other than
    127.0.0.1 makes another "host" for replica placement: all of 127.0.0.0/8 reaches
    this machine)."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        settings: dict | None = None,
        args: list[str] | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})
        self.host = LOOPBACK
        if "listeners" in self.settings:
            from broker.listeners import parse_addresses
            from common.hostport import connect_address

            bound = list(parse_addresses(self.settings["listeners"], "listeners").values())
            address = next((a for a in bound if a[1] == port), bound[0])
            self.host, first_port = connect_address(*address)
            port = port or first_port
        self.port = port or free_port()
        self.args = list(args or [])  # extra `logflume broker` options, e.g. --event-loop
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "BrokerProcess":
        # with `listeners` in the settings, `port` is the first listener's
        listen = None if "listeners" in self.settings else self.bootstrap
        cmd = broker_command(self.data_dir, listen, settings=self.settings, extra_args=self.args)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
        try:
            wait_for_port(self.port, proc=self.proc, host=self.host)
        except BaseException:
            # a caller whose start failed has nothing to stop: left running, a broker
            # that was slow to listen would outlive the test and load the machine
            self.stop(10)
            raise
        return self

    def stop(self, timeout: float | None = None) -> int | None:
        code = super().stop(timeout)
        if getattr(self, "_log", None):
            self._log.close()
        return code

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()


def zookeeper_process(data_dir: Path, tick_ms: int = 500) -> ZooKeeperProcess:
    """A standalone ZooKeeper (Debian's package) on a free loopback port; `.stop()` it.
    It does not fsync (`force_sync=False`): a session waiting on the shared disk of a
    busy test machine timed out once, and no test is about surviving a power loss."""
    return ZooKeeperProcess(Path(data_dir), tick_ms=tick_ms, force_sync=False).start()


def zookeeper_ensemble_processes(
    data_dir: Path, count: int = 3, tick_ms: int = 500
) -> list[ZooKeeperProcess]:
    """An ensemble of `count` ZooKeepers on free loopback ports, started, serving once
    a majority runs; connect with `broker.cluster.launcher.ensemble_connect`."""
    members = zookeeper_ensemble(Path(data_dir), count, tick_ms=tick_ms, force_sync=False)
    for zk in members:
        zk.start(wait=False)
    for zk in members:
        assert zk.proc is not None
        zk.wait_serving(zk.proc)
    return members


class BrokerCluster:
    """`count` BrokerProcess-es joined through ZooKeeper at `zookeeper` (with a chroot
    per cluster, so clusters of one module share one ZooKeeper); broker ids 0..n-1.
    `per_broker(i)` adds settings of broker i (e.g. a port of its own)."""

    def __init__(
        self,
        root: Path,
        zookeeper: str,
        count: int = 3,
        settings: dict | None = None,
        per_broker=None,
    ):
        self.root = Path(root)
        self.zookeeper = zookeeper
        self.settings = dict(settings or {})
        self.per_broker = per_broker
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(count):
            self.brokers[i] = self._broker(i)

    def _broker(self, broker_id: int) -> BrokerProcess:
        cfg = {"zookeeper.connect": self.zookeeper, "broker.id": broker_id, **self.settings}
        if self.per_broker is not None:
            cfg.update(self.per_broker(broker_id))
        return BrokerProcess(self.root / f"broker-{broker_id}", settings=cfg)

    def add_broker(self) -> BrokerProcess:
        """Start one more broker, the next id, with the cluster's settings (a machine
        added to a running cluster: it starts empty). It stops with the others."""
        broker = self._broker(max(self.brokers, default=-1) + 1)
        self.brokers[broker.settings["broker.id"]] = broker
        return broker.start()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> "BrokerCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        for b in self.brokers.values():
            b.start()
        return self

    def wait_joined(self, timeout: float = 60.0) -> None:
        """Wait until every broker lists every broker in its Metadata: only then does
        each accept a topic with replication factor `count`."""
        deadline = time.monotonic() + timeout
        for b in self.brokers.values():
            left = max(0.1, deadline - time.monotonic())
            wait_for_port(
                b.port,
                left,
                b.proc,
                b.host,
                # mypy infers no type for a lambda with default arguments (misc)
                ready=lambda b=b: brokers_seen(b.port, b.host) >= len(self.brokers),  # type: ignore[misc]
            )

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGTERM)
        for b in self.brokers.values():
            b.stop(30)
