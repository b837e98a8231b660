"""`SinkProducer.produce_round` against a real broker, read back with confluent-kafka:
each shape of a round (one topic and timestamp; the lines' own timestamps; record
headers; a topic and key per record) delivers each record with its value, timestamp,
key and headers, in order; a full queue, and a record librdkafka refuses itself,
lose nothing else."""

import asyncio

import pytest

from sinks.kafka.producer import SinkProducer
from testkit.agent import read_topic
from testkit.procs import BrokerProcess

T0 = 1_728_518_400_000  # epoch ms: 2024-10-10T00:00Z


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("producer") / "broker").start()
    yield b
    b.stop()


async def produce_and_read(bk, topics: list[str], **round_args) -> dict[str, list]:
    """One round through a fresh producer; the records of each of `topics`."""
    producer = SinkProducer(
        {"bootstrap.servers": bk.bootstrap, "linger.ms": 2, "enable.idempotence": True}
    )
    try:
        failed = await producer.produce_round(**round_args)
    finally:
        await producer.close()
    assert failed == []
    n = len(round_args["values"])
    got = {}
    for topic in topics:
        want = n if isinstance(round_args["topic"], str) else round_args["topic"].count(topic)
        got[topic] = await asyncio.to_thread(
            read_topic, bk.bootstrap, topic, lambda m, want=want: len(m) >= want, 30
        )
    return got


def values(n: int) -> list[bytes]:
    return [b"line %d" % i for i in range(n)]


async def test_one_topic_and_one_timestamp(bk):
    got = await produce_and_read(bk, ["p-lean"], topic="p-lean", values=values(50), timestamps=T0)
    msgs = got["p-lean"]
    assert [m.value() for m in msgs] == values(50)
    assert {m.timestamp()[1] for m in msgs} == {T0}
    assert {m.key() for m in msgs} == {None}
    assert {m.headers() for m in msgs} == {None}


async def test_one_topic_with_a_timestamp_per_record(bk):
    stamps = [T0 + 7_000 * i for i in range(50)]  # across minutes, as parsed lines are
    got = await produce_and_read(
        bk, ["p-stamped"], topic="p-stamped", values=values(50), timestamps=stamps
    )
    msgs = got["p-stamped"]
    assert [m.value() for m in msgs] == values(50)
    assert [m.timestamp()[1] for m in msgs] == stamps
    assert {m.headers() for m in msgs} == {None}


async def test_one_topic_with_headers_and_a_timestamp_per_record(bk):
    stamps = [T0 + i for i in range(50)]
    web1, web2 = [("host", b"web1")], [("host", b"web2"), ("source", b"logs")]
    headers = [web1 if i < 30 else web2 for i in range(50)]
    got = await produce_and_read(
        bk,
        ["p-headers"],
        topic="p-headers",
        values=values(50),
        headers=headers,
        timestamps=stamps,
    )
    msgs = got["p-headers"]
    assert [m.value() for m in msgs] == values(50)
    assert [m.timestamp()[1] for m in msgs] == stamps
    assert [m.headers() for m in msgs] == headers


async def test_a_topic_and_a_key_per_record(bk):
    topics = ["p-even" if i % 2 == 0 else "p-odd" for i in range(40)]
    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(40)]
    got = await produce_and_read(
        bk, ["p-even", "p-odd"], topic=topics, values=values(40), keys=keys, timestamps=T0
    )
    for topic, parity in (("p-even", 0), ("p-odd", 1)):
        msgs = got[topic]
        picked = [i for i in range(40) if i % 2 == parity]
        assert [m.value() for m in msgs] == [values(40)[i] for i in picked]
        assert [m.key() for m in msgs] == [keys[i] for i in picked]
        assert {m.timestamp()[1] for m in msgs} == {T0}


async def test_a_full_queue_and_a_refused_record_leave_the_rest_delivered_in_order(bk):
    """A queue of 5 messages fills many times in a round of 60: each time production
    resumes at the record refused. A record over `message.max.bytes` is refused by
    librdkafka itself: returned as the round's one failure, the others delivered."""
    settings = {
        "bootstrap.servers": bk.bootstrap,
        "linger.ms": 2,
        "enable.idempotence": True,
        "queue.buffering.max.messages": 5,
        "message.max.bytes": 10_000,
    }
    sent, big = values(60), b"x" * 20_000
    sent[30] = big
    producer = SinkProducer(settings)
    try:
        failed = await producer.produce_round("p-full", sent, timestamps=T0)
    finally:
        await producer.close()
    assert [(err.name(), topic, value) for err, topic, value, *_ in failed] == [
        ("MSG_SIZE_TOO_LARGE", "p-full", big)
    ]
    want = [v for v in sent if v is not big]
    got = await asyncio.to_thread(read_topic, bk.bootstrap, "p-full", lambda m: len(m) >= 59, 30)
    assert [m.value() for m in got] == want
