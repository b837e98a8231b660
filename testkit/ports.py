"""Ports for the servers tests start, handed out so that two test processes never
pick the same one.

`make test` runs two pytest-xdist workers. Asking the OS for a free port (bind to 0,
release, pass the number to a child) lets the other worker be handed the same number
before the child binds it: one broker then fails to start while its test talks to the
other worker's broker (a SASL listener, say, that closes the connection). So each
worker takes ports in turn from its own slice of 10000-31999, below Linux's ephemeral
range (32768-60999), where no outgoing connection holds one either; a port something
is bound to right now (TCP or UDP) is skipped.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

LOW, HIGH = 10000, 32000


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
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A loopback port nothing is bound to now, not handed out by this process lately."""
    for _ in range(HIGH - LOW):
        port = next(_ports)
        if _bindable(port):
            return port
    raise RuntimeError("no free port in this worker's slice")
