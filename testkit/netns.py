"""Network partitions for cluster tests: one Linux network namespace per node.

`NetLab` builds, per test, a private network the test owns and nothing else:

    switch namespace  <tag>-sw:  bridge br0, one veth port p<i> per node
    node namespaces   <tag>-<name>: lo + eth0 (the veth peer), 10.213.<n>.<10+i>/24

Every interface lives inside a namespace the lab created (veth pairs are created in
the switch namespace with their peer moved straight into the node's namespace), so
the host's own interfaces, routes and firewall are never touched. `<tag>` is
`lfnt<pytest pid>x<random>`; labs left behind by a killed test run (their pid is
gone) are swept before a new lab starts.

Faults are iptables DROP rules inside the two node namespaces concerned (INPUT from
and OUTPUT to the peer's address, on both sides): packets vanish silently, as in a
real partition, so TCP connections hang rather than fail; `heal` deletes the rules
and the same connections carry on.

Processes run with `ip netns exec <ns> ...` (the pid is the command itself).
`inside(name)` moves the calling thread into a node's namespace (setns); threads it
starts afterwards (librdkafka's, kazoo's) inherit it. That is how test code acts as a
client from the client namespace. `close()` kills every process of the lab, deletes
the veth pairs and the namespaces, and is safe to call after any failure.

Needs root (CAP_NET_ADMIN / CAP_SYS_ADMIN), iproute2 and iptables (deploy/system-deps.sh
installs them); `check_support()` fails with a plain message otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from broker.cluster.launcher import ZooKeeperProcess, broker_command
from common.ports import wait_for_port
from common.processes import running

PREFIX = "lfnt"
SBIN_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
CLONE_NEWNET = 0x40000000


class NetnsUnavailable(RuntimeError):
    """This machine cannot run network-namespace tests (not root, tools missing)."""


def _tool(name: str) -> str:
    path = shutil.which(name, path=SBIN_PATH)
    if path is None:
        raise NetnsUnavailable(
            f"`{name}` not found: network-partition tests need iproute2 and iptables "
            "(bash deploy/system-deps.sh, or apt-get install iproute2 iptables)"
        )
    return path


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def check_support() -> None:
    """Raise NetnsUnavailable with the reason if namespaces cannot be used here."""
    if os.geteuid() != 0:
        raise NetnsUnavailable(
            "network-partition tests must run as root (they create network namespaces, "
            "veth pairs and iptables rules); CI runs the suite as root"
        )
    ip, iptables = _tool("ip"), _tool("iptables")
    probe = f"{PREFIX}{os.getpid()}xprobe"
    res = _run([ip, "netns", "add", probe], check=False)
    if res.returncode != 0:
        raise NetnsUnavailable(f"cannot create a network namespace: {res.stderr.strip()}")
    try:
        res = _run([ip, "netns", "exec", probe, iptables, "-L", "INPUT", "-n"], check=False)
        if res.returncode != 0:
            raise NetnsUnavailable(
                f"iptables does not work inside a namespace: {res.stderr.strip()}"
            )
    finally:
        _run([ip, "netns", "del", probe], check=False)


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@dataclass
class Node:
    name: str
    ns: str
    ip: str
    port: str  # the veth end on the bridge, in the switch namespace


class NetLab:
    """One test's namespaces, links, faults and processes. Owned by one test thread."""

    def __init__(self, subnet_octet: int | None = None):
        check_support()
        self.ip_cmd = _tool("ip")
        self.iptables = _tool("iptables")
        sweep_stale()
        self.tag = f"{PREFIX}{os.getpid()}x{secrets.token_hex(2)}"
        octet = random.randrange(1, 255) if subnet_octet is None else subnet_octet
        self.prefix = f"10.213.{octet}"
        self.switch = f"{self.tag}-sw"
        self.nodes: dict[str, Node] = {}
        self.procs: list[subprocess.Popen] = []
        self.cuts: set[frozenset[str]] = set()
        self._namespaces: list[str] = []
        self._add_ns(self.switch)
        self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", self.switch, "link", "set", "br0", "up")

    # -- building -----------------------------------------------------------------------

    def _ip(self, *args: str) -> None:
        _run([self.ip_cmd, *args])

    def _add_ns(self, ns: str) -> None:
        self._ip("netns", "add", ns)
        self._namespaces.append(ns)
        self._ip("-n", ns, "link", "set", "lo", "up")

    def add(self, name: str) -> Node:
        """A node namespace on the bridge; returns it (with its address)."""
        index = len(self.nodes)
        node = Node(name, f"{self.tag}-{name}", f"{self.prefix}.{10 + index}", f"p{index}")
        self._add_ns(node.ns)
        sw = self.switch
        self._ip(
            "-n", sw, "link", "add", node.port, "type", "veth", "peer", "name", "eth0", "netns",
            node.ns,
        )  # fmt: skip
        self._ip("-n", sw, "link", "set", node.port, "master", "br0", "up")
        self._ip("-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
        self._ip("-n", node.ns, "link", "set", "eth0", "up")
        self.nodes[name] = node
        return node

    def ip(self, name: str) -> str:
        return self.nodes[name].ip

    # -- faults -------------------------------------------------------------------------

    def _rules(self, a: str, b: str, op: str) -> None:
        for here, there in ((a, b), (b, a)):
            ns, peer = self.nodes[here].ns, self.nodes[there].ip
            for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                cmd = [self.ip_cmd, "netns", "exec", ns, self.iptables, op, chain]
                _run([*cmd, flag, peer, "-j", "DROP"])

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between nodes `a` and `b`, both ways."""
        key = frozenset((a, b))
        if key not in self.cuts:
            self._rules(a, b, "-I")
            self.cuts.add(key)

    def heal(self, a: str, b: str) -> None:
        key = frozenset((a, b))
        if key in self.cuts:
            self._rules(a, b, "-D")
            self.cuts.discard(key)

    def isolate(self, name: str, from_: list[str]) -> None:
        for other in from_:
            self.cut(name, other)

    def heal_all(self) -> None:
        for key in list(self.cuts):
            self.heal(*sorted(key))

    # -- processes ----------------------------------------------------------------------

    def popen(self, name: str, cmd: list[str], log_path: Path, **kwargs) -> subprocess.Popen:
        """Start `cmd` inside node `name`'s namespace, output appended to `log_path`."""
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [self.ip_cmd, "netns", "exec", self.nodes[name].ns, *cmd],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kwargs,
            )
        self.procs.append(proc)
        return proc

    @contextlib.contextmanager
    def inside(self, name: str):
        """Run the calling thread (and threads it starts) in node `name`'s namespace."""
        target = os.open(f"/run/netns/{self.nodes[name].ns}", os.O_RDONLY)
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield self.nodes[name]
            finally:
                _setns(home)
        finally:
            os.close(target)
            os.close(home)

    # -- teardown -----------------------------------------------------------------------

    def close(self) -> None:
        """Kill the lab's processes, delete its links and namespaces. Idempotent."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        self.procs.clear()
        _remove_namespaces(self.ip_cmd, list(reversed(self._namespaces)))
        self._namespaces.clear()
        self.nodes.clear()
        self.cuts.clear()


def _remove_namespaces(ip_cmd: str, namespaces: list[str]) -> None:
    for ns in namespaces:  # anything still running in them was started by the lab
        res = _run([ip_cmd, "netns", "pids", ns], check=False)
        for pid in res.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    for ns in namespaces:
        if ns.endswith("-sw"):  # deleting the bridge ports deletes their veth peers
            res = _run([ip_cmd, "-n", ns, "-o", "link", "show", "type", "veth"], check=False)
            for line in res.stdout.splitlines():
                port = line.split(":")[1].strip().split("@")[0]
                _run([ip_cmd, "-n", ns, "link", "del", port], check=False)
    deadline = time.monotonic() + 10
    for ns in namespaces:
        while _run([ip_cmd, "netns", "del", ns], check=False).returncode != 0:
            if not Path(f"/run/netns/{ns}").exists() or time.monotonic() > deadline:
                break
            time.sleep(0.1)


def lab_namespaces() -> list[str]:
    """Names of every namespace made by a NetLab (this or another test run)."""
    ip_cmd = _tool("ip")
    res = _run([ip_cmd, "netns", "list"], check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.startswith(PREFIX)]


def sweep_stale() -> list[str]:
    """Remove namespaces of labs whose test process is gone (a SIGKILLed pytest)."""
    stale = []
    for ns in lab_namespaces():
        pid = ns[len(PREFIX) :].split("x", 1)[0]
        if pid.isdigit() and not running(int(pid)):
            stale.append(ns)
    if stale:
        _remove_namespaces(_tool("ip"), stale)
    return stale


# -- a ZooKeeper + brokers cluster spread over a lab's namespaces --------------------------

ZK_PORT = 2181
BROKER_PORT = 9092
CHROOT = "logflume"


class NetnsCluster:
    """ZooKeeper in namespace `zk`, broker i in `b<i>`, a `client` namespace; every
    one of them on the lab's bridge. Readiness checks connect from the calling thread,
    so call `start()` inside `lab.inside("client")`. Owned by one test thread."""

    def __init__(
        self,
        lab: NetLab,
        root: Path,
        brokers: int = 3,
        settings: dict | None = None,
        listeners: dict[str, int] | None = None,
    ):
        """`listeners`: more listeners {NAME: port} beside PLAINTEXT on BROKER_PORT,
        on every broker's own address (their protocol from `settings`)."""
        self.lab = lab
        self.root = Path(root)
        self.count = brokers
        self.settings = dict(settings or {})
        self.listeners = {"PLAINTEXT": BROKER_PORT, **(listeners or {})}
        lab.add("zk")
        for i in range(brokers):
            lab.add(f"b{i}")
        lab.add("client")
        self.zk_proc: subprocess.Popen | None = None
        self.procs: dict[int, subprocess.Popen] = {}

    @property
    def zk_connect(self) -> str:
        return f"{self.lab.ip('zk')}:{ZK_PORT}/{CHROOT}"

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_of("PLAINTEXT")

    def address(self, broker_id: int, listener: str = "PLAINTEXT") -> str:
        return f"{self.lab.ip(f'b{broker_id}')}:{self.listeners[listener]}"

    def bootstrap_of(self, listener: str) -> str:
        return ",".join(self.address(i, listener) for i in range(self.count))

    def node(self, broker_id: int) -> str:
        return f"b{broker_id}"

    def log_path(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.log"

    def data_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def start(self) -> NetnsCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        zk = ZooKeeperProcess(
            self.root / "zookeeper", ZK_PORT, host=self.lab.ip("zk"), force_sync=False
        )
        self.zk_proc = self.lab.popen("zk", zk.command(), zk.log_path)
        zk.wait_serving(self.zk_proc, timeout_s=60)
        for i in range(self.count):
            self.start_broker(i)
        return self

    def start_broker(self, i: int) -> None:
        ip = self.lab.ip(self.node(i))
        listeners = ",".join(f"{name}://{ip}:{port}" for name, port in self.listeners.items())
        settings = {"listeners": listeners, **self.settings}
        cmd = broker_command(
            self.data_dir(i), zookeeper=self.zk_connect, broker_id=i, settings=settings
        )
        proc = self.procs[i] = self.lab.popen(self.node(i), cmd, self.log_path(i))
        wait_for_port(BROKER_PORT, 60, proc, host=ip)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every broker (then ZooKeeper) and wait; the lab kills stragglers."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
        if self.zk_proc is not None and self.zk_proc.poll() is None:
            self.zk_proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.zk_proc.wait(10)
