"""Transactional producers of confluent-kafka and kafka-python against one broker
process: commit, abort, zombie fencing, the timeout abort, consume-transform-produce
with send_offsets_to_transaction, and what read_committed and read_uncommitted
consumers see; DescribeTransactions and ListTransactions over the wire. Each runs
against a broker finalizing `transaction.version` 2 and one pinned to 1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from testkit.procs import BrokerProcess, wait_until

SETTINGS = {
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
}


@pytest.fixture(scope="module", params=[2, 1], ids=["tv2", "tv1"])
def broker(request, tmp_path_factory):
    """One broker per finalized `transaction.version`: 2 (the default, transactions
    v2 served) and pinned to 1. These clients speak transactions v1 either way
    (tests/broker/server/test_transactions_v2.py drives v2)."""
    settings = {**SETTINGS, "transaction.version": request.param}
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", settings=settings).start()
    b.transaction_version = request.param
    yield b
    b.stop()


def test_api_versions_reports_the_finalized_transaction_version(broker):
    host, port = broker.bootstrap.split(":")
    with BlockingClient(host, int(port)) as c:
        answer = c.request(ApiKey.API_VERSIONS, 4, {})
    level = broker.transaction_version
    finalized = {f["name"]: f for f in answer["finalized_features"]}
    assert finalized["transaction.version"] == {
        "name": "transaction.version",
        "max_version_level": level,
        "min_version_level": level,
    }


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})
    p.init_transactions(30)
    return p


def read_values(bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """Everything a consumer of `isolation` reads up to the end of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader-unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, at_end = [], set()
    try:
        for _ in range(300):
            for msg in consumer.consume(num_messages=500, timeout=0.1):
                if msg.error() is not None:
                    at_end.add(msg.partition())
                    continue
                values.append(msg.value())
            if len(at_end) == partitions:
                break
    finally:
        consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return sorted(values)


def describe(bootstrap: str, tid: str) -> dict:
    host, port = bootstrap.split(":")
    with BlockingClient(host, int(port)) as c:
        resp = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    return resp["transaction_states"][0]


def test_commit_and_abort_seen_by_isolation_level(broker):
    create_topic(broker.bootstrap, "ca")
    p = txn_producer(broker.bootstrap, "ca-tx")
    p.begin_transaction()
    for i in range(6):
        p.produce("ca", value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce("ca", value=b"a%d" % i, partition=i % 2)
    p.flush(30)  # in the log before the abort
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("ca", value=b"c-last", partition=0)
    p.commit_transaction(30)
    committed = sorted([b"c%d" % i for i in range(6)] + [b"c-last"])
    aborted = [b"a%d" % i for i in range(4)]
    assert read_values(broker.bootstrap, "ca", "read_committed") == committed
    assert read_values(broker.bootstrap, "ca", "read_uncommitted") == sorted(committed + aborted)
    state = describe(broker.bootstrap, "ca-tx")
    assert state["error_code"] == 0 and state["transaction_state"] == "CompleteCommit"
    p.flush(10)


def test_open_transaction_hides_records_until_commit(broker):
    create_topic(broker.bootstrap, "open", 1)
    p = txn_producer(broker.bootstrap, "open-tx")
    p.begin_transaction()
    p.produce("open", value=b"pending", partition=0)
    p.flush(30)
    assert read_values(broker.bootstrap, "open", "read_committed", 1) == []
    assert read_values(broker.bootstrap, "open", "read_uncommitted", 1) == [b"pending"]
    assert describe(broker.bootstrap, "open-tx")["transaction_state"] == "Ongoing"
    p.commit_transaction(30)
    assert read_values(broker.bootstrap, "open", "read_committed", 1) == [b"pending"]


def test_second_producer_fences_the_first_and_aborts_its_transaction(broker):
    create_topic(broker.bootstrap, "zombie", 1)
    first = txn_producer(broker.bootstrap, "zombie-tx")
    first.begin_transaction()
    first.produce("zombie", value=b"from-the-zombie", partition=0)
    first.flush(30)
    second = txn_producer(broker.bootstrap, "zombie-tx")  # aborts first's transaction
    second.begin_transaction()
    second.produce("zombie", value=b"from-the-new-one", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException):
        first.produce("zombie", value=b"late", partition=0)
        first.commit_transaction(10)
    assert read_values(broker.bootstrap, "zombie", "read_committed", 1) == [b"from-the-new-one"]


def test_a_fenced_producers_produce_is_a_fatal_fenced_error(broker):
    """librdkafka's test 0103 (do_test_fenced_txn, producing after the fence): the
    fenced producer's Produce is answered INVALID_PRODUCER_EPOCH, as Kafka answers it,
    which librdkafka makes a fatal _FENCED error; PRODUCER_FENCED there would only
    make the transaction abortable."""
    create_topic(broker.bootstrap, "fenced", 1)
    first = txn_producer(broker.bootstrap, "fenced-tx")
    first.begin_transaction()
    first.produce("fenced", value=b"before-the-fence", partition=0)
    assert first.flush(30) == 0
    second = txn_producer(broker.bootstrap, "fenced-tx")
    first.produce("fenced", value=b"after-the-fence", partition=0)
    with pytest.raises(KafkaException) as raised:  # confluent-kafka raises a fatal error
        first.flush(30)
    error = raised.value.args[0]
    assert error.code() == KafkaError._FENCED, error
    assert error.fatal() and not error.txn_requires_abort()
    assert "old epoch" in error.str()  # INVALID_PRODUCER_EPOCH's message
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    error = raised.value.args[0]
    assert error.code() == KafkaError._FENCED, error
    assert error.fatal() and not error.txn_requires_abort()
    second.begin_transaction()
    second.produce("fenced", value=b"from-the-new-one", partition=0)
    second.commit_transaction(30)
    assert read_values(broker.bootstrap, "fenced", "read_committed", 1) == [b"from-the-new-one"]


def test_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(broker):
    create_topic(broker.bootstrap, "slow", 1)
    p = txn_producer(broker.bootstrap, "slow-tx", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("slow", value=b"too-slow", partition=0)
    p.flush(30)
    before = describe(broker.bootstrap, "slow-tx")
    wait_until(
        lambda: describe(broker.bootstrap, "slow-tx")["transaction_state"] == "CompleteAbort",
        what="the coordinator to abort the transaction",
    )
    after = describe(broker.bootstrap, "slow-tx")
    assert after["producer_epoch"] == before["producer_epoch"] + 1
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert read_values(broker.bootstrap, "slow", "read_committed", 1) == []
    assert read_values(broker.bootstrap, "slow", "read_uncommitted", 1) == [b"too-slow"]


def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([tp], timeout=10)[0].offset
    finally:
        consumer.close()


def test_consume_transform_produce_offsets_visible_only_after_commit(broker):
    create_topic(broker.bootstrap, "ctp-in", 1)
    create_topic(broker.bootstrap, "ctp-out", 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce("ctp-in", value=b"in-%d" % i, partition=0)
    plain.flush(30)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ctp",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["ctp-in"])
    p = txn_producer(broker.bootstrap, "ctp-tx")
    got = []
    for _ in range(300):
        for msg in consumer.consume(num_messages=100, timeout=0.1):
            assert msg.error() is None
            got.append(msg)
        if len(got) >= 10:
            break
    assert len(got) == 10
    p.begin_transaction()
    for msg in got:
        p.produce("ctp-out", value=msg.value().replace(b"in", b"out"), partition=0)
    p.send_offsets_to_transaction(
        [TopicPartition("ctp-in", 0, got[-1].offset() + 1)], consumer.consumer_group_metadata(), 30
    )
    p.flush(30)
    tp = TopicPartition("ctp-in", 0)
    assert _committed(broker.bootstrap, "ctp-probe", tp) < 0  # another group: nothing
    p.commit_transaction(30)
    wait_until(lambda: _committed(broker.bootstrap, "ctp", tp) == 10, what="offset 10 committed")
    consumer.close()
    expected = sorted(b"out-%d" % i for i in range(10))
    assert read_values(broker.bootstrap, "ctp-out", "read_committed", 1) == expected


def test_aborted_offsets_are_dropped(broker):
    create_topic(broker.bootstrap, "ab-in", 1)
    p = txn_producer(broker.bootstrap, "ab-tx")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ab"})
    meta = consumer.consumer_group_metadata()
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("ab-in", 0, 5)], meta, 30)
    p.abort_transaction(30)
    tp = TopicPartition("ab-in", 0)
    assert _committed(broker.bootstrap, "ab", tp) < 0
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("ab-in", 0, 7)], meta, 30)
    p.commit_transaction(30)
    wait_until(lambda: _committed(broker.bootstrap, "ab", tp) == 7, what="offset 7 committed")
    consumer.close()


def test_kafka_python_transactional_producer(broker):
    create_topic(broker.bootstrap, "kp", 1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-tx")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("kp", b"kp-committed", partition=0)
        p.send_offsets_to_transaction(
            {KTopicPartition("kp-in", 0): OffsetAndMetadata(3, "", -1)}, "kp-group"
        )
        p.commit_transaction()
        p.begin_transaction()
        p.send("kp", b"kp-aborted", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert read_values(broker.bootstrap, "kp", "read_committed", 1) == [b"kp-committed"]
    assert _committed(broker.bootstrap, "kp-group", TopicPartition("kp-in", 0)) == 3
    assert read_values(broker.bootstrap, "kp", "read_uncommitted", 1) == [
        b"kp-aborted",
        b"kp-committed",
    ]


def test_list_transactions_filters(broker):
    create_topic(broker.bootstrap, "lt", 1)
    p = txn_producer(broker.bootstrap, "lt-tx")
    p.begin_transaction()
    p.produce("lt", value=b"x", partition=0)
    p.flush(30)
    host, port = broker.bootstrap.split(":")
    with BlockingClient(host, int(port)) as c:
        body = {"state_filters": ["Ongoing", "Nonsense"], "producer_id_filters": []}
        resp = c.request(ApiKey.LIST_TRANSACTIONS, 1, body | {"duration_filter": -1})
    assert resp["unknown_state_filters"] == ["Nonsense"]
    ids = {t["transactional_id"] for t in resp["transaction_states"]}
    assert "lt-tx" in ids
    p.abort_transaction(30)


def describe_producers(bootstrap: str, topic: str, *partitions: int) -> list[dict]:
    host, port = bootstrap.split(":")
    with BlockingClient(host, int(port)) as c:
        body = {"topics": [{"name": topic, "partition_indexes": list(partitions)}]}
        resp = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
    return resp["topics"][0]["partitions"]


def test_describe_producers_shows_where_an_open_transaction_began(broker):
    create_topic(broker.bootstrap, "dp", 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(3):
        plain.produce("dp", value=b"i%d" % i, partition=0)
    plain.flush(30)
    p = txn_producer(broker.bootstrap, "dp-tx")
    p.begin_transaction()
    p.produce("dp", value=b"t0", partition=0)
    p.flush(30)
    (part,) = describe_producers(broker.bootstrap, "dp", 0)
    assert part["error_code"] == 0
    by_id = {a["producer_id"]: a for a in part["active_producers"]}
    txn = by_id[describe(broker.bootstrap, "dp-tx")["producer_id"]]
    assert txn["current_txn_start_offset"] == 3 and txn["last_sequence"] == 0
    (idempotent,) = [a for pid, a in by_id.items() if pid != txn["producer_id"]]
    assert idempotent["current_txn_start_offset"] == -1 and idempotent["last_sequence"] == 2
    p.commit_transaction(30)
    (part,) = describe_producers(broker.bootstrap, "dp", 0)
    committed = {a["producer_id"]: a for a in part["active_producers"]}[txn["producer_id"]]
    assert committed["current_txn_start_offset"] == -1
    (elsewhere,) = describe_producers(broker.bootstrap, "dp", 7)
    assert elsewhere["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    (missing,) = describe_producers(broker.bootstrap, "no-such-topic", 0)
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_transactions_cli_lists_and_describes(broker):
    create_topic(broker.bootstrap, "cli", 1)
    p = txn_producer(broker.bootstrap, "cli-tx")
    p.begin_transaction()
    p.produce("cli", value=b"x", partition=0)
    p.flush(30)

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "logflume", "transactions", "--bootstrap-server"]
            + [broker.bootstrap, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ]
    assert any(line.split()[0] == "cli-tx" for line in listed.stdout.splitlines()[1:])
    as_json = cli("list", "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    (ours,) = [t for t in json.loads(as_json.stdout) if t["transactional_id"] == "cli-tx"]
    assert ours["transaction_state"] == "Ongoing" and isinstance(ours["producer_id"], int)
    described = cli("describe", "--transactional-id", "cli-tx")
    assert described.returncode == 0, described.stderr
    row = described.stdout.splitlines()[1].split("\t")
    assert [c.strip() for c in row][1] == "cli-tx"
    assert "Ongoing" in described.stdout and "cli-0" in described.stdout
    hanging = cli("find-hanging", "--topic", "cli", "--max-transaction-timeout", "0")
    assert hanging.returncode == 0, hanging.stderr
    assert len(hanging.stdout.splitlines()) == 1  # its coordinator will end it
    hanging = cli(
        "find-hanging", "--topic", "cli", "--max-transaction-timeout", "0", "--output", "json"
    )
    assert hanging.returncode == 0 and json.loads(hanging.stdout) == []
    unscoped = cli("find-hanging")
    assert unscoped.returncode == 1 and "--topic or --broker-id" in unscoped.stderr
    missing = cli("describe", "--transactional-id", "never-used")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    state = describe(broker.bootstrap, "cli-tx")
    aborted = cli(
        "abort",
        "--topic",
        "cli",
        "--partition",
        "0",
        "--producer-id",
        str(state["producer_id"]),
        "--producer-epoch",
        str(state["producer_epoch"]),
    )
    assert aborted.returncode == 0, aborted.stderr
    # the marker ended the partition's open transaction: read_committed reads past it
    created = Producer({"bootstrap.servers": broker.bootstrap})
    created.produce("cli", value=b"after-the-abort", partition=0)
    created.flush(30)
    assert read_values(broker.bootstrap, "cli", "read_committed", 1) == [b"after-the-abort"]
    p.abort_transaction(30)


def test_state_survives_a_sigkill(tmp_path):
    """After SIGKILL and restart: the id's epoch continues (the old producer stays
    fenced), committed transactional offsets are there, and the transaction that was
    open at the kill is aborted by its timeout (its records never become visible)."""
    b = BrokerProcess(tmp_path / "data", settings=SETTINGS).start()
    try:
        create_topic(b.bootstrap, "crash", 1)
        p = txn_producer(b.bootstrap, "crash-tx", **{"transaction.timeout.ms": 3000})
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "crash-g"})
        p.begin_transaction()
        p.produce("crash", value=b"committed", partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition("crash", 0, 1)], consumer.consumer_group_metadata(), 30
        )
        p.commit_transaction(30)
        consumer.close()
        p.begin_transaction()
        p.produce("crash", value=b"open-at-the-kill", partition=0)
        p.flush(30)
        before = describe(b.bootstrap, "crash-tx")
        assert before["transaction_state"] == "Ongoing"
        b.kill()
        b.start()
        wait_until(
            lambda: describe(b.bootstrap, "crash-tx")["transaction_state"] == "CompleteAbort",
            what="the open transaction to be aborted after the restart",
        )
        assert describe(b.bootstrap, "crash-tx")["producer_epoch"] == before["producer_epoch"] + 1
        assert _committed(b.bootstrap, "crash-g", TopicPartition("crash", 0)) == 1
        assert read_values(b.bootstrap, "crash", "read_committed", 1) == [b"committed"]
        again = txn_producer(b.bootstrap, "crash-tx")
        assert describe(b.bootstrap, "crash-tx")["producer_epoch"] == before["producer_epoch"] + 2
        again.begin_transaction()
        again.produce("crash", value=b"after", partition=0)
        again.commit_transaction(30)
        assert read_values(b.bootstrap, "crash", "read_committed", 1) == [b"after", b"committed"]
    finally:
        b.stop()


def test_txn_offset_commit_over_the_wire(broker):
    """TxnOffsetCommit is refused until AddOffsetsToTxn put the group's partition in
    the transaction (KIP-890); OffsetFetch require_stable answers
    UNSTABLE_OFFSET_COMMIT while the offset is pending."""
    host, port = broker.bootstrap.split(":")
    tid, group = "raw-tx", "raw-group"
    with BlockingClient(host, int(port)) as c:
        c.request(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
        c.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        ids = c.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000}
        )
        producer = {"producer_id": ids["producer_id"], "producer_epoch": ids["producer_epoch"]}
        commit = {
            "transactional_id": tid,
            "group_id": group,
            **producer,
            "topics": [
                {
                    "name": "raw",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 9, "committed_metadata": ""}
                    ],
                }
            ],
        }

        def commit_error() -> int:
            resp = c.request(ApiKey.TXN_OFFSET_COMMIT, 3, commit)
            return resp["topics"][0]["partitions"][0]["error_code"]

        fetch = {
            "group_id": group,
            "topics": [{"name": "raw", "partition_indexes": [0]}],
            "require_stable": True,
        }

        def fetched() -> dict:
            return c.request(ApiKey.OFFSET_FETCH, 7, fetch)["topics"][0]["partitions"][0]

        assert commit_error() == ErrorCode.INVALID_TXN_STATE
        added = c.request(
            ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": tid, "group_id": group, **producer}
        )
        assert added["error_code"] == ErrorCode.NONE
        assert commit_error() == ErrorCode.NONE
        assert fetched()["error_code"] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        ended = c.request(
            ApiKey.END_TXN, 3, {"transactional_id": tid, **producer, "committed": True}
        )
        assert ended["error_code"] == ErrorCode.NONE
        wait_until(lambda: fetched()["committed_offset"] == 9, what="the offset to be committed")
        assert fetched()["error_code"] == ErrorCode.NONE
