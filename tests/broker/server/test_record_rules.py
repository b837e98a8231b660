"""A topic's record rules with a real producer: the broker names exactly the records
that break them (KIP-467 per-record errors from Produce v8). As in Kafka the batch is
refused whole: librdkafka fails the named records with the broker's error and the
others with _INVALID_DIFFERENT_RECORD, which the application can send again."""

import time

import pytest
from confluent_kafka import KafkaError, Producer

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.records import BatchBuilder
from testkit.kafka import consume_all, create_topic
from testkit.procs import BrokerProcess
from tests.broker.server.wire import WireClient, produce_body


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("rules") / "data").start()
    yield b
    b.stop()


def produce_reporting(
    bootstrap: str, topic: str, messages: list[dict], codec: str = "none"
) -> dict[int, object]:
    """Produce `messages` in one batch, then once more those failed only for sharing
    a batch with a bad record; {index: KafkaError or None} of the last attempt.

    One batch matters: librdkafka names records only in a batch with several record
    errors (with a single one it fails the whole batch with the partition's error).
    With a short linger the messages were cut into two batches on a loaded machine,
    when the producer's thread took the first ones before the rest was queued; the
    linger is now far longer than queueing them takes, and `flush` sends at once.
    The topic's leader is looked up before the first message, so that every message
    goes straight to the partition's queue: one produced before librdkafka knows the
    leader waits in the topic's unassigned queue and moves over when the answer
    comes, which can be after `flush` sent what was already there (two batches; seen
    once on a quiet machine)."""
    results: dict[int, object] = {}
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 10_000,
            "retries": 0,
            "compression.type": codec,
        }
    )

    p.list_topics(topic, timeout=10)

    def send(indexes):
        for i in indexes:
            report = lambda err, _msg, i=i: results.__setitem__(i, err)  # noqa: E731
            p.produce(topic, partition=0, on_delivery=report, **messages[i])
        assert p.flush(30) == 0

    send(range(len(messages)))
    innocent = [
        i
        for i, err in results.items()
        if err is not None and err.code() == KafkaError._INVALID_DIFFERENT_RECORD
    ]
    assert innocent, "the bad records should have failed their whole batch"
    send(innocent)
    return results


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyless_records_to_a_compacted_topic_fail_alone(broker, codec):
    """Whatever the codec: the broker reads every record of every batch."""
    topic = f"compacted-{codec}"
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    messages = [
        {"value": b"v%d" % i} if i % 3 == 0 else {"key": b"k%d" % i, "value": b"v%d" % i}
        for i in range(30)
    ]
    results = produce_reporting(broker.bootstrap, topic, messages, codec)
    failed = {i for i, err in results.items() if err is not None}
    assert failed == set(range(0, 30, 3))
    assert {results[i].code() for i in failed} == {KafkaError.INVALID_RECORD}
    stored = consume_all(broker.bootstrap, topic)
    assert sorted(m.value() for m in stored) == sorted(b"v%d" % i for i in range(30) if i % 3)


def test_timestamps_outside_the_topic_bounds_are_named_per_record(broker):
    """Produce v8 answers INVALID_TIMESTAMP with the index of each record out of
    bounds; librdkafka then fails exactly those records."""
    create_topic(broker.bootstrap, "bounded", 1, {"message.timestamp.before.max.ms": "3600000"})
    now_ms = int(time.time() * 1000)
    stamps = [now_ms - 86_400_000 if i in (2, 5) else now_ms for i in range(8)]
    builder = BatchBuilder()
    for i, ts in enumerate(stamps):
        builder.append(b"w%d" % i, timestamp_ms=ts)
    with WireClient(broker.port) as client:
        answer = client.request(ApiKey.PRODUCE, 8, produce_body("bounded", builder.build()))
    part = answer["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert [e["batch_index"] for e in part["record_errors"]] == [2, 5]
    assert "out of range" in part["record_errors"][0]["batch_index_error_message"]
    assert "2 record(s) rejected" in part["error_message"]

    messages = [{"value": b"t%d" % i, "timestamp": ts} for i, ts in enumerate(stamps)]
    results = produce_reporting(broker.bootstrap, "bounded", messages)
    assert {i for i, err in results.items() if err is not None} == {2, 5}
    stored = consume_all(broker.bootstrap, "bounded")
    assert sorted(m.value() for m in stored) == sorted(
        b"t%d" % i for i in range(8) if i not in (2, 5)
    )
