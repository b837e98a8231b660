"""Event headers as Kafka record headers, and templated topics and keys, against a
real broker, read back with confluent-kafka: at-least-once, exactly-once, and the
dead-letter topic (a record too large for the broker, a template naming a missing
field). The sink runs in the test's process on a memory channel."""

import asyncio
import random

import pytest

from agent.api import Event
from agent.channels.memory import MemoryChannel
from sinks.kafka import KafkaSink
from testkit.agent import read_topic
from testkit.procs import BrokerProcess
from tests.agent.helpers import context, metric

MAX_BYTES = 20_000  # the broker's message.max.bytes: a larger record is refused for good
DELIVERIES = ["at_least_once", "exactly_once"]


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("headers") / "broker", settings={"message.max.bytes": MAX_BYTES}
    ).start()
    yield b
    b.stop()


WEB1 = {"source": "logs", "path": "/var/log/nginx/access.log", "host": "web1"}


def nginx_events(n: int, headers=WEB1, start: int = 0) -> list[Event]:
    """Parsed events sharing one headers dict, as a tail source with add_host makes them."""
    return [
        Event(b"line %d" % i, headers, {"path": f"/p{i}", "status": 200 + i % 2})
        for i in range(start, start + n)
    ]


async def deliver(tmp_path, bk, events, want: dict[str, int], name="k", **options):
    """Run a kafka sink with `options` over `events` (one put each with
    `batch_events: 1`) until each topic of `want` holds that many records; return
    (the sink, {topic: records})."""
    options.setdefault("linger_ms", 2)
    config = KafkaSink.Config(bootstrap_servers=bk.bootstrap, **options)
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, f"{name}-mem"))
    channel.delivered_marks = asyncio.get_running_loop().create_future()
    sink = KafkaSink(config, context(tmp_path, name))
    for put in [[e] for e in events] if config.batch_events == 1 else [events]:
        await channel.put(put)
    task = asyncio.create_task(sink.run(channel))
    got = {}
    try:
        for topic, n in want.items():
            got[topic] = await asyncio.to_thread(
                read_topic, bk.bootstrap, topic, lambda m, n=n: len(m) >= n, 30
            )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for topic, n in want.items():
        assert len(got[topic]) == n, f"{topic}: {len(got[topic])} records, not {n}"
    return sink, got


@pytest.mark.parametrize("delivery", DELIVERIES)
async def test_the_host_header_is_sent_by_default_and_others_on_request(tmp_path, bk, delivery):
    topic = f"hdr-{delivery}"
    events = nginx_events(5) + [Event(b"no host", {"source": "udp"})]
    _, got = await deliver(tmp_path, bk, events, {topic: 6}, topic=topic, delivery=delivery)
    assert [m.headers() for m in got[topic]] == [[("host", b"web1")]] * 5 + [None]
    assert got[topic][0].value() == b'{"path":"/p0","status":200}'

    asked = f"{topic}-asked"
    _, got = await deliver(
        tmp_path, bk, nginx_events(2), {asked: 2}, name="k2", topic=asked,
        delivery=delivery, headers=["source", "path", "host"],
    )  # fmt: skip
    want = [("source", b"logs"), ("path", b"/var/log/nginx/access.log"), ("host", b"web1")]
    assert [m.headers() for m in got[asked]] == [want, want]


async def test_an_empty_list_sends_no_headers(tmp_path, bk):
    _, got = await deliver(
        tmp_path, bk, nginx_events(3), {"hdr-none": 3}, topic="hdr-none", headers=[]
    )
    assert [m.headers() for m in got["hdr-none"]] == [None] * 3


@pytest.mark.parametrize("delivery", DELIVERIES)
async def test_a_dead_lettered_record_keeps_its_headers(tmp_path, bk, delivery):
    """In a transaction, each record of the broker's refused batch fails with its
    error, not only the guilty one (at least once, `_isolate` sends each again
    alone): there a take of one record each."""
    topic = f"big-{delivery}"
    big = Event(random.Random(7).randbytes(25_000).hex().encode(), WEB1)  # lz4 cannot halve it
    events = nginx_events(2) + [big] + nginx_events(2, start=2)
    sink, got = await deliver(
        tmp_path, bk, events, {topic: 4, f"{topic}.dlq": 1}, topic=topic, delivery=delivery,
        format="raw", dead_letter_max_bytes=100,
        batch_events=1 if delivery == "exactly_once" else 10_000,
    )  # fmt: skip
    assert [m.value() for m in got[topic]] == [b"line %d" % i for i in range(4)]
    (dead,) = got[f"{topic}.dlq"]
    assert dead.headers() == [
        ("host", b"web1"),
        ("x-error", b"MSG_SIZE_TOO_LARGE"),
        ("x-topic", topic.encode()),
        ("x-size", b"50000"),
    ]
    assert dead.value() == big.body[:100]
    assert metric(sink, "logflume_agent_broker_dead_lettered_total") >= 1


@pytest.mark.parametrize("delivery", DELIVERIES)
async def test_templated_topic_and_key_and_a_missing_field_dead_lettered(tmp_path, bk, delivery):
    web2 = {**WEB1, "host": "web2"}
    nohost = {"source": "logs"}
    events = nginx_events(3) + nginx_events(2, web2, 3) + nginx_events(1, nohost, 5)
    t1, t2, dlq = f"{delivery}-web1", f"{delivery}-web2", f"{delivery}-dlq"
    sink, got = await deliver(
        tmp_path, bk, events, {t1: 3, t2: 2, dlq: 1}, topic=delivery + "-{host}",
        key="{status}", dead_letter_topic=dlq, delivery=delivery,
    )  # fmt: skip
    assert [(m.key(), m.value()) for m in got[t1]] == [
        (b"200", b'{"path":"/p0","status":200}'),
        (b"201", b'{"path":"/p1","status":201}'),
        (b"200", b'{"path":"/p2","status":200}'),
    ]
    assert [m.headers() for m in got[t2]] == [[("host", b"web2")]] * 2
    (dead,) = got[dlq]
    assert dead.key() == b"201" and dead.value() == b'{"path":"/p5","status":201}'
    assert dead.headers() == [
        ("x-error", b"MISSING_FIELD: host (topic " + delivery.encode() + b"-{host})"),
        ("x-topic", delivery.encode() + b"-{host}"),
        ("x-size", b"27"),
    ]
    assert metric(sink, "logflume_agent_broker_dead_lettered_total") == 1
    assert metric(sink, "logflume_agent_sink_events_failed_total") == 1
