"""Consumer groups and the idempotent producer with real clients against a broker
subprocess: kafka-python (group rebalances on leave and on SIGKILL), confluent-kafka
(offsets surviving a broker SIGKILL), aiokafka, kcat -G."""

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common.aio import within
from testkit.procs import BrokerProcess

FAST = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def fast_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data", settings=FAST).start()
    yield b
    b.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


class ConsumerProc:
    """tests/broker/groups/consumer_proc.py in a subprocess; its assignments in a queue."""

    def __init__(self, bootstrap: str, group: str, topic: str, log_path):
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.broker.groups.consumer_proc",
                    bootstrap,
                    group,
                    topic,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONPATH": os.getcwd()},
            )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.assignment: list[str] = []  # "topic:partition"

    def subscribe(self, *topics: str) -> None:
        self.proc.stdin.write(f"subscribe {','.join(topics)}\n")
        self.proc.stdin.flush()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def wait_for(self, predicate, timeout: float = 30.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while not predicate(self.assignment):
            left = deadline - time.monotonic()
            assert left > 0, (
                f"assignment stuck at {self.assignment}; consumer log:\n"
                + self.log_path.read_text(errors="replace")[-6000:]
            )
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line != "closed":
                self.assignment = json.loads(line)
        return self.assignment

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(15)


def test_kafka_python_group_rebalances_on_leave_and_on_sigkill(fast_broker, tmp_path):
    from kafka import KafkaProducer

    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "kp-group", 4)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    for f in [producer.send("kp-group", b"x%d" % i, partition=i % 4) for i in range(40)]:
        assert f.get(timeout=30).offset >= 0
    producer.close()

    everything = [f"kp-group:{p}" for p in range(4)]
    a = ConsumerProc(bootstrap, "kp-grp", "kp-group", tmp_path / "a.log")
    procs = [a]
    try:
        a.wait_for(lambda x: x == everything)
        b = ConsumerProc(bootstrap, "kp-grp", "kp-group", tmp_path / "b.log")
        procs.append(b)
        b.wait_for(lambda x: len(x) == 2)
        a.wait_for(lambda x: len(x) == 2)
        assert sorted(a.assignment + b.assignment) == everything
        b.stop()  # clean close: LeaveGroup, an immediate rebalance
        a.wait_for(lambda x: x == everything)
        c = ConsumerProc(bootstrap, "kp-grp", "kp-group", tmp_path / "c.log")
        procs.append(c)
        c.wait_for(lambda x: len(x) == 2)
        a.wait_for(lambda x: len(x) == 2)
        c.kill()  # no LeaveGroup: the 6 s session timeout has to expire
        a.wait_for(lambda x: x == everything)
    finally:
        for p in procs:
            if p.proc.poll() is None:
                p.kill()


def test_kafka_python_leader_that_learns_a_new_topic_finishes_its_own_rejoin(fast_broker, tmp_path):
    """A follower subscribing to one more topic makes the leader fetch that topic's
    metadata after assigning, so the leader starts a rejoin of its own: the case
    kafka-python 3.0.12 fails to finish without the latch in consumer_proc."""
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "kp-sub-a", 2)
    create_topic(bootstrap, "kp-sub-b", 2)
    a = ConsumerProc(bootstrap, "kp-sub", "kp-sub-a", tmp_path / "a.log")
    procs = [a]
    try:
        a.wait_for(lambda x: x == ["kp-sub-a:0", "kp-sub-a:1"])
        b = ConsumerProc(bootstrap, "kp-sub", "kp-sub-a", tmp_path / "b.log")
        procs.append(b)
        b.wait_for(lambda x: len(x) == 1)
        a.wait_for(lambda x: len(x) == 1)
        b.subscribe("kp-sub-a", "kp-sub-b")  # a stays the leader: it joined first
        b.wait_for(lambda x: len(x) == 3 and {"kp-sub-b:0", "kp-sub-b:1"} <= set(x))
        a.wait_for(lambda x: len(x) == 1)
        assert sorted(a.assignment + b.assignment) == [
            "kp-sub-a:0",
            "kp-sub-a:1",
            "kp-sub-b:0",
            "kp-sub-b:1",
        ]
    finally:
        for p in procs:
            if p.proc.poll() is None:
                p.kill()


def test_committed_offsets_survive_broker_sigkill(broker_factory):
    broker = broker_factory(settings=FAST)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "ck-commit", 2)
    produce(bootstrap, "ck-commit", 20, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ck-grp",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["ck-commit"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got += 1
    assert got == 20
    consumer.commit(
        offsets=[TopicPartition("ck-commit", 0, 7), TopicPartition("ck-commit", 1, 10)],
        asynchronous=False,
    )
    consumer.close()
    broker.kill()
    broker.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("ck-grp")])
    result = futures["ck-grp"].result(20)
    assert {(tp.partition, tp.offset) for tp in result.topic_partitions} == {(0, 7), (1, 10)}
    described = admin.describe_consumer_groups(["ck-grp"])["ck-grp"].result(20)
    assert described.state.name == "EMPTY"


def test_aiokafka_group_consumer_commits(fast_broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "aio-group", 3)
    produce(bootstrap, "aio-group", 30, 3)

    async def main():
        consumer = AIOKafkaConsumer(
            "aio-group",
            bootstrap_servers=bootstrap,
            group_id="aio-grp",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            values = []
            while len(values) < 30:
                batch = await within(consumer.getmany(timeout_ms=500), 20)
                values += [m.value for msgs in batch.values() for m in msgs]
            await consumer.commit()
            committed = [await consumer.committed(ATP("aio-group", p)) for p in range(3)]
            return values, committed
        finally:
            await consumer.stop()

    values, committed = asyncio.run(within(main(), 60))
    assert sorted(values) == sorted(b"v%d" % i for i in range(30))
    assert committed == [10, 10, 10]


def test_kcat_balanced_consumer(fast_broker):
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "kcat-group", 2)
    produce(bootstrap, "kcat-group", 10, 2)
    out = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-G",
            "kcat-grp",
            "-X",
            "auto.offset.reset=earliest",
            "-c",
            "10",
            "-q",
            "kcat-group",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(f"v{i}" for i in range(10))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(20)
    assert "kcat-grp" in {g.group_id for g in listed.valid}


def test_groups_cli_list_and_describe(fast_broker):
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "cli-group", 2)
    produce(bootstrap, "cli-group", 10, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cli-grp",
            "client.id": "cli-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["cli-group"])
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition("cli-group", 0, 3)], asynchronous=False)

        def cli(*args):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "logflume",
                    "groups",
                    "--bootstrap-server",
                    bootstrap,
                    *args,
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            return out.stdout

        assert "cli-grp" in cli("--list").split()
        lines = cli("--describe", "--group", "cli-grp").strip().splitlines()
        assert lines[0].split() == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
        rows = [line.split() for line in lines[1:]]
        assert [r[:6] for r in rows] == [
            ["cli-grp", "cli-group", "0", "3", "5", "2"],
            ["cli-grp", "cli-group", "1", "-", "5", "-"],
        ]
        assert all(r[7] == "/127.0.0.1" and r[8] == "cli-client" for r in rows)
        members = cli("--describe", "--group", "cli-grp", "--members").strip().splitlines()
        assert members[1].split()[-2:] == ["2", "cli-group(0,1)"]
    finally:
        consumer.close()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "logflume",
            "groups",
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            "no-such-group",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "does not exist" in out.stderr


def test_static_member_restart_keeps_assignment_without_rebalance(fast_broker):
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "static-group", 4)
    revoked = []

    def member(instance, on_revoke=None):
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "static-grp",
                "group.instance.id": instance,
                "session.timeout.ms": 10000,
                "enable.auto.commit": False,
            }
        )
        kwargs = {"on_revoke": on_revoke} if on_revoke else {}
        c.subscribe(["static-group"], **kwargs)
        return c

    def poll_until(done, *consumers):
        deadline = time.monotonic() + 30
        while not done() and time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.05)
        assert done()

    a = member("a")
    b = member("b", on_revoke=lambda c, parts: revoked.append(list(parts)))
    poll_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, a, b)
    before_a, before_b = a.assignment(), b.assignment()
    revoked.clear()
    a.close()  # a static member does not leave the group on close
    a = member("a")
    poll_until(lambda: len(a.assignment()) == 2, a, b)
    for _ in range(20):  # give a rebalance, if any, time to reach b
        b.poll(0.05)
    assert a.assignment() == before_a and b.assignment() == before_b
    assert revoked == []
    a.close()
    b.close()
