"""A supervised child with a log file and a pid file (as `logflume cluster up` runs
its brokers): output goes to the file, the pid file follows restarts."""

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
