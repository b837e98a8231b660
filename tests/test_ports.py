"""testkit.ports: each pytest-xdist worker hands out its own ports, none bound."""

import socket
import subprocess
import sys

from testkit import ports


def _ports_of(worker: str, n: int) -> set[int]:
    code = f"from testkit.ports import free_port; print(*[free_port() for _ in range({n})])"
    env = {"PYTEST_XDIST_WORKER": worker, "PYTEST_XDIST_WORKER_COUNT": "2", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return {int(p) for p in out.stdout.split()}


def test_two_workers_never_share_a_port_and_stay_below_the_ephemeral_range():
    first, second = _ports_of("gw0", 300), _ports_of("gw1", 300)
    assert len(first) == len(second) == 300  # in turn: no port twice in a row
    assert not first & second
    assert all(ports.LOW <= p < ports.HIGH < 32768 for p in first | second)


def test_a_bound_port_is_skipped():
    taken = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", taken))
        s.listen()
        assert not ports._bindable(taken)
