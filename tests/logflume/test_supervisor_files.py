"""A supervised child with a log file, a pid file and a restart file (as `logflume
cluster up` runs its brokers): output goes to the file, the pid file follows
restarts, and the restart file asks for a graceful restart."""

import io
import os
import signal

from logflume.supervisor import ChildSpec, Supervisor
from testkit.procs import wait_until


def pid_in(pid_file) -> int | None:
    """The pid in the file; None while it is missing or being rewritten."""
    try:
        return int(pid_file.read_text())
    except (FileNotFoundError, ValueError):
        return None


def test_log_and_pid_files_follow_the_child_through_a_restart(tmp_path):
    out = io.BytesIO()
    sup = Supervisor(stream=out, color=False, grace=2.0)
    log, pid_file = tmp_path / "child.log", tmp_path / "child.pid"
    argv = ["sh", "-c", "echo started; exec sleep 30"]
    spec = ChildSpec("child", argv, log_file=log, pid_file=pid_file)
    sup.supervising = True
    try:
        first = sup.start(spec).pid
        assert pid_in(pid_file) == first
        # Kill it only once it has written: a child killed before its first line
        # would leave one "started" in the log after the restart, not two.
        wait_until(lambda: "started" in log.read_text(), 15, log.read_text)

        def restarted() -> bool:
            sup.poll()
            return pid_in(pid_file) not in (None, first)

        os.kill(first, signal.SIGKILL)
        wait_until(restarted, 15, lambda: out.getvalue().decode())
        assert pid_in(pid_file) == sup.children[0].pid
        wait_until(lambda: log.read_text().count("started") == 2, 15, log.read_text)
    finally:
        sup.stop()
    assert not pid_file.exists()
    console = out.getvalue().decode()
    assert "child killed by SIGKILL; restarting in 1s" in console
    assert "[child] started" not in console


def test_a_restart_file_restarts_the_child_at_once_without_reporting_a_crash(tmp_path):
    """What `logflume cluster restart --rolling` asks of `cluster up`: the child gets
    SIGTERM, is started again as soon as it has exited (no backoff), and the request
    file is gone once the supervisor has taken it."""
    out = io.BytesIO()
    sup = Supervisor(stream=out, color=False, grace=5.0)
    terms = tmp_path / "terms"
    pid_file, request = tmp_path / "child.pid", tmp_path / "child.restart"
    ready = tmp_path / "ready"
    script = (
        f"trap 'echo term >> {terms}; exit 0' TERM; echo > {ready}; while :; do sleep 0.05; done"
    )
    spec = ChildSpec("child", ["sh", "-c", script], pid_file=pid_file, restart_file=request)
    sup.supervising = True
    try:
        first = sup.start(spec).pid
        wait_until(ready.exists, 15, "the child's trap")
        request.write_text("")

        def restarted() -> bool:
            sup.poll()
            return pid_in(pid_file) not in (None, first)

        wait_until(restarted, 15, lambda: out.getvalue().decode())
        assert not request.exists()
        assert terms.read_text().split() == ["term"]
        assert sup.children[0].restarts == 0
    finally:
        sup.stop()
    console = out.getvalue().decode()
    assert f"restart of child (pid {first}) asked: stopping it" in console
    assert "child exited with code 0; starting it again as asked" in console
    assert "restarting in" not in console


def test_a_requested_restart_kills_a_child_that_ignores_sigterm(tmp_path):
    out = io.BytesIO()
    sup = Supervisor(stream=out, color=False, grace=0.5)
    request = tmp_path / "stubborn.restart"
    ready = tmp_path / "ready"
    script = f"trap '' TERM; echo > {ready}; while :; do sleep 0.05; done"
    spec = ChildSpec("stubborn", ["sh", "-c", script], restart_file=request)
    sup.supervising = True
    try:
        first = sup.start(spec).pid
        wait_until(ready.exists, 15, "the child's trap")
        request.write_text("")

        def restarted() -> bool:
            sup.poll()
            return sup.children[0].pid != first and sup.children[0].running

        wait_until(restarted, 15, lambda: out.getvalue().decode())
    finally:
        sup.stop()
    console = out.getvalue().decode()
    assert "stubborn ignored SIGTERM for 0s; killing it" in console
    assert "stubborn killed by SIGKILL; starting it again as asked" in console


def test_a_request_left_while_the_child_was_down_is_met_by_its_start(tmp_path):
    request = tmp_path / "child.restart"
    request.write_text("")
    sup = Supervisor(stream=io.BytesIO(), color=False, grace=2.0)
    try:
        first = sup.start(ChildSpec("child", ["sleep", "30"], restart_file=request)).pid
        assert not request.exists()
        sup.supervising = True
        sup.poll()
        assert sup.children[0].pid == first
    finally:
        sup.stop()
