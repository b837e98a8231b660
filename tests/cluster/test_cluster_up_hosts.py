"""`logflume cluster up --hosts N --pin-cores`: brokers on several loopback "hosts",
each process pinned to one core; a topic with more replicas than hosts is created
all the same, spread over every host, and the broker that placed it says so."""

import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from logflume.commands.cluster import loopback_hosts, pinned_cores
from tests.cluster.util import wait_until


def test_brokers_spread_over_loopback_hosts_in_blocks():
    blocks = [address.rsplit(".", 1)[1] for address in loopback_hosts(6, 3)]
    assert blocks == ["1", "1", "2", "2", "3", "3"]
    assert loopback_hosts(3, 2) == ["127.0.0.1", "127.0.0.1", "127.0.0.2"]
    assert loopback_hosts(2, 1) == ["127.0.0.1", "127.0.0.1"]


def test_brokers_take_the_usable_cores_in_turn():
    assert pinned_cores(5, {3, 1, 2}) == [1, 2, 3, 1, 2]
    assert pinned_cores(2, {0}) == [0, 0]


def allowed_cpus(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(
        line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list")
    )


def test_cluster_up_on_two_hosts_pinned_to_cores(tmp_path):
    data = tmp_path / "cluster"
    out = tmp_path / "up.log"
    up = subprocess.Popen(
        [sys.executable, "-m", "logflume", "cluster", "up", "--brokers", "3", "--hosts", "2"]
        + ["--pin-cores", "--data-dir", str(data), "--base-port", "0"],
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        line = wait_until(
            lambda: next((x for x in out.read_text().splitlines() if "bootstrap" in x), None),
            timeout=120,
            what="the bootstrap servers line",
        )
        bootstrap = line.split()[-1]
        hosts = [address.rsplit(":", 1)[0] for address in bootstrap.split(",")]
        assert hosts == ["127.0.0.1", "127.0.0.1", "127.0.0.2"]
        cores = pinned_cores(3, os.sched_getaffinity(0))
        for i in range(3):
            pid = int((data / f"broker-{i}.pid").read_text())
            assert allowed_cpus(pid) == str(cores[i])

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("wide", 3, 3)])["wide"].result(60)
        topic = wait_until(
            lambda: admin.list_topics("wide", timeout=10).topics["wide"], timeout=60, what="wide"
        )
        host_of = dict(enumerate(hosts))
        for partition in topic.partitions.values():
            assert {host_of[b] for b in partition.replicas} == {"127.0.0.1", "127.0.0.2"}
        logs = "".join((data / f"broker-{i}.log").read_text() for i in range(3))
        assert (
            "topic wide: replication factor 3 over brokers on 2 host(s) (127.0.0.1, "
            "127.0.0.2): some replicas of a partition share a host"
        ) in logs
    finally:
        up.terminate()
        up.wait(90)


def test_more_hosts_than_brokers_is_refused(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "logflume", "cluster", "up", "--brokers", "2", "--hosts", "3"]
        + ["--data-dir", str(tmp_path / "cluster")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "logflume cluster: --hosts must be between 1 and the number of brokers (at most 254)\n"
    )
    assert not (tmp_path / "cluster").exists()
