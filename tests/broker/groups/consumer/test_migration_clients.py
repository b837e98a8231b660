"""Classic members in consumer groups and the online migration between the protocols
(KIP-848) with real clients against a broker subprocess: a kafka-python member
(classic protocol, range assignor) joining and leaving a group of confluent-kafka
`group.protocol=consumer` members, and a classic group of kafka-python members
upgraded by a consumer-protocol member and downgraded when it leaves; every record
a producer writes meanwhile is consumed exactly once (manual commits)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from testkit.procs import BrokerProcess
from tests.broker.groups.consumer.members import ClassicMember, Member, wait_until
from tests.broker.groups.consumer.test_clients import SETTINGS, create_topics, members_of
from tests.logflume.test_commands_clients import lf


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("migration") / "data", settings=SETTINGS).start()
    yield b
    b.stop()


class Writer:
    """Produces numbered records round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.written = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._args = (topic, partitions)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        topic, partitions = self._args
        while not self._stop.is_set():
            for _ in range(20):
                self._producer.produce(
                    topic, b"%d" % self.written, partition=self.written % partitions
                )
                self.written += 1
            self._producer.poll(0)
            time.sleep(0.05)
        assert self._producer.flush(30) == 0

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(60)
        return self.written


def group_type(bootstrap: str, group: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until answered
    listed = admin.list_consumer_groups().result(20)
    return {g.group_id: g.type.name for g in listed.valid}.get(group)


def check_exactly_once(members, total: int) -> None:
    values = [r[3] for m in members for r in m.records]
    assert len(values) == total, "a record was consumed twice"
    assert sorted(int(v) for v in values) == list(range(total))


def split(members, partitions: int) -> bool:
    """Whether the members hold every partition, none twice, each at least one."""
    held = [m.assignment() for m in members]
    every = set().union(*held)
    return all(held) and len(every) == partitions and sum(map(len, held)) == partitions


def test_a_classic_member_joins_and_leaves_a_consumer_group(broker):
    bootstrap = broker.bootstrap
    create_topics(bootstrap, ("mix", 6))
    writer = Writer(bootstrap, "mix", 6)
    a = Member(bootstrap, "mix-g", ["mix"], "a")
    b = Member(bootstrap, "mix-g", ["mix"], "b")
    wait_until(lambda: split([a, b], 6), what="a and b to share the partitions")
    c = ClassicMember(bootstrap, "mix-g", ["mix"], "c")
    wait_until(lambda: split([a, b, c], 6), what="the classic member's share")
    assert group_type(bootstrap, "mix-g") == "CONSUMER"
    assert members_of(broker, "mix-g") == ["a", "b", "c"]
    described = lf(
        "groups", "--bootstrap-server", bootstrap, "--describe", "--group", "mix-g",
        "--members", "--output", "json",
    )  # fmt: skip
    held = {r["client_id"]: r["assignment"] for r in json.loads(described.stdout)}
    assert held["c"] and held["c"].startswith("mix(")
    wait_until(lambda: c.records, what="the classic member to consume")
    c.close()  # LeaveGroup: a and b take its partitions
    wait_until(lambda: split([a, b], 6), what="a and b to take the classic member's share")
    assert members_of(broker, "mix-g") == ["a", "b"]
    time.sleep(1)
    total = writer.stop()
    wait_until(
        lambda: sum(len(m.records) for m in (a, b, c)) >= total, what="every record consumed"
    )
    a.close()
    b.close()
    check_exactly_once([a, b, c], total)


def test_a_classic_group_is_upgraded_then_downgraded(broker):
    bootstrap = broker.bootstrap
    create_topics(bootstrap, ("updown", 4))
    writer = Writer(bootstrap, "updown", 4)
    c1 = ClassicMember(bootstrap, "updown-g", ["updown"], "c1")
    c2 = ClassicMember(bootstrap, "updown-g", ["updown"], "c2")
    wait_until(lambda: split([c1, c2], 4), what="the classic group's assignment")
    assert group_type(bootstrap, "updown-g") == "CLASSIC"
    n = Member(bootstrap, "updown-g", ["updown"], "n")
    wait_until(lambda: split([c1, c2, n], 4), what="the new member's share")
    assert group_type(bootstrap, "updown-g") == "CONSUMER"
    assert members_of(broker, "updown-g") == ["c1", "c2", "n"]
    wait_until(lambda: n.records, what="the consumer-protocol member to consume")
    n.close()  # the last consumer-protocol member: a classic group again
    wait_until(
        lambda: group_type(bootstrap, "updown-g") == "CLASSIC", what="the group to be classic"
    )
    wait_until(lambda: split([c1, c2], 4), what="the classic members to take every partition")
    after = writer.written
    wait_until(
        lambda: any(int(r[3]) > after for m in (c1, c2) for r in m.records),
        what="the classic members to keep consuming",
    )
    total = writer.stop()
    wait_until(
        lambda: sum(len(m.records) for m in (c1, c2, n)) >= total, what="every record consumed"
    )
    c1.close()
    c2.close()
    check_exactly_once([c1, c2, n], total)
