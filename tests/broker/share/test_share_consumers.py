"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16)
against broker subprocesses: records shared by several consumers of one partition,
each delivered to one of them; RELEASE, REJECT, the lock timeout after a consumer is
killed mid-batch, and the delivery count limit.

A share-partition starts at the high watermark when it is first fetched
(`share.auto.offset.reset` latest), so each test first produces b"warm" records until
a consumer gets one: what is produced after that reaches the group.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey, ErrorCode
from testkit.procs import BrokerProcess
from tests.broker.server.wire import WireClient

SHORT_LOCK = {
    "group.share.record.lock.duration.ms": 2000,
    "group.share.delivery.count.limit": 3,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data").start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def short_lock_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-lock") / "data", settings=SHORT_LOCK).start()
    yield b
    b.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = False):
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    consumer.subscribe([topic])
    return consumer


def poll_data(consumer, explicit: bool = False, timeout: float = 1.0) -> list:
    """One poll: the records that are not warm-up ones (warm-up ones are accepted)."""
    out = []
    for message in consumer.poll(timeout):
        if message.error() is not None:
            continue
        if message.value().startswith(b"warm"):
            if explicit:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            continue
        out.append(message)
    return out


def warm_up(producer: Producer, topic: str, got_warm, deadline_s: float = 60) -> None:
    """Produce warm-up records until `got_warm()` says a consumer got one."""
    deadline = time.monotonic() + deadline_s
    while not got_warm():
        assert time.monotonic() < deadline, "no share consumer got a warm-up record"
        producer.produce(topic, b"warm")
        producer.flush(10)
        time.sleep(0.3)


def produce(producer: Producer, topic: str, values) -> None:
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


class PollingThread(threading.Thread):
    """Polls one implicit-mode share consumer until stopped, noting what it got."""

    def __init__(self, consumer):
        super().__init__(daemon=True)
        self.consumer = consumer
        self.warm = False
        self.got: list[tuple[int, bytes, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for message in self.consumer.poll(0.5):
                if message.error() is not None:
                    continue
                if message.value().startswith(b"warm"):
                    self.warm = True
                else:
                    self.got.append((message.offset(), message.value(), message.delivery_count()))
        self.consumer.close()


def test_three_consumers_on_one_partition_each_record_delivered_once(broker):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "shared-once")
    threads = [PollingThread(share_consumer(bootstrap, "sg-once", "shared-once")) for _ in range(3)]
    for t in threads:
        t.start()
    producer = Producer({"bootstrap.servers": bootstrap})
    warm_up(producer, "shared-once", lambda: any(t.warm for t in threads))
    values = [b"rec-%d" % i for i in range(600)]
    deadline = time.monotonic() + 90
    for chunk in range(0, len(values), 50):
        produce(producer, "shared-once", values[chunk : chunk + 50])
    while sum(len(t.got) for t in threads) < len(values):
        assert time.monotonic() < deadline, sum(len(t.got) for t in threads)
        time.sleep(0.2)
    time.sleep(1)  # anything delivered twice would show up by now
    for t in threads:
        t.stopping.set()
    for t in threads:
        t.join(30)
    got = [value for t in threads for _, value, _ in t.got]
    assert sorted(got) == sorted(values)  # every record, none twice
    assert all(count == 1 for t in threads for _, _, count in t.got)
    assert sum(1 for t in threads if t.got) >= 2, [len(t.got) for t in threads]


def test_release_redelivers_and_reject_archives(broker):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "release-reject")
    consumer = share_consumer(bootstrap, "sg-rr", "release-reject", explicit=True)
    producer = Producer({"bootstrap.servers": bootstrap})
    warm = []

    def got_warm() -> bool:
        for message in consumer.poll(0.5):
            if message.error() is None:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                warm.append(message)
        return bool(warm)

    warm_up(producer, "release-reject", got_warm)
    produce(producer, "release-reject", [b"released", b"rejected", b"accepted"])
    seen: dict[bytes, list[int]] = {}
    deadline = time.monotonic() + 60
    while not (len(seen.get(b"released", [])) >= 2 and b"accepted" in seen):
        assert time.monotonic() < deadline, seen
        for message in poll_data(consumer, explicit=True):
            seen.setdefault(message.value(), []).append(message.delivery_count())
            kind = {
                b"released": AcknowledgeType.RELEASE,
                b"rejected": AcknowledgeType.REJECT,
            }.get(message.value(), AcknowledgeType.ACCEPT)
            if message.value() == b"released" and message.delivery_count() >= 2:
                kind = AcknowledgeType.ACCEPT
            consumer.acknowledge(message, kind)
    for _ in range(6):  # the rejected record never comes back
        for message in poll_data(consumer, explicit=True):
            seen.setdefault(message.value(), []).append(message.delivery_count())
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.commit_sync(30)
    consumer.close()
    assert seen[b"released"] == [1, 2]
    assert seen[b"rejected"] == [1]
    assert seen[b"accepted"] == [1]


def test_killed_consumer_records_redelivered_after_lock_timeout(short_lock_broker, tmp_path):
    bootstrap = short_lock_broker.bootstrap
    create_topic(bootstrap, "killed")
    with open(tmp_path / "proc.log", "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.broker.share.share_consumer_proc",
                bootstrap,
                "sg-kill",
                "killed",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(line.decode().strip() for line in proc.stdout), daemon=True
    )
    reader.start()
    try:
        producer = Producer({"bootstrap.servers": bootstrap})
        warm_up(producer, "killed", lambda: "warm" in lines)
        produce(producer, "killed", [b"held-%d" % i for i in range(5)])
        deadline = time.monotonic() + 60
        while not any(line != "warm" for line in lines):
            assert proc.poll() is None, (tmp_path / "proc.log").read_text()
            assert time.monotonic() < deadline, lines
            time.sleep(0.1)
        time.sleep(0.5)  # the rest of its batch's lines
        held = {int(line.split()[0]) for line in lines if line != "warm"}
        proc.kill()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    other = share_consumer(bootstrap, "sg-kill", "killed", explicit=True)
    redelivered: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while not held <= set(redelivered):
        assert time.monotonic() < deadline, (held, redelivered)
        for message in poll_data(other, explicit=True):
            redelivered[message.offset()] = message.delivery_count()
            other.acknowledge(message, AcknowledgeType.ACCEPT)
    other.commit_sync(30)
    other.close()
    assert all(redelivered[offset] == 2 for offset in held), redelivered


def test_delivery_count_limit_archives_the_record(short_lock_broker):
    bootstrap = short_lock_broker.bootstrap
    create_topic(bootstrap, "limited")
    consumer = share_consumer(bootstrap, "sg-limit", "limited", explicit=True)
    producer = Producer({"bootstrap.servers": bootstrap})
    warm = []

    def got_warm() -> bool:
        for message in consumer.poll(0.5):
            if message.error() is None:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                warm.append(message)
        return bool(warm)

    warm_up(producer, "limited", got_warm)
    produce(producer, "limited", [b"poison"])
    counts: list[int] = []
    deadline = time.monotonic() + 60
    while len(counts) < SHORT_LOCK["group.share.delivery.count.limit"]:
        assert time.monotonic() < deadline, counts
        for message in poll_data(consumer, explicit=True):
            counts.append(message.delivery_count())
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
    produce(producer, "limited", [b"after"])
    later: list[bytes] = []
    deadline = time.monotonic() + 60
    while b"after" not in later:
        assert time.monotonic() < deadline, later
        for message in poll_data(consumer, explicit=True):
            later.append(message.value())
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.commit_sync(30)
    consumer.close()
    assert counts == [1, 2, 3]
    assert b"poison" not in later


def test_share_group_describe_shows_members_and_their_assignment(broker):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "described", partitions=2)
    threads = [PollingThread(share_consumer(bootstrap, "sg-desc", "described")) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        with WireClient(broker.port) as client:
            deadline = time.monotonic() + 60
            while True:
                answer = client.request(
                    ApiKey.SHARE_GROUP_DESCRIBE,
                    1,
                    {
                        "group_ids": ["sg-desc", "no-such-group"],
                        "include_authorized_operations": True,
                    },
                )
                group, missing = answer["groups"]
                if group["error_code"] == ErrorCode.NONE and len(group["members"]) == 2:
                    break
                assert time.monotonic() < deadline, answer
                time.sleep(0.2)
            # ListGroups lists it as type "share" beside the others; DeleteGroups
            # refuses it while it has members
            listed = client.request(
                ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}
            )["groups"]
            # (other tests' share groups live on the same broker)
            assert ("sg-desc", "share", "share") in [
                (g["group_id"], g["group_type"], g["protocol_type"]) for g in listed
            ]
            assert {g["group_type"] for g in listed} == {"share"}
            classic = client.request(
                ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]}
            )["groups"]
            assert "sg-desc" not in {g["group_id"] for g in classic}
            (deleted,) = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg-desc"]})[
                "results"
            ]
            assert deleted["error_code"] == ErrorCode.NON_EMPTY_GROUP
    finally:
        for t in threads:
            t.stopping.set()
        for t in threads:
            t.join(30)
    assert group["group_state"] == "Stable" and group["assignor_name"] == "simple"
    for member in group["members"]:
        assert member["subscribed_topic_names"] == ["described"]
        (assigned,) = member["assignment"]["topic_partitions"]
        assert (assigned["topic_name"], assigned["partitions"]) == ("described", [0, 1])
    assert group["authorized_operations"] > 0
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_share_fetch_refusals_are_answered(broker):
    """Bad session epochs and a member without a session get Kafka's codes."""
    with WireClient(broker.port) as client:

        def fetch(epoch: int, member: str = "m") -> dict:
            return client.request(
                ApiKey.SHARE_FETCH,
                1,
                {
                    "group_id": "sg-refusals",
                    "member_id": member,
                    "share_session_epoch": epoch,
                    "max_wait_ms": 0,
                    "max_records": 10,
                    "batch_size": 10,
                    "topics": [],
                },
            )

        assert fetch(3)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert fetch(0)["error_code"] == ErrorCode.NONE
        assert fetch(5)["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert fetch(1)["error_code"] == ErrorCode.NONE
        assert fetch(0, member="")["error_code"] == ErrorCode.INVALID_REQUEST
        acked = client.request(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {"group_id": "sg-refusals", "member_id": "m", "share_session_epoch": 0, "topics": []},
        )
        assert acked["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        closed = client.request(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {"group_id": "sg-refusals", "member_id": "m", "share_session_epoch": -1, "topics": []},
        )
        assert closed["error_code"] == ErrorCode.NONE
        assert fetch(2)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
