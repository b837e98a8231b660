"""Idempotent producers of real client libraries against a broker subprocess.

- confluent-kafka with `enable.idempotence=true` behind tests/proxy.py: the proxy
  swallows responses and then resets the connection several times while batches
  are in flight, so the broker has appended batches whose acknowledgements the
  producer never got; the producer retries them and the broker must answer with
  the original offsets instead of appending them again. Consuming afterwards shows
  every sequence number exactly once, in order.
- kafka-python with its defaults plus `enable_idempotence=True` produces, and a
  kafka-python group consumer with auto commit reads every value exactly once.
"""

import json
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from broker.protocol import ApiKey
from testkit.procs import BrokerProcess
from tests.broker.groups.test_clients import create_topic
from tests.proxy import TcpProxy

N = 20_000
PARTITIONS = 2
CUTS = 8


@pytest.fixture
def proxied_broker(tmp_path):
    """A broker that advertises the address of a TcpProxy in front of it."""
    broker = BrokerProcess(tmp_path / "data", settings={"group.initial.rebalance.delay.ms": 0})
    with TcpProxy(broker.port) as proxy:
        broker.args = ["--advertised", proxy.address]
        broker.start()
        try:
            yield broker, proxy
        finally:
            broker.stop()


def wait_until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def consume_partition(bootstrap: str, topic: str, partition: int, count: int):
    """Read `count` records from the start -> ([(offset, value)], (low, high) watermarks)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    out = []
    try:
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.value()))
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
    finally:
        consumer.close()
    return out, (low, high)


def test_confluent_idempotent_producer_survives_cut_connections(proxied_broker):
    _, proxy = proxied_broker
    bootstrap = proxy.address
    topic = "idem-cut"
    create_topic(bootstrap, topic, PARTITIONS)
    stats = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "batch.num.messages": 50,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 100,
            "statistics.interval.ms": 100,
            "stats_cb": lambda s: stats.append(json.loads(s)),
        }
    )
    delivered = []
    failed = []

    def on_delivery(err, msg):
        if err is None:
            delivered.append((msg.partition(), msg.value()))
        else:
            failed.append(err)

    chunk = N // CUTS
    for c in range(CUTS):
        seen = proxy.stats().requests[ApiKey.PRODUCE]
        for i in range(c * chunk, (c + 1) * chunk):
            producer.produce(
                topic, b"seq-%d" % i, partition=i % PARTITIONS, on_delivery=on_delivery
            )
        producer.poll(0)
        # cut while this chunk is on the wire: a Produce request has gone out, more follow
        wait_until(
            lambda seen=seen: proxy.stats().requests[ApiKey.PRODUCE] > seen, "a Produce request"
        )
        assert proxy.cut(swallow_s=0.05) >= 1
    assert producer.flush(60) == 0

    def settled() -> bool:  # a statistics report taken after the last delivery
        producer.poll(0.05)
        parts = stats[-1]["topics"][topic]["partitions"] if stats else {}
        return (
            all(
                str(p) in parts and parts[str(p)]["msgs_inflight"] == parts[str(p)]["msgq_cnt"] == 0
                for p in range(PARTITIONS)
            )
            and sum(parts[str(p)]["txmsgs"] for p in range(PARTITIONS)) >= N
        )

    wait_until(settled, "librdkafka statistics after the last delivery")
    assert failed == []
    assert len(delivered) == N

    counters = proxy.stats()
    parts = stats[-1]["topics"][topic]["partitions"]
    resent = sum(parts[str(p)]["txmsgs"] for p in range(PARTITIONS)) - N
    print(
        f"cuts={counters.cuts} connections_cut={counters.connections_cut} "
        f"produce_requests={counters.requests[ApiKey.PRODUCE]} "
        f"lost_produce_responses={counters.lost_responses[ApiKey.PRODUCE]} "
        f"unanswered_produce={counters.unanswered[ApiKey.PRODUCE]} records_resent={resent}"
    )
    assert counters.cuts == CUTS
    # The broker appended batches whose acknowledgements were lost, and the producer
    # sent records again (librdkafka counts every transmission of a record in
    # txmsgs): without de-duplication some would be in the log twice.
    assert counters.lost_responses[ApiKey.PRODUCE] >= 1
    assert resent >= 1

    for p in range(PARTITIONS):
        records, watermarks = consume_partition(bootstrap, topic, p, N // PARTITIONS)
        expected = [b"seq-%d" % i for i in range(p, N, PARTITIONS)]
        assert [v for _, v in records] == expected
        assert [o for o, _ in records] == list(range(len(expected)))
        assert watermarks == (0, len(expected))


def test_kafka_python_idempotent_produce_and_group_consume(broker_factory):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    broker = broker_factory(settings={"group.initial.rebalance.delay.ms": 0})
    bootstrap = broker.bootstrap
    topic = "kp-idem"
    n, partitions = 600, 3
    create_topic(bootstrap, topic, partitions)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    futures = [producer.send(topic, b"kp-%d" % i, partition=i % partitions) for i in range(n)]
    producer.flush(30)
    assert sorted(f.get(timeout=30).offset for f in futures) == sorted(
        o for _ in range(partitions) for o in range(n // partitions)
    )
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id="kp-idem-grp",
        auto_offset_reset="earliest",  # the default, latest, would skip what is already there
    )
    # learn the topic's partitions before joining (see consumer_proc.py)
    assert consumer.partitions_for_topic(topic) == set(range(partitions))
    consumer.subscribe([topic])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < n and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=200).items():
            got[tp.partition] += [m.value for m in msgs]
    consumer.close()  # auto commit commits the positions on close
    for p in range(partitions):
        assert got[p] == [b"kp-%d" % i for i in range(p, n, partitions)]

    check = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-idem-grp")
    try:
        committed = {p: check.committed(KTP(topic, p)) for p in range(partitions)}
    finally:
        check.close()
    assert committed == {p: n // partitions for p in range(partitions)}
