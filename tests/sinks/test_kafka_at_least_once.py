"""The kafka sink's at-least-once strategy without a broker, on a fake producer
(sinks/kafka/at_least_once.py talks to nothing but `RoundProducer`): what happens
to a take whose delivery fails, retries, and the dead-letter topic (delivery
against a real broker: test_kafka_sink.py)."""

import asyncio

import pytest

from agent.channels.memory import MemoryChannel
from sinks.kafka import KafkaSink
from sinks.kafka.at_least_once import AtLeastOnce
from tests.agent.helpers import context, events, metric


class FakeError:
    """The parts of confluent_kafka.KafkaError the strategy reads."""

    def __init__(self, name: str, fatal: bool = False):
        self._name, self._fatal = name, fatal

    def name(self) -> str:
        return self._name

    def fatal(self) -> bool:
        return self._fatal

    def __str__(self) -> str:
        return self._name


class FakeProducer:
    """A RoundProducer that records each round and answers with `fail(record)`:
    an error for the records the broker would refuse, None for the others."""

    def __init__(self, fail=lambda record: None):
        self.fail = fail
        self.rounds: list[list[tuple]] = []

    async def produce_round(self, topic, values, keys=None, headers=None, timestamps=0):
        n = len(values)
        topics = [topic] * n if isinstance(topic, str) else topic
        keys = [None] * n if keys is None else keys
        headers = [None] * n if headers is None else headers
        stamps = [timestamps] * n if isinstance(timestamps, int) else timestamps
        records = list(zip(topics, values, keys, headers, strict=True))
        self.rounds.append(records)
        failed = [(self.fail(r), *r, ts) for r, ts in zip(records, stamps, strict=True)]
        return [f for f in failed if f[0] is not None]


def strategy(tmp_path, producer, **options):
    """An AtLeastOnce built as the sink builds it, and the sink it came from."""
    config = KafkaSink.Config(topic="lines", retry_backoff=0.001, **options)
    sink = KafkaSink(config, context(tmp_path, "k"))
    parts = (sink.records, sink.dead_letters, sink.metrics, sink.context.log)
    return AtLeastOnce(config, producer, *parts), sink


async def test_a_failed_delivery_rolls_its_take_back_into_the_channel(tmp_path):
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))

    class Broken(FakeProducer):
        async def produce_round(self, topic, values, keys=None, headers=None, timestamps=0):
            raise RuntimeError("fatal producer error")

    loop, sink = strategy(tmp_path, Broken())
    sent = events(5)
    await channel.put(sent)
    with pytest.raises(RuntimeError, match="fatal producer error"):
        await loop.run(channel)
    assert metric(sink, "logflume_agent_sink_rollbacks_total") == 1
    again = await channel.take(10, 0.1)
    assert [e.body for e in again.events] == [e.body for e in sent]
    await again.commit()
    assert channel.pending() == 0


async def test_a_fatal_error_in_a_delivery_report_raises(tmp_path):
    producer = FakeProducer(lambda record: FakeError("_FENCED", fatal=True))
    loop, _ = strategy(tmp_path, producer)
    with pytest.raises(RuntimeError, match="fatal producer error: _FENCED"):
        await loop.deliver(events(2))


async def test_records_not_acknowledged_are_produced_again_until_they_are(tmp_path):
    failures = iter([FakeError("_MSG_TIMED_OUT")] * 2)
    producer = FakeProducer(lambda record: next(failures, None))
    loop, sink = strategy(tmp_path, producer)
    await loop.deliver(events(3))
    assert [len(r) for r in producer.rounds] == [3, 2]  # both refused records again
    assert metric(sink, "logflume_agent_broker_retried_total") == 2
    assert metric(sink, "logflume_agent_broker_dead_lettered_total") == 0


async def test_refused_records_are_isolated_then_dead_lettered_alone(tmp_path):
    """A too-large record fails its whole batch: each refused record is produced
    again on its own, and only the guilty one goes to the dead-letter topic."""
    sent = events(3)
    guilty = sent[1].body

    def refuse(record):
        topic, value, _, _ = record
        whole_batch = len(producer.rounds) == 1  # the first round: the batch is refused
        if topic == "lines" and (whole_batch or value == guilty):
            return FakeError("MSG_SIZE_TOO_LARGE")
        return None

    producer = FakeProducer(refuse)
    loop, sink = strategy(tmp_path, producer, dead_letter_max_bytes=4)
    await loop.deliver(sent)
    alone = [r for r in producer.rounds[1:] if r[0][0] == "lines"]
    assert sorted(r[0][1] for r in alone) == sorted(e.body for e in sent)
    (dead,) = [r for rnd in producer.rounds for r in rnd if r[0] == "lines.dlq"]
    topic, value, key, headers = dead
    assert value == guilty[:4]
    assert dict(headers) == {
        "x-error": b"MSG_SIZE_TOO_LARGE",
        "x-topic": b"lines",
        "x-size": str(len(guilty)).encode(),
    }
    assert metric(sink, "logflume_agent_broker_dead_lettered_total") == 1
    assert metric(sink, "logflume_agent_sink_events_failed_total") == 1


async def test_a_record_whose_key_cannot_be_made_goes_to_the_dead_letter_topic(tmp_path):
    producer = FakeProducer()
    loop, sink = strategy(tmp_path, producer, key="{user}")
    sent = events(2)
    sent[0].headers = {"user": "ann"}
    await loop.deliver(sent)
    first, second = producer.rounds
    assert [(t, k) for t, _, k, _ in first] == [("lines", b"ann")]
    ((topic, value, _, headers),) = second
    assert (topic, value) == ("lines.dlq", sent[1].body)
    assert dict(headers)["x-error"] == b"MISSING_FIELD: user (key {user})"


async def test_takes_commit_in_order_and_count_what_they_delivered(tmp_path):
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    producer = FakeProducer()
    loop, sink = strategy(tmp_path, producer, batch_events=2)
    await channel.put(events(5))
    task = asyncio.create_task(loop.run(channel))
    try:
        for _ in range(100):
            if channel.pending() == 0:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert channel.pending() == 0
    assert metric(sink, "logflume_agent_sink_events_out_total") == 5
    assert [len(r) for r in producer.rounds] == [2, 2, 1]


async def test_audit_records_the_broker_refuses_do_not_hold_the_data_back(tmp_path, caplog):
    """An agent whose user may not write the audit topic still delivers its lines;
    each failed publication is counted, one warning says what to do, and the totals
    go again with the next batch."""
    producer = FakeProducer(
        lambda r: FakeError("TOPIC_AUTHORIZATION_FAILED") if r[0] == "logflume-audit" else None
    )
    config = KafkaSink.Config(topic="lines", retry_backoff=0.001)
    sink = KafkaSink(config, context(tmp_path, "k"))
    parts = (sink.records, sink.dead_letters, sink.metrics, sink.context.log, sink.audit)
    loop = AtLeastOnce(config, producer, *parts)
    await loop.deliver(events(3))
    await loop.deliver(events(2, "f"))
    data = [r for rnd in producer.rounds for r in rnd if r[0] == "lines"]
    audit = [rnd for rnd in producer.rounds if rnd[0][0] == "logflume-audit"]
    assert len(data) == 5 and len(audit) == 2
    assert metric(sink, "logflume_agent_audit_publish_failures_total") == 2
    warnings = [r for r in caplog.records if "audit records to logflume-audit" in r.message]
    assert len(warnings) == 1 and "audit: false" in warnings[0].message
    assert sink.audit.dirty, "the totals wait for the next publication"
