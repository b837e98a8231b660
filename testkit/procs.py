"""Real processes for tests and benchmarks: a broker subprocess on loopback.

Tests start the broker exactly as a user would (`python -m logflume broker ...`) and
talk to it over TCP on 127.0.0.1, so what passes here passes for real clients.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from testkit.ports import free_port


def wait_for_port(port: int, timeout: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


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
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode if self.proc else None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class BrokerProcess(ManagedProcess):
    """A `logflume broker` subprocess with its own data dir and port; restartable."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        settings: dict | None = None,
        args: list[str] | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})
        if port is None and "listeners" in self.settings:  # the first listener's
            from broker.listeners import parse_addresses

            port = next(iter(parse_addresses(self.settings["listeners"], "listeners").values()))[1]
        self.port = port or free_port()
        self.args = list(args or [])  # extra `logflume broker` options, e.g. --event-loop
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "BrokerProcess":
        cmd = [sys.executable, "-m", "logflume", "broker", "--data-dir", str(self.data_dir)]
        if "listeners" not in self.settings:  # else `port` is its first listener's
            cmd += ["--listen", self.bootstrap]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        cmd += self.args
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
        wait_for_port(self.port, proc=self.proc)
        return self

    def stop(self, timeout: float | None = None) -> int | None:
        code = super().stop(timeout)
        if getattr(self, "_log", None):
            self._log.close()
        return code

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()


def zookeeper_process(data_dir: Path):
    """A standalone ZooKeeper (Debian's package) on a free loopback port; `.stop()` it."""
    from broker.cluster.launcher import ZooKeeperProcess

    return ZooKeeperProcess(Path(data_dir)).start()


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
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(count):
            cfg = {"zookeeper.connect": zookeeper, "broker.id": i, **(settings or {})}
            if per_broker is not None:
                cfg.update(per_broker(i))
            self.brokers[i] = BrokerProcess(self.root / f"broker-{i}", settings=cfg)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> "BrokerCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        for b in self.brokers.values():
            b.start()
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGTERM)
        for b in self.brokers.values():
            b.stop(30)
