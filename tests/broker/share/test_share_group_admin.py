"""The share-group offsets admin (KIP-932: DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets, and DeleteGroups with
DeleteShareGroupState) with confluent-kafka's ShareConsumer and `logflume groups`
against a broker subprocess: consume, stop, describe the start offset, reset it to
the earliest and have the next consumer get the records again; refusals while the
group has members; a deleted group, created again under its id, starts afresh at the
log end instead of at its old start offset; a topic's offsets deleted.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from broker.protocol import ApiKey, ErrorCode
from testkit.procs import BrokerProcess
from tests.broker.server.wire import WireClient
from tests.broker.share.test_share_consumers import (
    PollingThread,
    create_topic,
    produce,
    share_consumer,
    warm_up,
)
from tests.logflume.test_commands_clients import lf

# members that go away are noticed quickly even when a client does not say goodbye
SETTINGS = {"group.share.session.timeout.ms": 6000, "group.share.heartbeat.interval.ms": 1000}
GROUP, TOPIC = "sg-admin", "admin-t"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-admin") / "data", settings=SETTINGS).start()
    yield b
    b.stop()


def groups(broker, *args: str):
    return lf("groups", "--bootstrap-server", broker.bootstrap, *args)


def wait_for(condition, what: str, deadline_s: float = 60):
    deadline = time.monotonic() + deadline_s
    while not (result := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.3)
    return result


def group_state(broker) -> str | None:
    with WireClient(broker.port) as client:
        answer = client.request(
            ApiKey.SHARE_GROUP_DESCRIBE,
            1,
            {"group_ids": [GROUP], "include_authorized_operations": False},
        )
    (group,) = answer["groups"]
    return group["group_state"] if group["error_code"] == ErrorCode.NONE else None


def start_offsets(broker) -> dict[int, int | None]:
    """What `logflume groups --describe` shows: partition -> START-OFFSET."""
    r = groups(broker, "--describe", "--group", GROUP, "--output", "json")
    assert r.returncode == 0, r.stderr
    return {row["partition"]: row["start_offset"] for row in json.loads(r.stdout)}


def consume(broker, until) -> PollingThread:
    """A share consumer of the group, polling until `until(thread)` holds."""
    thread = PollingThread(share_consumer(broker.bootstrap, GROUP, TOPIC))
    thread.start()
    wait_for(lambda: until(thread), "the share consumer did not get what was expected")
    return thread


def stop(thread: PollingThread, broker) -> None:
    thread.stopping.set()
    thread.join(30)
    wait_for(lambda: group_state(broker) == "Empty", "the share group did not become empty")


def values(thread: PollingThread) -> set[bytes]:
    return {value for _, value, _ in thread.got}


def test_reset_redelivers_and_a_deleted_group_starts_afresh(broker):
    create_topic(broker.bootstrap, TOPIC)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    first = [b"r%d" % i for i in range(10)]

    # a consumer gets every record: the start offset moves to the log end
    thread = PollingThread(share_consumer(broker.bootstrap, GROUP, TOPIC))
    thread.start()
    warm_up(producer, TOPIC, lambda: thread.warm)
    produce(producer, TOPIC, first)
    wait_for(lambda: set(first) <= values(thread), "the first consumer did not get the records")
    stop(thread, broker)
    end = wait_for(lambda: (s := start_offsets(broker)).get(0) and s[0], "no start offset")
    assert end >= len(first)
    listed = groups(broker, "--list", "--type", "share", "--output", "json")
    assert {"group": GROUP, "state": "EMPTY", "type": "share"} in json.loads(listed.stdout)
    table = groups(broker, "--describe", "--group", GROUP).stdout.decode()
    assert f"Share group '{GROUP}' has no active members." in table
    row = next(line.split() for line in table.splitlines() if line.startswith(GROUP))
    assert row[:3] == [GROUP, TOPIC, "0"] and row[4:] == [str(end), "0"]

    # reset to the earliest: planned, then executed; the next consumer gets them again
    plan = groups(broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest")
    assert b"No action will be performed" in plan.stdout and start_offsets(broker) == {0: end}
    r = groups(
        broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute"
    )
    assert r.returncode == 0, r.stderr
    assert start_offsets(broker) == {0: 0}
    thread = consume(broker, lambda t: set(first) <= values(t))
    try:
        # while it has a member: no reset, no deletion
        r = groups(
            broker, "--reset-offsets", "--group", GROUP, "--all-topics", "--to-latest", "--execute"
        )
        assert r.returncode == 1 and b"the current state is Stable" in r.stderr
        with WireClient(broker.port) as client:
            altered = client.request(
                ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                0,
                {
                    "group_id": GROUP,
                    "topics": [
                        {
                            "topic_name": TOPIC,
                            "partitions": [{"partition_index": 0, "start_offset": 0}],
                        }
                    ],
                },
            )
        assert altered["error_code"] == ErrorCode.NON_EMPTY_GROUP
        r = groups(broker, "--delete", "--group", GROUP)
        assert r.returncode == 1 and b"The group is not empty" in r.stderr
        state = groups(broker, "--describe", "--group", GROUP, "--state").stdout.decode()
        row = next(line.split() for line in state.splitlines() if line.startswith(GROUP))
        assert row[2:] == ["(0)", "Stable", "1"]  # after the coordinator's host:port
        members = groups(broker, "--describe", "--group", GROUP, "--members", "--output", "json")
        (member,) = json.loads(members.stdout)
        assert member["partitions"] == 1 and member["assignment"] == f"{TOPIC}(0)"
    finally:
        stop(thread, broker)

    # back at 0 once more, then the group is deleted with its durable state: created
    # again under its id, it starts at the log end, as a new share group does
    r = groups(
        broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute"
    )
    assert r.returncode == 0 and start_offsets(broker) == {0: 0}
    r = groups(broker, "--delete", "--group", GROUP)
    assert r.returncode == 0, r.stderr
    assert f"Deletion of requested share groups ('{GROUP}') was successful." in r.stdout.decode()
    assert group_state(broker) is None
    thread = PollingThread(share_consumer(broker.bootstrap, GROUP, TOPIC))
    thread.start()
    try:
        warm_up(producer, TOPIC, lambda: thread.warm)
        later = [b"n%d" % i for i in range(3)]
        produce(producer, TOPIC, later)
        wait_for(lambda: set(later) <= values(thread), "the new group did not get new records")
        assert not values(thread) & set(first)
    finally:
        stop(thread, broker)

    # a topic's offsets deleted from the (empty) group
    r = groups(broker, "--delete-offsets", "--group", GROUP, "--topic", TOPIC)
    assert r.returncode == 0, r.stderr
    assert [TOPIC, "Successful"] in [line.split() for line in r.stdout.decode().splitlines()]
    with WireClient(broker.port) as client:
        described = client.request(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            0,
            {"groups": [{"group_id": GROUP, "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]},
        )
    (group,) = described["groups"]
    (partition,) = group["topics"][0]["partitions"]
    assert (partition["start_offset"], partition["error_code"]) == (-1, ErrorCode.NONE)
    assert start_offsets(broker) == {}
    r = groups(broker, "--describe", "--group", "no-such-share-group", "--type", "share")
    assert r.returncode == 1
    assert b"Share group 'no-such-share-group' does not exist." in r.stderr
