"""A Spark standalone cluster (a master and its workers) for tests and the fleet lab.

The daemons are started with the Spark that pyspark installs, through its own
launcher, as on a real cluster:

    $SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master --host H --port P --webui-port U
    $SPARK_HOME/bin/spark-class org.apache.spark.deploy.worker.Worker --host H --port 0 \\
        --webui-port U_i --cores C --memory M --work-dir <root>/worker-<i>/work spark://H:P

A driver (`logflume etl ... --master spark://H:P`) then gets one executor per worker,
each a JVM of its own that the worker starts as its child, with Python workers of its
own. `start()` returns once the master's web UI (`/json/`) lists every worker ALIVE.

What the daemons' environment holds, and why:

- SPARK_HOME: pyspark's package directory (`find_spark_home`), which holds the jars
  and `bin/spark-class`; the workers launch executors from the same Spark.
- SPARK_CONF_DIR: an empty `<root>/conf`, so that no spark-env.sh or
  spark-defaults.conf of the installation changes the test cluster.
- SPARK_LOCAL_IP: `host`. The RPC endpoints bind to `--host`, but the web UIs bind to
  SPARK_LOCAL_IP (0.0.0.0 without it); so nothing listens beyond `host`.
- SPARK_DAEMON_MEMORY=256m: the master's and workers' heap (Spark's default is 1g);
  they only keep the books. Executors get the application's spark.executor.memory
  (1g by default, which `memory_per_worker` must leave room for).
- SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS: the JIT's quick tier only and the serial
  collector: fewer compiler and GC threads compete for two cores shared with other
  work, and the JVMs start sooner (tests/spark_etl/test_standalone.py's cluster in
  half the time). The faster code the full JIT makes later is of no use to daemons
  that only keep the books, nor to test-sized jobs, whose drivers and executors a
  test gives the same options (spark.driver.extraJavaOptions,
  spark.executor.extraJavaOptions). And no performance-data file, which the JVM
  would keep in /tmp/hsperfdata_<user> whatever its temporary directory (jps and
  jstat then do not list these JVMs).
- SPARK_LOCAL_DIRS: `<root>/<daemon>/local`, the scratch space a worker hands its
  executors (shuffle and block files); the work directories (executors' stdout and
  stderr, their current directory) are `--work-dir <root>/worker-<i>/work`.
- TMPDIR and JAVA_TOOL_OPTIONS=-Djava.io.tmpdir=<root>/tmp: the temporary files of
  the daemons, of the executors and of their Python workers (which inherit a worker's
  environment), such as the native libraries the JVM unpacks, stay under `root`.
- PYTHONPATH: the directory this `spark_etl` was imported from, first. Executors'
  Python workers import the project's packages (the `logflume` data source's reader,
  the offline job's batch store); with this they import the same code as the test
  that started the cluster, not another copy that an editable install or
  site-packages would find first.

The interpreter of the executors' Python workers is not the cluster's to choose: it
travels with every Python function from the driver, which takes it from its
PYSPARK_PYTHON (`spark_etl.session.spark_session` sets that to the driver's own
interpreter). `driver_env()` is the environment for a driver subprocess of the tests:
that interpreter and the same PYTHONPATH.

The daemons and executors all run on this machine, so a local `--output` or
`--checkpoint` of a driver on it is a path the driver and every executor share; a
cluster of several machines needs shared storage instead (deploy/README.md).

Ports: on a loopback `host`, every listener gets a free port (common.ports), and the
workers' RPC ports are chosen by the OS. On any other address (a network namespace of
the fleet lab, which has ports of its own) Spark's defaults are used unless given:
master 7077, its UI 8080, worker i's UI 8081 + i.

`popen(cmd, log_path, env) -> Popen` starts each daemon; the fleet lab passes
`lambda cmd, log, env: lab.popen("spark", cmd, log, env=env)` to run them in a node's
namespace (then call `start()` from a thread inside a namespace that reaches `host`,
`lab.inside(...)`, as its readiness checks connect to the master's UI). The default
is a plain subprocess in a session of its own. `kill_worker(i)` and `stop()` send
SIGTERM (a worker then stops its executors), then SIGKILL to whatever is left of the
daemon's process tree and of its process group, which its executors and their Python
workers join, and return once every one of those processes is gone. (A worker asked
to launch an executor while it shuts down may still start one, which then outlives
it; the group holds it, so give each daemon a session of its own, as `lab.popen`
does.)
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from common.ports import free_port
from testkit.procs import wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY = "256m"
# JVM options for the daemons, and for the drivers and executors of tests (module
# docstring).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
MASTER_PORT, MASTER_UI_PORT, WORKER_UI_PORT = 7077, 8080, 8081

Launcher = Callable[[list[str], Path, dict[str, str]], subprocess.Popen]


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def project_root() -> str:
    """The directory the project's packages (`spark_etl`, `logflume`...) are imported from."""
    import spark_etl

    return str(Path(spark_etl.__file__).resolve().parents[1])


def python_path(env: Mapping[str, str]) -> str:
    """PYTHONPATH with the project's directory first."""
    return os.pathsep.join(p for p in (project_root(), env.get("PYTHONPATH", "")) if p)


def driver_env() -> dict[str, str]:
    """The environment of a driver subprocess (`python -m logflume etl ...`) that runs
    this interpreter and this project's code on the cluster, whatever its cwd.
    Without the SPARK_LOCAL_IP that a local-mode session of the calling process set
    (`spark_etl.session.local_listeners`): the driver picks its address as a user's
    would."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")
    }
    return {**env, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": python_path(os.environ)}


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _default_popen(cmd: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, parent pid, process group, start time) of `pid`, None if there is no
    such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _processes() -> dict[int, tuple[str, int, int, int]]:
    """`_stat` of every process that runs (zombies left out)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None and st[0] != "Z":
            found[int(entry)] = st
    return found


def process_tree(pid: int) -> dict[int, int]:
    """{pid: start time} of `pid` and every running descendant (a worker's executors
    and their Python workers); the start time tells a reused pid from the process."""
    stats = _processes()
    tree, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in stats and p not in tree:
            tree[p] = stats[p][3]
            todo.extend(c for c, st in stats.items() if st[1] == p)
    return tree


def is_running(pid: int, started: int) -> bool:
    """Whether the process `pid` that started at `started` (`process_tree`) still runs."""
    st = _stat(pid)
    return st is not None and st[0] != "Z" and st[3] == started


def _group_of(proc: subprocess.Popen) -> int | None:
    """`proc`'s process group, which the processes it starts join (a worker's executors
    and their Python workers); None when that is the caller's own group (a `popen`
    without a session of its own), which must not be killed."""
    try:
        group = os.getpgid(proc.pid)
    except ProcessLookupError:
        return None
    return None if group == os.getpgrp() else group


class SparkStandalone:
    """A master and `workers` workers on `host`, everything under `root`."""

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        workers: int = 2,
        cores_per_worker: int = 1,
        memory_per_worker: str = "1g",
        popen: Launcher | None = None,
        port: int | None = None,
        ui_port: int | None = None,
        worker_ui_ports: list[int] | None = None,
    ):
        self.root = Path(root).absolute()
        self.host = host
        self.count = workers
        self.cores = cores_per_worker
        self.memory = memory_per_worker
        self.popen = popen or _default_popen
        loopback = _is_loopback(host)
        self.port = port or (free_port() if loopback else MASTER_PORT)
        self.ui_port = ui_port or (free_port() if loopback else MASTER_UI_PORT)
        if worker_ui_ports is None:
            worker_ui_ports = [
                free_port() if loopback else WORKER_UI_PORT + i for i in range(workers)
            ]
        self.worker_ui_ports = list(worker_ui_ports)
        self.master: subprocess.Popen | None = None
        self.workers: dict[int, subprocess.Popen] = {}
        self.groups: dict[int, int | None] = {}  # pid -> process group (`_group_of`)

    @property
    def master_url(self) -> str:
        return f"spark://{_url_host(self.host)}:{self.port}"

    @property
    def master_log(self) -> Path:
        return self.root / "master.log"

    def worker_log(self, i: int) -> Path:
        return self.root / f"worker-{i}.log"

    def worker_dir(self, i: int) -> Path:
        """Worker i's work directory: `<app id>/<executor id>/stderr` for each executor."""
        return self.root / f"worker-{i}" / "work"

    def _env(self, daemon: str) -> dict[str, str]:
        tmp = self.root / "tmp"
        local = self.root / daemon / "local"
        for d in (tmp, local, self.root / "conf"):
            d.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_CONF_DIR": str(self.root / "conf"),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS,
            "SPARK_LOCAL_DIRS": str(local),
            "TMPDIR": str(tmp),
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp}",
            "PYTHONPATH": python_path(os.environ),
        }

    def _spark_class(self, main: str, *args: str) -> list[str]:
        return [os.path.join(spark_home(), "bin", "spark-class"), main, *args]

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        """Start the master, then the workers; return once every worker is ALIVE."""
        self.root.mkdir(parents=True, exist_ok=True)
        cmd = self._spark_class(
            MASTER_CLASS, "--host", self.host, "--port", str(self.port),
            "--webui-port", str(self.ui_port),
        )  # fmt: skip
        self.master = self._launch(cmd, self.master_log, "master")
        wait_until(
            lambda: self._running(self.master, self.master_log) and self.master_state(),
            timeout,
            what=lambda: f"the Spark master's UI on port {self.ui_port}",
            every=0.2,
        )
        for i in range(self.count):
            self.start_worker(i)
        self.wait_alive(timeout)
        return self

    def wait_alive(self, timeout: float = 120.0) -> None:
        """Until the master lists every started worker ALIVE."""
        wait_until(
            lambda: self._all_running() and len(self.alive_workers()) == len(self.workers),
            timeout,
            what=lambda: f"{len(self.workers)} workers ALIVE, {self.master_state()}",
            every=0.2,
        )

    def start_worker(self, i: int) -> None:
        """Start worker i (again, after `kill_worker(i)`: then `wait_alive()`)."""
        work = self.worker_dir(i)
        work.mkdir(parents=True, exist_ok=True)
        cmd = self._spark_class(
            WORKER_CLASS, "--host", self.host, "--port", "0",
            "--webui-port", str(self.worker_ui_ports[i]), "--cores", str(self.cores),
            "--memory", self.memory, "--work-dir", str(work), self.master_url,
        )  # fmt: skip
        self.workers[i] = self._launch(cmd, self.worker_log(i), f"worker-{i}")

    def _launch(self, cmd: list[str], log: Path, daemon: str) -> subprocess.Popen:
        proc = self.popen(cmd, log, self._env(daemon))
        self.groups[proc.pid] = _group_of(proc)
        return proc

    def _terminate(self, proc: subprocess.Popen, timeout: float) -> None:
        _terminate(proc, self.groups.pop(proc.pid, None), timeout)

    def _running(self, proc: subprocess.Popen, log: Path) -> bool:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{log.stem} exited with {proc.returncode}:\n{tail}")
        return True

    def _all_running(self) -> bool:
        assert self.master is not None, "the master was not started"
        return self._running(self.master, self.master_log) and all(
            self._running(p, self.worker_log(i)) for i, p in self.workers.items()
        )

    def _json(self, port: int) -> dict | None:
        url = f"http://{_url_host(self.host)}:{port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return json.load(resp)
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def master_state(self) -> dict | None:
        """The master UI's `/json/`: workers, activeapps, completedapps (None if it
        does not answer)."""
        return self._json(self.ui_port)

    def worker_state(self, i: int) -> dict | None:
        """Worker i's UI `/json/`: its executors and finishedexecutors (with appid)."""
        return self._json(self.worker_ui_ports[i])

    def alive_workers(self) -> list[int]:
        """The indexes of this cluster's workers that the master lists as ALIVE."""
        state = self.master_state() or {}
        ports = {
            w["webuiaddress"].rsplit(":", 1)[-1]
            for w in state.get("workers", [])
            if w.get("state") == "ALIVE"
        }
        return [i for i, port in enumerate(self.worker_ui_ports) if str(port) in ports]

    def kill_worker(self, i: int, timeout: float = 30.0) -> None:
        """Stop worker i and its executors (SIGTERM, SIGKILL after `timeout`)."""
        proc = self.workers.pop(i, None)
        if proc is not None:
            self._terminate(proc, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every worker (with its executors), then the master. Idempotent."""
        for i in list(self.workers):
            self.kill_worker(i, timeout)
        if self.master is not None:
            self._terminate(self.master, timeout)
            self.master = None


def _terminate(proc: subprocess.Popen, group: int | None, timeout: float) -> None:
    """SIGTERM `proc`; after `timeout`, or at once when it is gone, SIGKILL what is left
    of its process tree and its process `group` (an executor that a worker launched
    while shutting down is no longer its child once the worker is gone, but it is in
    the group); then wait until all of that is gone."""
    tree = process_tree(proc.pid)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    tree.update(process_tree(proc.pid))
    for pid, started in tree.items():
        if is_running(pid, started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if group is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    proc.wait(10)

    def left() -> list[int]:
        members = [p for p, st in _processes().items() if group is not None and st[2] == group]
        return members + [p for p, started in tree.items() if is_running(p, started)]

    deadline = time.monotonic() + 10
    while stragglers := left():
        if time.monotonic() > deadline:
            # started from a list (the annotation allows a string or a path)
            what = proc.args[1:3]  # type: ignore[index]
            raise RuntimeError(f"processes {stragglers} of {what!r} outlived SIGKILL")
        time.sleep(0.05)
