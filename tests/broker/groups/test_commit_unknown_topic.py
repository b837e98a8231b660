"""OffsetCommit for a topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION
for that partition and stores nothing, as Kafka's broker does; the other partitions
of the same request are committed."""

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import UnknownTopicOrPartitionError
from kafka.structs import OffsetAndMetadata

from testkit.kafka import create_topic
from testkit.procs import BrokerProcess, wait_until


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("commit") / "data",
        settings={"group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"},
    ).start()
    create_topic(b.bootstrap, "real", 1)
    yield b
    b.stop()


def test_confluent_kafka_commit_to_a_missing_topic_fails_for_that_partition_only(broker):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-unknown"})
    try:
        with pytest.raises(KafkaException) as failed:
            c.commit(
                offsets=[TopicPartition("no-such-topic", 0, 5), TopicPartition("real", 0, 3)],
                asynchronous=False,
            )
        assert failed.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        stored = c.committed(
            [TopicPartition("real", 0), TopicPartition("no-such-topic", 0)], timeout=10
        )
        assert [tp.offset for tp in stored] == [3, -1001]  # -1001: no committed offset
    finally:
        c.close()


def test_kafka_python_commit_to_a_missing_topic_is_refused(broker):
    """kafka-python retries this error in a synchronous commit until its timeout, so
    the answer is read from an asynchronous commit's callback."""
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="kp-unknown", enable_auto_commit=False
    )
    try:
        c.assign([KpTopicPartition("real", 0)])
        missing = KpTopicPartition("no-such-topic", 0)
        answers = []
        c.commit_async(
            {missing: OffsetAndMetadata(5, "", -1)},
            callback=lambda offsets, answer: answers.append(answer),
        )
        wait_until(lambda: c.poll(timeout_ms=100) is not None and answers, 30, "the commit")
        assert isinstance(answers[0], UnknownTopicOrPartitionError)
        assert c.committed(missing) is None
    finally:
        c.close()
