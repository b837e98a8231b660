"""`logflume cluster up` keeps serving when one of its processes dies, run as a user
runs it: SIGKILL a broker (the partition leader) or ZooKeeper by the pid in its pid
file, and the death is reported, the process comes back (with a new pid) after the
first backoff, and the other processes keep their pids and keep serving: a produce
with acks=all to an RF 3 topic (min.insync.replicas=2) succeeds meanwhile. A
restarted broker registers again in ZooKeeper once its old session has expired.

Every wait polls a condition against a deadline; none sleeps a fixed time (the one
wait on the clock is for the brokers' session leases, whose length is configured).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from broker.cluster.launcher import ZooKeeperProcess, brokers_seen
from broker.protocol import ApiKey
from tests.broker.server.wire import WireClient
from tests.cluster.util import consume_all, wait_until
from tests.logflume.proc_scan import alive

# Quick failure detection, so that a killed leader is replaced within seconds.
FAST = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "offsets.topic.num.partitions": 3,
}
DEADLINE = 90.0  # generous: a loaded 2-core machine restarts a broker in seconds


class ClusterUp:
    """`logflume cluster up --brokers 3 [--zookeepers N]` in a subprocess; its output
    goes to a file."""

    def __init__(self, tmp_path: Path, zookeepers: int = 1):
        self.data = tmp_path / "cluster"
        self.out = tmp_path / "up.out"
        cmd = [sys.executable, "-m", "logflume", "cluster", "up", "--brokers", "3"]
        cmd += ["--zookeepers", str(zookeepers)]
        cmd += ["--data-dir", str(self.data), "--base-port", "0"]
        for key, value in FAST.items():
            cmd += ["--set", f"{key}={value}"]
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        line = wait_until(
            lambda: self._line("bootstrap servers:"), DEADLINE, "the bootstrap servers"
        )
        self.bootstrap = line.split()[-1]
        self.ports = [int(a.rpartition(":")[2]) for a in self.bootstrap.split(",")]
        self.zookeeper = self._line("zookeeper:").split()[-1]

    def output(self) -> str:
        text = self.out.read_text(errors="replace")
        assert self.proc.poll() is None, f"cluster up exited:\n{text}"
        return text

    def _line(self, prefix: str) -> str | None:
        return next((x for x in self.output().splitlines() if prefix in x), None)

    def pid(self, name: str) -> int | None:
        try:
            return int((self.data / f"{name}.pid").read_text())
        except (FileNotFoundError, ValueError):  # down, or being rewritten
            return None

    def pids(self) -> dict[str, int]:
        members = len(self.zookeeper.split(","))
        zookeepers = (
            ["zookeeper"] if members == 1 else [f"zookeeper-{i + 1}" for i in range(members)]
        )
        names = zookeepers + [f"broker-{i}" for i in range(len(self.ports))]
        return {n: self.pid(n) for n in names}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(90) == 0, self.out.read_text(errors="replace")


def _cluster_up(tmp_path: Path, zookeepers: int):
    up = ClusterUp(tmp_path, zookeepers)
    # printed only once every broker sees the others: an RF 3 topic can be made at once
    assert [brokers_seen(p) for p in up.ports] == [3, 3, 3]
    yield up
    if up.proc.poll() is None:
        up.proc.kill()  # its children die with it (PR_SET_PDEATHSIG)
        up.proc.wait(30)


@pytest.fixture
def cluster(tmp_path):
    yield from _cluster_up(tmp_path, zookeepers=1)


@pytest.fixture
def ensemble_cluster(tmp_path):
    """Three brokers on a ZooKeeper ensemble of three."""
    yield from _cluster_up(tmp_path, zookeepers=3)


def _answers_metadata(port: int) -> bool:
    try:
        with WireClient(port, timeout=5) as client:
            return bool(client.request(ApiKey.METADATA, 1, {"topics": []})["brokers"])
    except OSError:
        return False


def _rf3_topic(up: ClusterUp, name: str) -> int:
    """Create `name` (1 partition, RF 3, min.insync.replicas=2) and wait for a full
    ISR; returns its leader."""
    admin = AdminClient({"bootstrap.servers": up.bootstrap})
    topic = NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], operation_timeout=20)[name].result(30)

    def partition():
        return admin.list_topics(name, timeout=10).topics[name].partitions.get(0)

    wait_until(
        lambda: (p := partition()) is not None and p.leader >= 0 and len(p.isrs) == 3,
        DEADLINE,
        f"{name} to have a leader and a full ISR",
    )
    return partition().leader


def _produce_all_acks(up: ClusterUp, topic: str, values: list[bytes]) -> None:
    """Produce with acks=all; fails the test on any undelivered record."""
    errors = []
    producer = Producer(
        {
            "bootstrap.servers": up.bootstrap,
            "acks": "all",
            "message.timeout.ms": int(DEADLINE * 1000),
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        }
    )
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(DEADLINE + 10) == 0
    assert errors == []


def _kill(up: ClusterUp, name: str) -> dict[str, int]:
    """SIGKILL `name` (broker-N, zookeeper, zookeeper-N) and wait for the report;
    returns the pids from before the kill."""
    before = up.pids()
    os.kill(before[name], signal.SIGKILL)
    wait_until(
        lambda: f"{name} killed by SIGKILL; restarting in 1s" in up.output(),
        DEADLINE,
        "the death to be reported",
    )
    return before


def test_killed_leader_is_reported_and_restarted_while_the_others_keep_serving(cluster):
    leader = _rf3_topic(cluster, "replicated")
    _produce_all_acks(cluster, "replicated", [b"before"])
    victim = f"broker-{leader}"
    before = _kill(cluster, victim)
    _produce_all_acks(cluster, "replicated", [b"after"])
    wait_until(
        lambda: f"restarting {victim} (restart #1)" in cluster.output(),
        DEADLINE,
        "the restart",
    )
    port = cluster.ports[leader]
    wait_until(lambda: _answers_metadata(port), DEADLINE, f"{victim} to serve")

    after = cluster.pids()
    assert after[victim] not in (None, before[victim]) and alive(after[victim])
    others = {n: p for n, p in before.items() if n != victim}
    assert {n: after[n] for n in others} == others
    assert all(alive(p) for p in others.values())
    _produce_all_acks(cluster, "replicated", [b"again"])

    cluster.stop()
    assert not [p for p in after.values() if alive(p)]
    assert not list(cluster.data.glob("*.pid"))


def test_killed_zookeeper_is_reported_and_restarted(cluster):
    killed_at = time.monotonic()
    before = _kill(cluster, "zookeeper")
    zk = ZooKeeperProcess(cluster.data / "zookeeper", port=int(cluster.zookeeper.split(":")[1]))
    wait_until(zk.is_serving, DEADLINE, "ZooKeeper to answer again")
    after = cluster.pids()
    assert after["zookeeper"] not in (None, before["zookeeper"])
    assert {n: p for n, p in after.items() if n != "zookeeper"} == {
        n: p for n, p in before.items() if n != "zookeeper"
    }
    # ZooKeeper answering is not yet every broker connected to it. A broker whose
    # client has not reconnected yet still serves until its session lease (taken by
    # a probe sent before the kill) runs out, then fences itself (client connections
    # reset) until ZooKeeper answers it again and it has re-read its partitions'
    # states. Past a session timeout after the kill, every broker has either renewed
    # its lease or fenced, so "every broker serves" then means none is about to fence.
    lease_over = killed_at + FAST["zookeeper.session.timeout.ms"] / 1000
    wait_until(lambda: time.monotonic() > lease_over, DEADLINE, "the leases before the kill")
    wait_until(
        lambda: [brokers_seen(p) for p in cluster.ports] == [3, 3, 3],
        DEADLINE,
        "every broker to serve clients again and see the others",
    )
    _rf3_topic(cluster, "after-zookeeper")
    _produce_all_acks(cluster, "after-zookeeper", [b"x"])
    cluster.stop()


def test_restarted_broker_registers_again(cluster):
    zk = KazooClient(hosts=cluster.zookeeper)
    zk.start(timeout=30)
    try:

        def owner(broker_id: int) -> int | None:
            stat = zk.exists(f"/brokers/ids/{broker_id}")
            return stat and stat.ephemeralOwner

        leader = _rf3_topic(cluster, "replicated")
        old_session = owner(leader)
        _kill(cluster, f"broker-{leader}")
        # the old session expires after zookeeper.session.timeout.ms, then the
        # restarted broker registers with its new one
        wait_until(
            lambda: owner(leader) not in (None, old_session),
            FAST["zookeeper.session.timeout.ms"] / 1000 + 20,
            f"broker {leader} to register again",
        )
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # the broker answering Metadata learns of the registration from its own
        # ZooKeeper watch, a moment after the znode exists
        wait_until(
            lambda: leader in admin.list_topics(timeout=10).brokers,
            DEADLINE,
            f"the brokers' metadata to list broker {leader} again",
        )
        wait_until(
            lambda: (
                leader
                in admin.list_topics("replicated", timeout=10)
                .topics["replicated"]
                .partitions[0]
                .isrs
            ),
            DEADLINE,
            f"broker {leader} back in the ISR",
        )
    finally:
        zk.stop()
        zk.close()


def _zookeeper_leader(up: ClusterUp) -> str:
    """The pid-file name (`zookeeper-N`) of the ensemble's current leader."""
    for i, address in enumerate(up.zookeeper.split(",")):
        host, _, port = address.rpartition(":")
        member = ZooKeeperProcess(up.data / f"zookeeper-{i + 1}", port=int(port), host=host)
        if member.mode() == "leader":
            return f"zookeeper-{i + 1}"
    raise AssertionError("no member of the ensemble says it leads")


def _leader_epoch(up: ClusterUp, topic: str) -> int:
    with WireClient(up.ports[0], timeout=10) as client:
        md = client.request(
            ApiKey.METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
    return md["topics"][0]["partitions"][0]["leader_epoch"]


def test_losing_the_zookeeper_leader_of_an_ensemble_is_invisible_to_producers(
    ensemble_cluster,
):
    """Three brokers on three ZooKeepers: SIGKILL the ensemble's leader under acks=all
    load. The others elect a new one, each broker's client moves its session to a
    member still up, and no broker fences itself or loses leadership, so every record
    is delivered once, none fails, and the partition's leader epoch is unchanged."""
    up = ensemble_cluster
    assert up.zookeeper.count(",") == 2
    _rf3_topic(up, "through-zookeeper-loss")
    epoch = _leader_epoch(up, "through-zookeeper-loss")
    zk = KazooClient(hosts=up.zookeeper)
    zk.start(timeout=30)
    try:
        controller_before = zk.get("/controller")[0]
    finally:
        zk.stop()
        zk.close()

    errors: list = []
    delivered: list[bytes] = []
    producer = Producer(
        {
            "bootstrap.servers": up.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(DEADLINE * 1000),
        }
    )

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg.value())

    sent = 0

    def produce_for(seconds: float) -> None:
        nonlocal sent
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            producer.produce("through-zookeeper-loss", b"%d" % sent, on_delivery=on_delivery)
            sent += 1
            producer.poll(0.005)

    produce_for(1.0)
    _kill(up, _zookeeper_leader(up))
    # Past two session timeouts a broker that could not move its session has fenced.
    produce_for(2 * FAST["zookeeper.session.timeout.ms"] / 1000)
    assert producer.flush(DEADLINE) == 0
    assert errors == []
    assert sorted(delivered, key=int) == [b"%d" % i for i in range(sent)]
    stored = consume_all(up, "through-zookeeper-loss", sent)
    assert sorted(stored, key=int) == [b"%d" % i for i in range(sent)]
    assert _leader_epoch(up, "through-zookeeper-loss") == epoch
    zk = KazooClient(hosts=up.zookeeper)
    zk.start(timeout=30)
    try:
        assert zk.get("/controller")[0] == controller_before
        assert sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"]
    finally:
        zk.stop()
        zk.close()
    logs = {i: (up.data / f"broker-{i}.log").read_text(errors="replace") for i in range(3)}
    assert not [i for i, text in logs.items() if "fenced" in text], logs
    up.stop()
