"""Dynamic group configs (config resource type GROUP, 32) against a broker subprocess:
DescribeConfigs and (Incremental)AlterConfigs over the wire with Kafka's checks and
messages, the configs surviving a restart; a consumer-protocol member removed after
its group's own session timeout; a confluent-kafka ShareConsumer reading from the log
start after `share.auto.offset.reset=earliest`; Kafka 4.1's refusals of the other
protocols' requests for a share group's id (and the reverse); `logflume configs
--entity-type groups`.

librdkafka has no GROUP config resource (its ResourceType.GROUP is the ACL type 3), so
the configs go over the project's blocking client, as `logflume configs` does.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from testkit.procs import BrokerProcess
from tests.logflume.test_commands_clients import lf

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    # a member at the broker's own session timeout would stay for ten minutes
    "group.consumer.session.timeout.ms": 600000,
    "group.consumer.max.session.timeout.ms": 600000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("group-configs") / "data", settings=SETTINGS)
    b.start()
    yield b
    b.stop()


def wait_until(condition, what: str, deadline_s: float = 60.0):
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def client(b) -> BlockingClient:
    return BlockingClient("127.0.0.1", b.port, 10.0)


def alter(c, group: str, changes: list[tuple[str, int, str | None]], validate_only=False):
    configs = [{"name": n, "config_operation": op, "value": v} for n, op, v in changes]
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": configs}],
        "validate_only": validate_only,
    }
    result = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]
    return result["error_code"], result["error_message"]


def describe(c, group: str) -> dict:
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": True,
    }
    return c.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]


def by_name(result: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in result["configs"]}


def ensure_coordinator(c, group: str) -> None:
    """FindCoordinator until this single broker answers for the group (it creates
    __consumer_offsets and loads its partitions)."""

    def found():
        body = {"key_type": 0, "coordinator_keys": [group]}
        answer = c.request(ApiKey.FIND_COORDINATOR, 4, body)["coordinators"][0]
        return answer["error_code"] == ErrorCode.NONE

    wait_until(found, f"the coordinator of {group}")


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(20)


def test_describe_and_alter_a_groups_configs(broker):
    with client(broker) as c:
        described = by_name(describe(c, "cfg-g"))
        assert sorted(described) == [
            "consumer.heartbeat.interval.ms",
            "consumer.session.timeout.ms",
            "share.auto.offset.reset",
            "share.heartbeat.interval.ms",
            "share.isolation.level",
            "share.record.lock.duration.ms",
            "share.session.timeout.ms",
        ]
        session = described["consumer.session.timeout.ms"]
        assert session["value"] == "600000" and session["config_source"] == 4  # static broker
        assert session["synonyms"][0] == {
            "name": "group.consumer.session.timeout.ms",
            "value": "600000",
            "source": 4,
        }
        assert described["share.auto.offset.reset"]["value"] == "latest"
        assert described["share.auto.offset.reset"]["config_source"] == 5  # default
        assert described["share.record.lock.duration.ms"]["config_type"] == 3  # INT

        assert alter(c, "cfg-g", [("share.auto.offset.reset", SET, "earliest")], True) == (0, None)
        assert by_name(describe(c, "cfg-g"))["share.auto.offset.reset"]["value"] == "latest"
        changes = [
            ("share.auto.offset.reset", SET, "by_duration:PT1H30M"),
            ("consumer.session.timeout.ms", SET, "50000"),
        ]
        assert alter(c, "cfg-g", changes) == (0, None)
        described = by_name(describe(c, "cfg-g"))
        reset = described["share.auto.offset.reset"]
        assert reset["value"] == "by_duration:PT1H30M" and reset["config_source"] == 8
        assert reset["synonyms"] == [
            {"name": "share.auto.offset.reset", "value": "by_duration:PT1H30M", "source": 8},
            {"name": "share.auto.offset.reset", "value": "latest", "source": 5},
        ]
        assert described["consumer.session.timeout.ms"]["value"] == "50000"
        assert alter(c, "cfg-g", [("consumer.session.timeout.ms", DELETE, None)]) == (0, None)
        assert by_name(describe(c, "cfg-g"))["consumer.session.timeout.ms"]["value"] == "600000"

        # the legacy AlterConfigs replaces the whole set
        body = {
            "resources": [
                {
                    "resource_type": GROUP,
                    "resource_name": "cfg-g",
                    "configs": [{"name": "share.heartbeat.interval.ms", "value": "6000"}],
                }
            ],
            "validate_only": False,
        }
        assert c.request(ApiKey.ALTER_CONFIGS, 2, body)["responses"][0]["error_code"] == 0
        described = by_name(describe(c, "cfg-g"))
        assert described["share.heartbeat.interval.ms"]["config_source"] == 8
        assert described["share.auto.offset.reset"]["value"] == "latest"


@pytest.mark.parametrize(
    ("changes", "code", "message"),
    [
        ([("group.id", SET, "x")], 40, "Unknown group config name: group.id"),
        (
            [("consumer.session.timeout.ms", SET, "soon")],
            40,
            "Invalid value soon for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            [("share.record.lock.duration.ms", SET, "999")],
            40,
            "Invalid value 999 for configuration share.record.lock.duration.ms: "
            "Value must be at least 1000",
        ),
        (
            [("share.record.lock.duration.ms", SET, "90000")],
            40,
            "share.record.lock.duration.ms must be less than or equal to "
            "group.share.max.record.lock.duration.ms",
        ),
        (
            [("share.session.timeout.ms", SET, "10000")],
            40,
            "share.session.timeout.ms must be greater than or equal to "
            "group.share.min.session.timeout.ms",
        ),
        (
            [
                ("consumer.heartbeat.interval.ms", SET, "5000"),
                ("consumer.session.timeout.ms", SET, "4000"),
            ],
            40,
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
        ),
        (
            [("share.auto.offset.reset", SET, "by_duration:-PT1H")],
            40,
            "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid "
            "value `by_duration:-PT1H` for configuration share.auto.offset.reset. The value must "
            "be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.",
        ),
        (
            [("share.isolation.level", SET, "read_committed")],
            40,
            "Invalid value read_committed for configuration share.isolation.level: share "
            "groups are served read_uncommitted only by this broker",
        ),
        (
            [("share.auto.offset.reset", APPEND, "earliest")],
            40,
            "Can't APPEND to key share.auto.offset.reset because its type is not LIST.",
        ),
        (
            [("share.auto.offset.reset", SET, None)],
            42,
            "Null value not supported for : share.auto.offset.reset",
        ),
    ],
)
def test_what_kafka_refuses_is_refused_with_its_message(broker, changes, code, message):
    with client(broker) as c:
        assert alter(c, "refused-g", changes) == (code, message)
        assert all(e["config_source"] != 8 for e in describe(c, "refused-g")["configs"])


def test_the_empty_group_name_is_an_invalid_request(broker):
    with client(broker) as c:
        assert alter(c, "", [("share.auto.offset.reset", SET, "earliest")]) == (
            ErrorCode.INVALID_REQUEST,
            "Default group resources are not allowed.",
        )
        result = describe(c, "")
        assert (result["error_code"], result["error_message"]) == (
            ErrorCode.INVALID_REQUEST,
            "Group name must not be empty",
        )


def test_a_consumer_group_member_is_removed_after_the_groups_session_timeout(broker):
    group, topic = "session-g", "session-t"
    create_topic(broker.bootstrap, topic)
    with client(broker) as c:
        changes = [
            ("consumer.session.timeout.ms", SET, "2000"),
            ("consumer.heartbeat.interval.ms", SET, "500"),
        ]
        assert alter(c, group, changes) == (0, None)
        ensure_coordinator(c, group)
        member = str(uuid.uuid4())

        def join():
            body = {
                "group_id": group,
                "member_id": member,
                "member_epoch": 0,
                "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": [topic],
                "topic_partitions": [],
            }
            answer = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
            return answer if answer["error_code"] == ErrorCode.NONE else None

        joined = wait_until(join, "the member's join")
        assert joined["heartbeat_interval_ms"] == 500  # the group's, not the broker's 5000

        def members():
            body = {"group_ids": [group], "include_authorized_operations": False}
            described = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body)["groups"][0]
            assert described["error_code"] == ErrorCode.NONE
            return described["members"]

        assert [m["member_type"] for m in members()] == [1]  # a consumer-protocol member
        # no more heartbeats: gone after the group's 2 s, long before the broker's 10 min
        wait_until(lambda: not members(), "the member's removal")


@pytest.mark.parametrize("reset", ["earliest", "by_duration:PT1H"])
def test_a_share_consumer_reads_what_was_produced_before_with_earliest_or_a_duration(broker, reset):
    """by_duration: the first record at most an hour old, here the first of all."""
    group, topic = f"{reset[:7]}-g", f"{reset[:7]}-t"
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    values = [b"before-%d" % i for i in range(20)]
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    with client(broker) as c:
        assert alter(c, group, [("share.auto.offset.reset", SET, reset)]) == (0, None)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:

        def all_read():
            got.extend(m.value() for m in consumer.poll(0.5) if m.error() is None)
            return len(got) >= len(values)

        wait_until(all_read, "the records produced before the group existed")
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)


def test_other_protocols_requests_for_a_share_groups_id_are_refused(broker):
    group, topic = "refusing-share-g", "refusing-t"
    create_topic(broker.bootstrap, topic)
    with client(broker) as c:
        ensure_coordinator(c, group)
        share_member = str(uuid.uuid4())

        def share_join():
            body = {
                "group_id": group,
                "member_id": share_member,
                "member_epoch": 0,
                "subscribed_topic_names": [topic],
            }
            return c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)["error_code"] == 0

        wait_until(share_join, "the share member's join")
        join = c.request(
            ApiKey.JOIN_GROUP,
            5,
            {
                "group_id": group,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        assert (join["error_code"], join["member_id"]) == (
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            "",
        )
        sync = {"group_id": group, "generation_id": 1, "member_id": "m", "assignments": []}
        assert c.request(ApiKey.SYNC_GROUP, 3, sync)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        beat = {"group_id": group, "generation_id": 1, "member_id": "m"}
        assert c.request(ApiKey.HEARTBEAT, 3, beat)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        consumer_beat = {
            "group_id": group,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": [topic],
            "topic_partitions": [],
        }
        answer = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, consumer_beat)
        assert (answer["error_code"], answer["error_message"]) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Group {group} is not a consumer group",
        )
        commit = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                    ],
                }
            ],
        }
        answer = c.request(ApiKey.OFFSET_COMMIT, 8, commit)
        assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        described = c.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": [group, "nobody-g"]})
        assert [(g["error_code"], g["error_message"]) for g in described["groups"]] == [
            (ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group."),
            (ErrorCode.GROUP_ID_NOT_FOUND, "Group nobody-g not found."),
        ]
        old = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["nobody-g"]})["groups"][0]
        assert (old["error_code"], old["group_state"]) == (ErrorCode.NONE, "Dead")


def test_a_share_heartbeat_for_a_classic_groups_id_is_refused(broker):
    group, topic = "classic-not-share-g", "classic-t"
    create_topic(broker.bootstrap, topic)
    with client(broker) as c:
        ensure_coordinator(c, group)
        commit = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}
                    ],
                }
            ],
        }

        def committed():
            answer = c.request(ApiKey.OFFSET_COMMIT, 8, commit)
            return answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE

        wait_until(committed, "a simple group's commit")
        body = {
            "group_id": group,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "subscribed_topic_names": [topic],
        }
        answer = c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)
        assert (answer["error_code"], answer["error_message"]) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Group {group} is not a share group.",
        )


def test_logflume_configs_for_a_group(broker):
    b = ["--bootstrap-server", broker.bootstrap]
    group = ["--entity-type", "groups", "--entity-name", "cli-g"]
    r = lf("configs", *b, *group, "--alter", "--add-config", "share.record.lock.duration.ms=20000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "Completed updating config for group cli-g.\n"
    r = lf("configs", *b, *group, "--describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [
        "Dynamic configs for group cli-g are:",
        "  share.record.lock.duration.ms=20000 sensitive=false synonyms={GROUP_CONFIG:"
        "share.record.lock.duration.ms=20000, DEFAULT_CONFIG:"
        "group.share.record.lock.duration.ms=30000}",
    ]
    r = lf("configs", *b, *group, "--describe", "--all")
    assert "  share.auto.offset.reset=latest sensitive=false" in r.stdout.decode()
    r = lf("configs", *b, *group, "--alter", "--add-config", "share.record.lock.duration.ms=5")
    assert r.returncode == 1
    assert r.stderr.decode().strip() == (
        "Error while executing config command with args: INVALID_CONFIG: Invalid value 5 for "
        "configuration share.record.lock.duration.ms: Value must be at least 1000"
    )
    r = lf("configs", *b, *group, "--alter", "--delete-config", "share.record.lock.duration.ms")
    assert r.returncode == 0, r.stderr
    r = lf("configs", *b, *group, "--describe")
    assert r.stdout.decode().splitlines() == ["Dynamic configs for group cli-g are:"]
    r = lf("configs", *b, "--entity-type", "groups", "--describe")
    assert r.returncode == 1 and b"needs --entity-name" in r.stderr


def test_group_configs_survive_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        with client(b) as c:
            assert alter(c, "kept-g", [("share.auto.offset.reset", SET, "earliest")]) == (0, None)
        b.stop()
        b.start()
        with client(b) as c:
            reset = by_name(describe(c, "kept-g"))["share.auto.offset.reset"]
            assert (reset["value"], reset["config_source"]) == ("earliest", 8)
    finally:
        b.stop()


def test_a_share_group_gets_its_lock_duration_and_heartbeat_interval(broker):
    group, topic = "share-timing-g", "share-timing-t"
    create_topic(broker.bootstrap, topic)
    with client(broker) as c:
        changes = [
            ("share.record.lock.duration.ms", SET, "20000"),
            ("share.heartbeat.interval.ms", SET, "6000"),
        ]
        assert alter(c, group, changes) == (0, None)
        ensure_coordinator(c, group)
        member = str(uuid.uuid4())

        def join():
            body = {
                "group_id": group,
                "member_id": member,
                "member_epoch": 0,
                "subscribed_topic_names": [topic],
            }
            answer = c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)
            return answer if answer["error_code"] == ErrorCode.NONE else None

        assert wait_until(join, "the share member's join")["heartbeat_interval_ms"] == 6000
        fetch = {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "max_records": 10,
            "batch_size": 10,
            "topics": [],
        }
        answer = c.request(ApiKey.SHARE_FETCH, 1, fetch)
        assert (answer["error_code"], answer["acquisition_lock_timeout_ms"]) == (0, 20000)
        other = c.request(ApiKey.SHARE_FETCH, 1, fetch | {"group_id": "share-default-g"})
        assert other["acquisition_lock_timeout_ms"] == 30000  # the broker's
