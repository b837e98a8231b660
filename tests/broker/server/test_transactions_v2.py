"""Transactions v2 (KIP-890 part 2) on a real broker process: ApiVersions reports
`transaction.version` 2, a v2 producer (tests/broker/server/tv2_producer.py: Produce
v12, TxnOffsetCommit v5, EndTxn v5, no AddPartitionsToTxn) commits and aborts
interleaved transactions under an epoch bumped at every end, the markers carry the
bumped epoch, a zombie of an older epoch is fenced, read_committed consumers
(confluent-kafka) see exactly the committed records, and the broker's request
metrics show the versions used. librdkafka, which does not speak v2, keeps working
on the same broker; a broker pinned to `transaction.version` 1 reports it so."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from broker.protocol.records import iter_batches
from common.ports import free_port
from testkit.procs import BrokerProcess, wait_until
from testkit.scrape import scrape
from tests.broker.server.tv2_producer import TV2Producer
from tests.broker.server.wire import fetch_body

SETTINGS = {
    "num.partitions": 2,
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
}


def start(root, **settings):
    metrics_port = free_port()
    b = BrokerProcess(
        root / "data",
        settings={**SETTINGS, "metrics.listen": f"127.0.0.1:{metrics_port}", **settings},
    ).start()
    b.metrics_port = metrics_port
    return b


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start(tmp_path_factory.mktemp("tv2"))
    yield b
    b.stop()


def client(b) -> BlockingClient:
    host, port = b.bootstrap.split(":")
    return BlockingClient(host, int(port))


def features(b, version: int = 4) -> dict:
    with client(b) as c:
        return c.request(ApiKey.API_VERSIONS, version, {"client_software_name": "t"})


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tv2-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
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


def markers(b, topic: str, partition: int) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, commit?) of each end-transaction marker of the partition."""
    with client(b) as c:
        body = fetch_body(topic, partition=partition)
        part = c.request(ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]
    out = []
    for batch in iter_batches(bytes(part["records"])):
        if batch.is_control:
            key = next(iter(batch.records())).key
            out.append((batch.producer_id, batch.producer_epoch, key[-1] == 1))
    return out


def versions(b, api: str) -> dict[str, float]:
    m = scrape(b.metrics_port)
    return {
        str(v): m.get("logflume_broker_requests_by_version_total", api=api, version=str(v))
        for v in range(16)
        if m.get("logflume_broker_requests_by_version_total", api=api, version=str(v))
    }


def test_api_versions_reports_transaction_version_2(broker):
    v4 = features(broker)
    assert v4["supported_features"] == [
        {"name": "group.version", "min_version": 0, "max_version": 1},
        {"name": "share.version", "min_version": 0, "max_version": 1},
        {"name": "transaction.version", "min_version": 0, "max_version": 2},
    ]
    assert v4["finalized_features"] == [
        {"name": "group.version", "max_version_level": 1, "min_version_level": 1},
        {"name": "share.version", "max_version_level": 1, "min_version_level": 1},
        {"name": "transaction.version", "max_version_level": 2, "min_version_level": 2},
    ]
    assert v4["finalized_features_epoch"] == 0
    ranges = {k["api_key"]: k["max_version"] for k in v4["api_keys"]}
    assert (ranges[ApiKey.PRODUCE], ranges[ApiKey.END_TXN], ranges[ApiKey.TXN_OFFSET_COMMIT]) == (
        12,
        5,
        5,
    )
    # v3 leaves out a supported range starting at 0 (KAFKA-17492), as Kafka does
    assert features(broker, 3)["supported_features"] == []


def test_v2_commits_and_aborts_interleaved_with_an_epoch_bump_at_each_end(broker):
    topic, group = "tv2-data", "tv2-group"
    with TV2Producer(broker.bootstrap, "tv2-tx") as p:
        p.init()
        pid, first_epoch = p.producer_id, p.epoch
        expected = []
        for i in range(6):
            commit = i % 2 == 0
            values = [b"t%d-a" % i, b"t%d-b" % i]
            assert p.produce(topic, 0, values[0]) == ErrorCode.NONE
            assert p.produce(topic, 1, values[1]) == ErrorCode.NONE
            assert p.commit_offsets(group, topic, 0, i + 1) == ErrorCode.NONE
            epoch = p.epoch
            assert p.end(commit) == ErrorCode.NONE
            assert (p.producer_id, p.epoch) == (pid, epoch + 1)  # EndTxn v5's answer
            if commit:
                expected += values
        assert p.epoch == first_epoch + 6

        # Each marker carries the epoch the transaction's end bumped to.
        wait_until(lambda: len(markers(broker, topic, 0)) == 6, what="six markers")
        assert markers(broker, topic, 0) == [
            (pid, first_epoch + i + 1, i % 2 == 0) for i in range(6)
        ]
        assert read_committed(broker.bootstrap, topic, 2) == sorted(expected)

        # The group's offset is the last committed transaction's (i = 4).
        with client(broker) as c:
            fetch = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
            got = c.request(ApiKey.OFFSET_FETCH, 7, fetch)["topics"][0]["partitions"][0]
        assert got["committed_offset"] == 5

    # The client never added a partition itself: Produce v12, EndTxn v5, TxnOffsetCommit v5.
    assert versions(broker, "Produce").get("12", 0) >= 12
    assert versions(broker, "EndTxn") == {"5": 6}
    assert versions(broker, "TxnOffsetCommit") == {"5": 6}
    assert versions(broker, "AddPartitionsToTxn") == {}
    assert versions(broker, "AddOffsetsToTxn") == {}


def test_a_zombie_of_an_older_epoch_is_fenced_by_the_bump(broker):
    topic = "tv2-zombie"
    with TV2Producer(broker.bootstrap, "tv2-zombie-tx") as p:
        p.init()
        old = p.epoch
        assert p.produce(topic, 0, b"kept") == ErrorCode.NONE
        assert p.end(True) == ErrorCode.NONE
        # A request of the transaction before, still in flight (or a zombie that
        # missed the end), now meets the bumped epoch everywhere.
        assert p.produce(topic, 0, b"zombie", epoch=old) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert p.produce(topic, 1, b"zombie", epoch=old) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert p.produce(topic, 1, b"next") == ErrorCode.NONE
        assert p.end(True) == ErrorCode.NONE
    assert read_committed(broker.bootstrap, topic, 2) == [b"kept", b"next"]


def test_transaction_abortable_for_a_partition_not_added_from_produce_v11(broker):
    """A v1 (Produce v11) transactional write to a partition its transaction does not
    hold: TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before (KIP-890)."""
    topic = "tv2-abortable"
    with TV2Producer(broker.bootstrap, "tv2-abortable-tx") as p:
        p.init()
        assert p.produce(topic, 0, b"x", version=11) == ErrorCode.TRANSACTION_ABORTABLE
        assert p.produce(topic, 0, b"x", version=10) == ErrorCode.INVALID_TXN_STATE
        assert p.produce(topic, 0, b"x", version=12) == ErrorCode.NONE  # v12 adds it
        assert p.end(False) == ErrorCode.NONE
    assert read_committed(broker.bootstrap, topic, 2) == []


def test_librdkafka_keeps_transactions_v1_on_the_same_broker(broker):
    """librdkafka 2.16 does not speak transactions v2: it sends AddPartitionsToTxn and
    EndTxn v1 whatever the broker finalized, and its transactions work as before."""
    topic = "tv2-rdkafka"
    before = versions(broker, "EndTxn")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tv2-rdk"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=1)
    assert p.flush(30) == 0  # written, so the abort has a partition to end
    p.abort_transaction(30)
    assert read_committed(broker.bootstrap, topic, 2) == [b"committed"]
    after = versions(broker, "EndTxn")
    assert after.get("1", 0) - before.get("1", 0) == 2
    assert after.get("5") == before.get("5")
    assert versions(broker, "AddPartitionsToTxn")


def test_a_broker_pinned_to_transaction_version_1_reports_it(tmp_path):
    b = start(tmp_path, **{"transaction.version": 1})
    try:
        v4 = features(b)
        assert v4["finalized_features"] == [
            {"name": "group.version", "max_version_level": 1, "min_version_level": 1},
            {"name": "share.version", "max_version_level": 1, "min_version_level": 1},
            {"name": "transaction.version", "max_version_level": 1, "min_version_level": 1},
        ]
    finally:
        b.stop()


def test_verify_only_answers_transaction_abortable_from_v5(broker):
    """A partition leader's KIP-890 check for a partition not in the transaction: v5
    (this broker's leaders) gets Kafka's TRANSACTION_ABORTABLE, v4 (leaders of earlier
    code) INVALID_TXN_STATE."""
    with TV2Producer(broker.bootstrap, "tv2-verify-tx") as p:
        p.init()
        body = {
            "transactions": [
                {
                    "transactional_id": "tv2-verify-tx",
                    "producer_id": p.producer_id,
                    "producer_epoch": p.epoch,
                    "verify_only": True,
                    "topics": [{"name": "tv2-verify", "partitions": [0]}],
                }
            ]
        }
        coordinator = p.coordinator("tv2-verify-tx", 1)
        for version, code in (
            (5, ErrorCode.TRANSACTION_ABORTABLE),
            (4, ErrorCode.INVALID_TXN_STATE),
        ):
            resp = p.request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
            result = resp["results_by_transaction"][0]["topic_results"][0]
            assert result["results_by_partition"][0]["partition_error_code"] == code
