"""A supervised child with a log file and a pid file (as `logflume cluster up` runs
its brokers): output goes to the file, the pid file follows restarts."""

import io
import os
import signal
import time

from logflume.supervisor import ChildSpec, Supervisor


def test_log_and_pid_files_follow_the_child_through_a_restart(tmp_path):
    out = io.BytesIO()
    sup = Supervisor(stream=out, color=False, grace=2.0)
    log, pid_file = tmp_path / "child.log", tmp_path / "child.pid"
    argv = ["sh", "-c", "echo started; exec sleep 30"]
    spec = ChildSpec("child", argv, log_file=log, pid_file=pid_file)
    sup.supervising = True
    try:
        first = sup.start(spec).pid
        assert int(pid_file.read_text()) == first
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while not (pid_file.exists() and int(pid_file.read_text()) != first):
            assert time.monotonic() < deadline, out.getvalue().decode()
            sup.poll()
            time.sleep(0.05)
        second = sup.children[0].pid
        assert int(pid_file.read_text()) == second
        deadline = time.monotonic() + 15
        while log.read_text().count("started") < 2:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        sup.stop()
    assert not pid_file.exists()
    console = out.getvalue().decode()
    assert "child killed by SIGKILL; restarting in 1s" in console
    assert "[child] started" not in console
