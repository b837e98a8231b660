"""`logflume cluster restart --rolling` on a `logflume cluster up` cluster: every
broker is restarted in turn (the controller last) by the supervisor, without a
crash report, under acks=all load from idempotent confluent-kafka and kafka-python
producers, which see no delivery error; reading the topic back gives every
acknowledged record exactly once. The plan alone (`--dry-run`) restarts nothing, and
a step that cannot complete stops the roll with status 1."""

import os
import signal
import subprocess
import sys
from collections import Counter

from testkit.producers import Producers
from tests.cluster.test_cluster_restart import DEADLINE, _rf3_topic, cluster  # noqa: F401
from tests.cluster.util import consume_all, wait_until
from tests.logflume.proc_scan import alive

BROKERS = ["broker-0", "broker-1", "broker-2"]


def _restart(up, *flags: str, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "logflume", "cluster", "restart", "--data-dir", str(up.data)]
    return subprocess.run(
        [*cmd, *flags], capture_output=True, text=True, timeout=timeout * 4 + 60, check=False
    )


def _controller(up) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": up.bootstrap})  # alive until answered
    return admin.describe_cluster().result(30).controller.id


def test_rolling_restart_under_load_loses_and_duplicates_nothing(cluster, tmp_path):  # noqa: F811
    up = cluster
    _rf3_topic(up, "rolling")
    controller = _controller(up)
    before = up.pids()

    plan = _restart(up, "--rolling", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "dry run: nothing restarted" in plan.stdout
    assert up.pids() == before

    producers = Producers(up.bootstrap, "rolling", None, tmp_path).start()
    try:
        wait_until(
            lambda: producers.done["ck"] > 50 and producers.done["kp"] > 50,
            DEADLINE,
            "both producers to get acknowledgements",
        )
        roll = _restart(up, "--rolling", "--timeout", "120")
        assert roll.returncode == 0, roll.stdout + roll.stderr
        acked_during = producers.acked()
        wait_until(lambda: producers.acked() > acked_during + 100, DEADLINE, "acks after the roll")
    finally:
        producers.stop(flush_s=DEADLINE)

    out = roll.stdout
    order = [
        int(line.split("broker ")[1].split(":")[0])
        for line in out.splitlines()
        if ": restarting (" in line
    ]
    assert sorted(order) == [0, 1, 2] and order[-1] == controller, out
    for broker in range(3):
        for step in ("serving again", "back in every ISR", "preferred leaders back"):
            assert f"broker {broker}: {step} after" in out, out
    assert "rolling restart done: 3 broker(s)" in out

    after = up.pids()
    assert all(after[b] not in (None, before[b]) and alive(after[b]) for b in BROKERS)
    assert after["zookeeper"] == before["zookeeper"]
    console = up.output()
    assert "restarting in" not in console, console  # no restart was reported as a crash
    assert console.count("starting it again as asked") == 3

    assert producers.errors == []
    assert producers.sent == producers.done
    acked = Counter(f"{a.producer}-{a.seq}".encode() for a in producers.acks)
    assert set(acked.values()) == {1}
    stored = consume_all(up, "rolling", len(acked))
    counts = Counter(stored)
    assert [v for v, n in counts.items() if n > 1] == []  # no duplicate
    assert set(acked) - set(counts) == set()  # nothing acknowledged lost
    up.stop()


def test_a_step_that_cannot_complete_stops_the_roll_with_status_1(cluster):  # noqa: F811
    """With broker 2 paused (SIGSTOP) it drops out of the ISR: the roll's first wait,
    for no under-replicated partition, times out, it says so and restarts nothing."""
    from confluent_kafka.admin import AdminClient

    up = cluster
    _rf3_topic(up, "stuck")
    before = up.pids()
    admin = AdminClient({"bootstrap.servers": up.bootstrap})
    os.kill(before["broker-2"], signal.SIGSTOP)
    try:
        wait_until(
            lambda: (
                len(admin.list_topics("stuck", timeout=10).topics["stuck"].partitions[0].isrs) == 2
            ),
            DEADLINE,
            "broker 2 to leave the ISR",
        )
        roll = _restart(up, "--rolling", "--timeout", "3")
        assert roll.returncode == 1, roll.stdout + roll.stderr
        assert "no under-replicated partition: not done after 3 s: under-replicated: stuck-0" in (
            roll.stderr
        )
        assert up.pids() == before
    finally:
        os.kill(before["broker-2"], signal.SIGCONT)
    up.stop()


def test_no_cluster_up_to_ask_is_an_error(tmp_path):
    roll = subprocess.run(
        [sys.executable, "-m", "logflume", "cluster", "restart", "--rolling"]
        + ["--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert roll.returncode == 1
    assert (
        roll.stderr
        == f"logflume cluster restart: no `logflume cluster up` is running for {tmp_path}\n"
    )
