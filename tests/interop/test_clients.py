"""Real Kafka clients against a broker subprocess: kcat, confluent-kafka, kafka-python, aiokafka."""

import asyncio
import subprocess

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


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


def test_kcat_lz4_produce_and_consume(module_broker):
    bootstrap = module_broker.bootstrap
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


def test_confluent_kafka_acks_all_lz4_partitions(module_broker):
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, "ck-t", 4)
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


def test_kafka_python_producer_and_assigned_consumer(module_broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, "kp-t", 2)
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


def test_aiokafka_producer_and_assigned_consumer(module_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, "aio-t", 3)

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
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 10)
                values += [m.value for msgs in batch.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    values = asyncio.run(main())
    assert sorted(values) == sorted(b"aio-%d" % i for i in range(300))
