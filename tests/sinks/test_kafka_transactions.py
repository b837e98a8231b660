"""The kafka sink's exactly-once strategy on a fake transactional producer
(sinks/kafka/exactly_once.py talks to nothing but `TransactionalProducer`): what
one transaction holds, and what the next attempt does after an abort (against a
real broker: test_kafka_exactly_once.py)."""

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from sinks.kafka import KafkaSink
from sinks.kafka.exactly_once import ExactlyOnce
from tests.agent.helpers import context, events, metric


class FakeTransactions:
    """A TransactionalProducer: `produce` keeps each record with its callback;
    `commit_transaction` delivers the reports, `refuse(record)` giving the error of
    each record the broker refuses, and fails as librdkafka does when one was."""

    def __init__(self, refuse=lambda record: None):
        self.refuse = refuse
        self.open: list | None = None
        self.committed: list[list[tuple]] = []
        self.aborted: list[list[tuple]] = []

    def produce(
        self,
        topic,
        value,
        key=None,
        partition=-1,
        on_delivery=None,
        callback=None,
        timestamp=0,
        headers=None,
    ):  # librdkafka's positional order
        self.open.append(((topic, value, key, headers), on_delivery))

    async def init_transactions(self, seconds):
        pass

    def begin_transaction(self):
        assert self.open is None
        self.open = []

    async def commit_transaction(self, seconds):
        failed = False
        for record, on_delivery in self.open:
            err = self.refuse(record)
            on_delivery(err, SimpleNamespace(value=lambda v=record[1]: v))
            failed = failed or err is not None
        if failed:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True))
        self.committed.append([r for r, _ in self.open])
        self.open = None

    async def abort_transaction(self, seconds):
        self.aborted.append([r for r, _ in self.open or []])
        self.open = None


def strategy(tmp_path, producer):
    """An ExactlyOnce built as the sink builds it, and the sink it came from."""
    config = KafkaSink.Config(topic="lines", delivery="exactly_once", retry_backoff=0.001)
    sink = KafkaSink(config, context(tmp_path, "k"))
    parts = (sink.records, sink.dead_letters, sink.metrics, sink.context.log)
    return ExactlyOnce(config, producer, {}, "tid", *parts), sink


async def test_a_transaction_holds_the_records_and_the_positions(tmp_path):
    producer = FakeTransactions()
    txn, _ = strategy(tmp_path, producer)
    sent = events(3)
    await txn.deliver(sent, [(b"position-key", b"position")])
    (records,) = producer.committed
    assert [(t, v) for t, v, _, _ in records] == [("lines", e.body) for e in sent] + [
        ("logflume-positions", b"position")
    ]
    assert records[-1][2] == b"position-key"


async def test_a_refused_record_aborts_and_goes_to_the_dead_letter_topic_next_time(tmp_path):
    sent = events(3)
    guilty = sent[1].body

    def refuse(record):
        topic, value, _, _ = record
        return (
            KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
            if (topic, value) == ("lines", guilty)
            else None
        )

    producer = FakeTransactions(refuse)
    txn, sink = strategy(tmp_path, producer)
    await txn.deliver(sent, [])
    assert len(producer.aborted) == 1
    (records,) = producer.committed
    assert [(t, v) for t, v, _, _ in records] == [
        ("lines", sent[0].body),
        ("lines.dlq", guilty),
        ("lines", sent[2].body),
    ]
    assert dict(records[1][3])["x-error"] == b"MSG_SIZE_TOO_LARGE"
    assert metric(sink, "logflume_agent_broker_dead_lettered_total") == 1
    assert metric(sink, "logflume_agent_broker_retried_total") == 2


async def test_a_fatal_commit_error_raises(tmp_path):
    class Fenced(FakeTransactions):
        async def commit_transaction(self, seconds):
            raise KafkaException(KafkaError(KafkaError._FENCED, fatal=True))

    txn, _ = strategy(tmp_path, Fenced())
    with pytest.raises(KafkaException):
        await txn.deliver(events(1), [])
