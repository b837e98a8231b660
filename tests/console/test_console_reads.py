"""The console's reads (console/kafka.py, console/groups.py) against a real broker:
the message browser ends a transactional partition at its last stable offset (after
a commit marker, or before an open transaction), seeks by offset and time, and shows
headers and JSON; topic and broker configs with their sources; group members; and
every group's offsets in one OffsetFetch per coordinator, counted by the broker's
request metrics."""

import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common.ports import free_port
from console.kafka import KafkaView
from tests.console.records import (
    T0,
    commit,
    member,
    requests_by_api,
    timed_records,
    transactional_records,
)

TXN_TOPIC = "reads-positions"
TIMED_TOPIC = "reads-timed"
OPEN_TOPIC = "reads-open"
GROUPS = ("reads-a", "reads-b", "reads-c")


def test_console_reads_against_a_broker(broker_factory):
    metrics_port = free_port()
    broker = broker_factory(
        settings={
            "metrics.listen": f"127.0.0.1:{metrics_port}",
            "group.initial.rebalance.delay.ms": 0,
        }
    )
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(TXN_TOPIC, 1, 1),
        NewTopic(TIMED_TOPIC, 1, 1, config={"retention.ms": "-1"}),
        NewTopic(OPEN_TOPIC, 1, 1),
    ]
    for future in admin.create_topics(topics, operation_timeout=10).values():
        future.result(timeout=20)
    transactional_records(bootstrap, TXN_TOPIC, 5)
    transactional_records(bootstrap, OPEN_TOPIC, 3)  # offsets 0-2, the marker at 3
    still_open = Producer({"bootstrap.servers": bootstrap, "transactional.id": "reads-open"})
    still_open.init_transactions(30)
    still_open.begin_transaction()
    still_open.produce(OPEN_TOPIC, value=b"not yet", partition=0)  # offset 4, open
    assert still_open.flush(20) == 0
    timed_records(bootstrap, TIMED_TOPIC)
    for i, group in enumerate(GROUPS):
        commit(bootstrap, group, TIMED_TOPIC, 2 + i)
    live = member(bootstrap, "reads-live", TXN_TOPIC, "reads-member-client")
    view = KafkaView({"bootstrap.servers": bootstrap}, "nginx-stats", timeout=20.0)
    try:
        # a transactional partition: 5 records, then the commit marker at offset 5
        page = view.messages(TXN_TOPIC, 0, 20)
        assert (page["low"], page["high"], page["last_stable"]) == (0, 6, 6)
        assert page["stopped"] == "end"  # at the last stable offset, not a timeout
        assert [r["offset"] for r in page["records"]] == [0, 1, 2, 3, 4]
        last = page["records"][-1]
        assert last["headers"] == [["host", "web-a"]] and last["key"] == "k4"
        assert json.loads(last["value"]) == {"file": "/var/log/nginx/access.log.4", "position": 400}
        assert last["json"].startswith('{\n  "file": "/var/log/nginx/access.log.4",\n')
        page = view.messages(TXN_TOPIC, 0, 2)
        assert [r["offset"] for r in page["records"]] == [4] and page["start"] == 4
        page = view.messages(TXN_TOPIC, 0, 2, offset=1)
        assert [r["offset"] for r in page["records"]] == [1, 2] and page["stopped"] == "count"
        page = view.messages(TXN_TOPIC, 0, 5, offset=6)
        assert page["records"] == [] and page["stopped"] == "end"
        # an open transaction: the read ends at its first offset, the last stable one
        page = view.messages(OPEN_TOPIC, 0, 20)
        assert (page["high"], page["last_stable"], page["stopped"]) == (5, 4, "end")
        assert [r["offset"] for r in page["records"]] == [0, 1, 2]

        # seek by time: the first record at or after T0 + 6.5 s is record 7
        page = view.messages(TIMED_TOPIC, 0, 2, timestamp=T0 + 6500)
        assert [(r["offset"], r["timestamp"]) for r in page["records"]] == [
            (7, T0 + 7000),
            (8, T0 + 8000),
        ]
        assert page["records"][0]["json"] is None and page["records"][0]["headers"] == []
        page = view.messages(TIMED_TOPIC, 0, 5, timestamp=T0 + 60_000)
        assert page["records"] == [] and page["stopped"] == "end" and page["start"] == 10

        # configs with their sources
        topic = {c["name"]: c for c in view.configs("topic", TIMED_TOPIC)["configs"]}
        assert topic["retention.ms"]["value"] == "-1"
        assert topic["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
        brokers = {c["name"]: c for c in view.configs("broker", "0")["configs"]}
        assert brokers["group.initial.rebalance.delay.ms"]["value"] == "0"
        assert brokers["group.initial.rebalance.delay.ms"]["source"] == "STATIC_BROKER_CONFIG"

        # groups: members, and every group's offsets in one request per coordinator
        highs = {(TIMED_TOPIC, 0): 10, (TXN_TOPIC, 0): 6}
        view.groups(highs)  # the coordinators found (FindCoordinator), once
        before = requests_by_api(metrics_port)
        groups = {g["group"]: g for g in view.groups(highs)}
        after = requests_by_api(metrics_port)
        for i, name in enumerate(GROUPS):
            assert groups[name]["partitions"] == [
                {"topic": TIMED_TOPIC, "partition": 0, "committed": 2 + i, "high": 10, "lag": 8 - i}
            ]
            assert groups[name]["members"] == [] and groups[name]["state"] == "Empty"
        (one,) = groups["reads-live"]["members"]
        assert one["client_id"] == "reads-member-client" and one["host"] == "127.0.0.1"
        assert one["assignment"] == [{"topic": TXN_TOPIC, "partition": 0}]
        assert groups["reads-live"]["state"] == "Stable"
        # four groups, one coordinator (a single broker): one of each request
        assert after["OffsetFetch"] - before["OffsetFetch"] == 1
        assert after["DescribeGroups"] - before["DescribeGroups"] == 1
        assert after.get("FindCoordinator", 0) == before.get("FindCoordinator", 0)
    finally:
        live.close()
        view.close()
        still_open.abort_transaction(30)
