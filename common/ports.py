"""Ports of child processes: picking a free one to pass on a command line, and waiting
until the child serves on it. Used by `logflume cluster`, `logflume up`, the test
harness (testkit) and the benchmarks alike.

Picking: asking the OS for a free port (bind to 0, release, pass the number to a
child) lets another process be handed the same number before the child binds it;
under `make test`'s two pytest-xdist workers one broker then fails to start while its
test talks to the other worker's broker (a SASL listener, say, that closes the
connection). So each worker takes ports in turn from its own slice of 10000-31999,
below Linux's ephemeral range (32768-60999), where no outgoing connection holds one
either; a port something is bound to right now (TCP or UDP) is skipped. Outside
pytest the whole range is one slice.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import time
from collections.abc import Callable

LOW, HIGH = 10000, 32000
LOOPBACK = "127.0.0.1"


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    size = (HIGH - LOW) // max(count, 1)
    return range(LOW + index * size, LOW + (index + 1) * size)


def _cycle():
    ports = _slice()
    start = random.randrange(len(ports))  # a rerun does not retrace the last run's ports
    return itertools.cycle([*ports[start:], *ports[:start]])


_ports = _cycle()


def _bindable(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:  # as TCP servers bind: past TIME_WAIT
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A loopback port nothing is bound to now, not handed out by this process lately."""
    for _ in range(HIGH - LOW):
        port = next(_ports)
        if _bindable(port):
            return port
    raise RuntimeError("no free port in this process's slice")


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on `host`:`port`."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ProcessExited(RuntimeError):
    """The child process being waited for exited before it served."""


def wait_for_port(
    port: int,
    timeout: float = 20.0,
    proc: subprocess.Popen | None = None,
    host: str = LOOPBACK,
    ready: Callable[[], bool] | None = None,
) -> None:
    """Wait until `host`:`port` accepts connections and then `ready()` (a protocol
    level check, such as ZooKeeper's `ruok`) is true. ProcessExited as soon as
    `proc` exits; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ProcessExited(f"process exited with {proc.returncode} before serving")
        if port_open(port, host) and (ready is None or ready()):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{host}:{port} not serving after {timeout}s")
