"""Real Kafka clients against a broker subprocess: kcat, confluent-kafka, kafka-python,
aiokafka; the first four tests on one broker and on a three-broker cluster
(conftest.py `target`), the codec tests on one broker."""

import asyncio
import subprocess

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey
from broker.protocol.records import Codec, iter_batches
from common.aio import within
from tests.broker.server.wire import WireClient, fetch_body


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(10)


def read_all(
    bootstrap: str, topic: str, partitions: int, expected: int
) -> list[tuple[int, bytes | None, bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "interop-unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    try:
        for _ in range(200):
            for msg in consumer.consume(num_messages=1000, timeout=0.1):
                assert msg.error() is None, msg.error()
                out.append((msg.partition(), msg.key(), msg.value()))
            if len(out) >= expected:
                break
    finally:
        consumer.close()
    return out


def test_kcat_lz4_produce_and_consume(target):
    bootstrap = target.bootstrap
    lines = "".join(f"line-{i}\n" for i in range(2000))
    subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", "kcat-t", "-z", "lz4"],
        input=lines.encode(),
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", "kcat-t", "-e", "-o", "beginning", "-q"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    assert out.splitlines() == [f"line-{i}" for i in range(2000)]
    meta = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-t", "kcat-t"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert 'topic "kcat-t" with 1 partitions' in meta.stdout


def test_confluent_kafka_acks_all_lz4_partitions(target):
    bootstrap = target.bootstrap
    create_topic(bootstrap, "ck-t", 4, target.replication)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 5}
    )
    failures = []
    for i in range(5000):
        producer.produce(
            "ck-t",
            b"value-%d" % i,
            key=b"k%d" % (i % 37),
            on_delivery=lambda e, m: e and failures.append(e),
        )
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures
    got = read_all(bootstrap, "ck-t", 4, 5000)
    assert sorted(v for _, _, v in got) == sorted(b"value-%d" % i for i in range(5000))
    assert len({p for p, _, _ in got}) == 4
    by_key = {}
    for p, k, _ in got:
        assert by_key.setdefault(k, p) == p  # keyed records stay on one partition


def test_kafka_python_producer_and_assigned_consumer(target):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    bootstrap = target.bootstrap
    create_topic(bootstrap, "kp-t", 2, target.replication)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=False, acks="all", compression_type="gzip"
    )
    for i in range(500):
        producer.send("kp-t", b"kp-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    consumer.assign([KTP("kp-t", 0), KTP("kp-t", 1)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    assert sorted(values) == sorted(b"kp-%d" % i for i in range(500))


def test_aiokafka_producer_and_assigned_consumer(target):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    bootstrap = target.bootstrap
    create_topic(bootstrap, "aio-t", 3, target.replication)

    async def main():
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", compression_type="gzip"
        )
        await producer.start()
        try:
            for i in range(300):
                await producer.send("aio-t", b"aio-%d" % i, partition=i % 3)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None
        )
        await consumer.start()
        try:
            parts = [ATP("aio-t", p) for p in range(3)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            values = []
            while len(values) < 300:
                batch = await within(consumer.getmany(timeout_ms=500), 10)
                values += [m.value for msgs in batch.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    values = asyncio.run(main())
    assert sorted(values) == sorted(b"aio-%d" % i for i in range(300))


def _stored_codecs(bootstrap: str, topic: str) -> set[int]:
    """The codec of every batch the broker holds for partition 0 of `topic`, as a raw
    Fetch returns them."""
    port = int(bootstrap.rpartition(":")[2])
    with WireClient(port) as client:
        answer = client.request(ApiKey.FETCH, 11, fetch_body(topic, 0))
    records = bytes(answer["responses"][0]["partitions"][0]["records"])
    return {b.codec for b in iter_batches(records)}


def test_snappy_and_zstd_from_every_client_are_read_by_every_client(module_broker):
    """kcat and confluent-kafka (librdkafka: raw snappy blocks) and kafka-python
    (xerial snappy, as Java writes it) produce; confluent-kafka and kafka-python read."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    bootstrap = module_broker.bootstrap
    for codec in ("snappy", "zstd"):
        topic = f"codec-{codec}"
        create_topic(bootstrap, topic, 1)
        lines = "".join(f"kcat-{i}\n" for i in range(300))
        subprocess.run(
            ["kcat", "-b", bootstrap, "-P", "-t", topic, "-z", codec],
            input=lines.encode(),
            check=True,
            timeout=60,
        )
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec})
        for i in range(300):
            producer.produce(topic, b"ck-%d" % i)
        assert producer.flush(30) == 0
        kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
        for i in range(300):
            kp.send(topic, b"kp-%d" % i, partition=0)
        kp.flush(30)
        kp.close()
        expected = sorted(
            b"%s-%d" % (who, i) for who in (b"kcat", b"ck", b"kp") for i in range(300)
        )
        assert sorted(v for _, _, v in read_all(bootstrap, topic, 1, 900)) == expected
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
        )
        consumer.assign([KTP(topic, 0)])
        consumer.seek_to_beginning()
        assert sorted(m.value for m in consumer) == expected
        consumer.close()
        # librdkafka sends a batch uncompressed when compressing does not make it smaller
        stored = _stored_codecs(bootstrap, topic)
        assert Codec[codec.upper()] in stored and stored <= {Codec.NONE, Codec[codec.upper()]}


def test_topic_compression_type_recompresses_on_the_broker(module_broker):
    """compression.type=zstd on the topic: an lz4 producer's batches are stored as
    zstd (as Kafka does), and consumers read them unchanged."""
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("recompressed", 1, 1, config={"compression.type": "zstd"})
    admin.create_topics([topic])["recompressed"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4"})
    for i in range(500):
        producer.produce("recompressed", b"line %d" % i, key=b"%d" % (i % 5))
    assert producer.flush(30) == 0
    got = read_all(bootstrap, "recompressed", 1, 500)
    assert [(k, v) for _, k, v in got] == [(b"%d" % (i % 5), b"line %d" % i) for i in range(500)]
    assert _stored_codecs(bootstrap, "recompressed") == {Codec.ZSTD}
