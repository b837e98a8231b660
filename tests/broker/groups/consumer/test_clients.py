"""The consumer group protocol (KIP-848) with confluent-kafka (`group.protocol=consumer`)
against a broker subprocess: records consumed exactly once by members joining and
leaving while a producer writes, incremental reassignment, a regex subscription
following a topic created later, the group's views (ConsumerGroupDescribe, ListGroups
v5), and a classic group beside it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey
from broker.protocol.client import BlockingClient
from testkit.procs import BrokerProcess
from tests.broker.groups.consumer.members import Member, wait_until
from tests.logflume.test_commands_clients import lf

SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 10000,
}


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", settings=SETTINGS).start()
    yield b
    b.stop()


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, n, 1) for name, n in topics])
    for f in futures.values():
        f.result(20)


def test_members_joining_and_leaving_consume_every_record_once(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    create_topics(bootstrap, ("once", 10))
    total = 1500
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    done = threading.Event()

    def write():
        for i in range(total):
            producer.produce("once", b"%d" % i, partition=i % 10)
            if i % 50 == 0:
                producer.poll(0)
                time.sleep(0.05)
        producer.flush(30)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    members = [Member(bootstrap, "once-g", ["once"], "m0")]
    wait_until(lambda: members[0].assignment(), what="the first member's assignment")
    for i in range(1, 5):
        members.append(Member(bootstrap, "once-g", ["once"], f"m{i}"))
        time.sleep(0.5)
    wait_until(lambda: all(m.assignment() for m in members), what="every member to get partitions")
    members[1].close()
    members[3].close()
    members.append(Member(bootstrap, "once-g", ["once"], "m5"))
    writer.join(60)
    assert done.is_set()

    def consumed() -> list[bytes]:
        return [r[3] for m in members for r in m.records]

    wait_until(lambda: len(consumed()) >= total, what="every record consumed")
    for m in members:
        if m.name not in ("m1", "m3"):
            m.close()
    values = consumed()
    assert len(values) == total, "a record was consumed twice"
    assert sorted(int(v) for v in values) == list(range(total))
    for m in members:
        offsets = [(t, p, o) for t, p, o, _ in m.records]
        assert len(set(offsets)) == len(offsets)


def test_a_joining_member_leaves_unaffected_members_alone(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    create_topics(bootstrap, ("inc-a", 4), ("inc-b", 2))
    a = Member(bootstrap, "inc-g", ["inc-a"], "a")
    b = Member(bootstrap, "inc-g", ["inc-b"], "b")
    wait_until(lambda: len(a.assignment()) == 4 and len(b.assignment()) == 2, what="a and b")
    b_events = list(b.events)
    c = Member(bootstrap, "inc-g", ["inc-a"], "c")
    wait_until(
        lambda: len(a.assignment()) == 2 and len(c.assignment()) == 2, what="c to get half of a"
    )
    time.sleep(1.5)  # a few more heartbeats: nothing else may move
    assert b.events == b_events, "b was disturbed by a member joining another topic"
    revoked = [set(parts) for kind, parts in a.events if kind == "revoke"]
    assert revoked and all(len(r) <= 2 for r in revoked)  # incremental, never all four
    assert a.assignment().isdisjoint(c.assignment())
    for m in (a, b, c):
        m.close()


def test_regex_subscription_picks_up_a_topic_created_later(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    create_topics(bootstrap, ("rx-first", 1))
    m = Member(bootstrap, "rx-g", ["^rx-.*"], "rx")
    wait_until(lambda: ("rx-first", 0) in m.assignment(), what="the first matching topic")
    create_topics(bootstrap, ("rx-second", 2), ("other", 1))
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("rx-second", b"late", partition=1)
    producer.produce("other", b"not mine")
    producer.flush(10)
    wait_until(lambda: any(r[3] == b"late" for r in m.records), what="the record of rx-second")
    assert m.assignment() == {("rx-first", 0), ("rx-second", 0), ("rx-second", 1)}
    assert not any(r[0] == "other" for r in m.records)
    m.close()


def test_describe_and_list_both_kinds_of_group(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    create_topics(bootstrap, ("views", 2))
    m = Member(bootstrap, "views-new", ["views"], "viewer")
    classic = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "views-classic",
            "auto.offset.reset": "earliest",
        }
    )
    classic.subscribe(["views"])
    wait_until(lambda: len(m.assignment()) == 2, what="the consumer-protocol member")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not classic.assignment():
        classic.poll(0.2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups(["views-new"])["views-new"].result(20)
    assert described.type.name == "CONSUMER"
    assert described.state.name == "STABLE"
    assert [x.client_id for x in described.members] == ["viewer"]
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1}
    listed = admin.list_consumer_groups().result(20).valid
    kinds = {g.group_id: g.type.name for g in listed}
    assert kinds["views-new"] == "CONSUMER" and kinds["views-classic"] == "CLASSIC"

    b = ["--bootstrap-server", bootstrap]
    rows = lf("groups", *b, "--list", "--type").stdout.decode().split("\n")
    assert ["views-new", "consumer"] in [r.split() for r in rows]
    assert ["views-classic", "classic"] in [r.split() for r in rows]
    only = lf("groups", *b, "--list", "--type", "consumer").stdout.decode()
    assert "views-new" in only and "views-classic" not in only
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        p.produce("views", b"%d" % i, partition=1)
    p.flush(10)
    wait_until(lambda: len(m.records) >= 5, what="the viewer to commit")
    described = lf("groups", *b, "--describe", "--group", "views-new", "--output", "json")
    by_partition = {r["partition"]: r for r in json.loads(described.stdout)}
    assert by_partition[1]["current_offset"] == by_partition[1]["log_end_offset"] == 5
    assert by_partition[1]["lag"] == 0 and by_partition[1]["client_id"] == "viewer"
    classic.close()
    m.close()


KILLED_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": "consumer", "client.id": "doomed"})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print(len(ps), flush=True))
while True:
    c.poll(0.2)
"""


def test_a_killed_member_is_fenced_after_its_session_timeout(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    create_topics(bootstrap, ("fence", 4))
    survivor = Member(bootstrap, "fence-g", ["fence"], "survivor")
    wait_until(lambda: len(survivor.assignment()) == 4, what="the first member")
    doomed = subprocess.Popen(
        [sys.executable, "-c", KILLED_MEMBER, bootstrap, "fence-g", "fence"],
        stdout=subprocess.PIPE,
    )
    try:
        wait_until(lambda: len(survivor.assignment()) == 2, what="the second member's half")
        assert doomed.stdout.readline().strip() == b"2"  # its half, once released
    finally:
        doomed.kill()
        doomed.wait()
    # it sent no leave: it stays a member until its session (10 s) runs out
    assert "doomed" in members_of(kip848_broker, "fence-g")
    wait_until(lambda: len(survivor.assignment()) == 4, what="the killed member's partitions")
    assert members_of(kip848_broker, "fence-g") == ["survivor"]
    survivor.close()


def members_of(broker, group: str) -> list[str]:
    """The client ids of the group's members, by ConsumerGroupDescribe."""
    with BlockingClient("127.0.0.1", broker.port) as client:
        body = {"group_ids": [group], "include_authorized_operations": False}
        (described,) = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, body)["groups"]
    return sorted(m["client_id"] for m in described["members"])


def test_a_malformed_classic_join_does_not_disturb_a_consumer_group(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    create_topics(bootstrap, ("mixed", 2))
    m = Member(bootstrap, "mixed-g", ["mixed"], "modern")
    wait_until(lambda: len(m.assignment()) == 2, what="the consumer-protocol member")
    join = {
        "group_id": "mixed-g",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    with BlockingClient("127.0.0.1", kip848_broker.port) as client:
        answer = client.request(ApiKey.JOIN_GROUP, 5, join)
        assert answer["error_code"] == 79  # MEMBER_ID_REQUIRED
        join["member_id"] = answer["member_id"]
        answer = client.request(ApiKey.JOIN_GROUP, 5, join)
    assert answer["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL: no subscription in it
    assert members_of(kip848_broker, "mixed-g") == ["modern"]
    assert len(m.assignment()) == 2
    m.close()
