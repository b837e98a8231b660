import io
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from logflume.supervisor import Child, ChildExited, ChildSpec, Supervisor
from tests.logflume.proc_scan import alive, descendants, wait_gone


def sh(name, script, restart=True):
    return ChildSpec(name, ["sh", "-c", script], restart=restart)


def poll_until(sup, predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        sup.poll()
        time.sleep(0.05)


@pytest.fixture
def sup():
    out = io.BytesIO()
    s = Supervisor(stream=out, color=False, grace=2.0)
    s.buffer = out
    yield s
    s.stop()


def text(sup):
    return sup.buffer.getvalue().decode()


def test_each_line_is_labelled_and_aligned(sup):
    sup.start(sh("broker", "echo one; echo two >&2; sleep 30"))
    sup.start(sh("a", "echo three; sleep 30"))
    poll_until(sup, lambda: text(sup).count("\n") >= 3)
    lines = set(text(sup).splitlines())
    assert {"[broker] one", "[broker] two", "[a]      three"} <= lines


def test_colors_when_asked(sup):
    sup.output.color = True
    sup.start(sh("agent", "echo hi; sleep 30"))
    poll_until(sup, lambda: "hi" in text(sup))
    assert "\x1b[" in text(sup) and "[agent]" in text(sup)


def test_json_output_is_one_object_per_line():
    """`--log-format json`: a child's JSON lines are kept and say which child wrote
    them; its other lines and the supervisor's own messages become objects too."""
    out = io.BytesIO()
    s = Supervisor(stream=out, color=True, grace=2.0, log_format="json")
    s.buffer = out
    try:
        child = s.start(
            sh(
                "broker",
                """echo '{"level":"ERROR","message":"m","pid":1}'; \
            echo plain >&2; sleep 30""",
            )
        )
        poll_until(s, lambda: text(s).count("\n") >= 2)
        s.say("banner\nsecond line", logging.WARNING)
    finally:
        s.stop()
    rows = [json.loads(line) for line in text(s).splitlines()]
    assert {"level": "ERROR", "message": "m", "pid": 1, "child": "broker"} in rows
    (plain,) = [r for r in rows if r["message"] == "plain"]
    assert (plain["level"], plain["logger"], plain["pid"]) == ("INFO", "broker", child.pid)
    (own,) = [r for r in rows if r["message"] == "banner\nsecond line"]
    assert (own["level"], own["logger"], own["pid"]) == ("WARNING", "up", os.getpid())
    assert "child" not in own and "\x1b[" not in text(s)


def test_restart_delays_are_one_second_doubling_to_thirty_reset_after_thirty_up():
    backoff = Child(ChildSpec("child", ["true"])).backoff
    assert [backoff.after_run(uptime=0) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.after_run(uptime=30) == 1


def test_exit_during_startup_is_fatal(sup):
    sup.start(sh("broker", "echo boom; exit 3"))
    with pytest.raises(ChildExited) as err:
        poll_until(sup, lambda: False)
    assert err.value.name == "broker" and err.value.code == 3


def test_crash_is_reported_and_restarted_with_backoff(sup):
    sup.supervising = True
    sup.start(sh("gen", "echo started; exit 1"))
    poll_until(sup, lambda: text(sup).count("started") >= 3, timeout=15)
    out = text(sup)
    assert "gen exited with code 1; restarting in 1s" in out
    assert "gen exited with code 1; restarting in 2s" in out
    assert "restarting gen (restart #2)" in out


def test_child_without_restart_is_left_alone(sup):
    sup.supervising = True
    sup.start(sh("once", "exit 0", restart=False))
    poll_until(sup, lambda: "not restarting" in text(sup))
    assert sup.children[0].proc is None


def test_stop_goes_in_reverse_order_and_kills_the_stubborn(sup, tmp_path):
    order = tmp_path / "order"

    def polite(n):
        return f"trap 'echo {n} >> {order}; exit 0' TERM; echo up; while :; do sleep 0.05; done"

    sup.start(sh("first", polite("first")))
    sup.start(sh("second", polite("second")))
    sup.start(sh("stubborn", "trap '' TERM; echo up; while :; do sleep 0.05; done"))
    poll_until(sup, lambda: text(sup).count("up") >= 3)
    pids = {c.pid for c in sup.children}
    sup.grace = 0.5
    sup.stop()
    assert order.read_text().split() == ["second", "first"]
    assert "stubborn ignored SIGTERM" in text(sup)
    assert not any(alive(p) for p in pids)


def test_stop_takes_the_whole_process_group(sup):
    sup.start(sh("spark", "sleep 60 & sleep 60 & echo up; wait"))
    poll_until(sup, lambda: "up" in text(sup))
    helpers = descendants(sup.children[0].pid)
    assert len(helpers) == 2
    sup.stop()
    assert wait_gone(helpers, timeout=5) == set()


def test_term_to_the_leader_only_then_kill_the_rest(sup, tmp_path):
    log = tmp_path / "log"
    helper = f"trap 'echo helper >> {log}' TERM; while :; do sleep 0.05; done"
    leader = f"sh -c \"{helper}\" & trap 'echo leader >> {log}; exit 0' TERM; echo up; wait"
    sup.start(ChildSpec("spark", ["sh", "-c", leader], term_group=False))
    poll_until(sup, lambda: "up" in text(sup))
    time.sleep(0.2)
    helpers = descendants(sup.children[0].pid)
    sup.grace = 0.5
    sup.stop()
    assert log.read_text().split() == ["leader"]
    assert wait_gone(helpers, timeout=5) == set()


SUPERVISOR_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from logflume.supervisor import ChildSpec, Supervisor
    sup = Supervisor(stream=sys.stdout.buffer, color=False)
    child = sup.start(ChildSpec("sleeper", ["sleep", "60"]))
    print("child", child.pid, flush=True)
    time.sleep(60)
    """
)


def test_children_die_when_the_supervisor_is_killed():
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR_SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    try:
        line = proc.stdout.readline()
        child = int(line.split()[1])
        assert alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert wait_gone({child}, timeout=5) == set()
    finally:
        proc.kill()
        proc.wait(10)
