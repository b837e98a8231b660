"""common.ports: each pytest-xdist worker hands out its own ports, none bound; waiting
for a child to serve on one."""

import socket
import subprocess
import sys

import pytest

from common import ports


def _ports_of(worker: str, n: int) -> set[int]:
    code = f"from common.ports import free_port; print(*[free_port() for _ in range({n})])"
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


@pytest.fixture
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_port_open_tells_a_listener_from_nothing(listening):
    assert ports.port_open(listening)
    assert not ports.port_open(ports.free_port())


def test_wait_for_port_returns_once_the_port_serves_and_the_check_passes(listening):
    answers = iter([False, False, True])
    ports.wait_for_port(listening, timeout=5, ready=lambda: next(answers))
    assert next(answers, "used up") == "used up"


def test_wait_for_port_times_out_naming_the_address():
    port = ports.free_port()
    with pytest.raises(TimeoutError, match=f"127.0.0.1:{port} not serving after 0.2s"):
        ports.wait_for_port(port, timeout=0.2)


def test_wait_for_port_gives_up_when_the_child_exits():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(ports.ProcessExited, match="exited with 3"):
        ports.wait_for_port(ports.free_port(), timeout=5, proc=proc)
