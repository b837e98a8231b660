"""Round trips through the broker's secured listeners with each client the interop
tests cover (confluent-kafka, kafka-python, aiokafka, kcat), shared by the TLS and
SASL tests: each test builds its client's security settings, these helpers produce
`n` numbered values with acks=all and read them back.
"""

import asyncio
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

from common.aio import within
from testkit.procs import wait_until


def end_offset(plain_port: int, topic: str) -> int:
    """The log end offset of `topic`-0, asked over the PLAINTEXT listener."""
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{plain_port}", "group.id": "offsets"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def confluent_round_trip(conf: dict, topic: str, n: int, what: str, list_brokers: bool = False):
    """Produce b"v-<i>" for i < n with librdkafka settings `conf`, consume them in a
    group -> (the values read, the brokers the consumer's metadata names when
    `list_brokers`, else None)."""
    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, b"v-%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values, brokers = [], None
    try:
        wait_until(
            lambda: (
                values.extend(m.value() for m in consumer.consume(500, 0.2) if not m.error())
                or len(values) >= n
            ),
            timeout=20,
            what=what,
        )
        if list_brokers:
            brokers = consumer.list_topics(timeout=5).brokers
    finally:
        consumer.close()
    return values, brokers


def kafka_python_round_trip(conf: dict, topic: str, n: int) -> list[bytes]:
    """Produce b"kp-<i>" for i < n with kafka-python settings `conf`, then read
    partition 0 from the beginning (no group)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    producer = KafkaProducer(**conf, acks="all")
    for i in range(n):
        producer.send(topic, b"kp-%d" % i)
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=3000)
    consumer.assign([KTP(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    return values


def aiokafka_round_trip(conf: dict, topic: str, n: int) -> list[bytes]:
    """Produce b"aio-<i>" for i < n with aiokafka settings `conf`, then read
    partition 0 from the beginning (no group)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    async def main():
        producer = AIOKafkaProducer(**conf, acks="all")
        await producer.start()
        try:
            for i in range(n):
                await producer.send(topic, b"aio-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, enable_auto_commit=False, group_id=None)
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0)])
            await consumer.seek_to_beginning(ATP(topic, 0))
            values = []
            while len(values) < n:
                got = await within(consumer.getmany(timeout_ms=500), 10)
                values += [m.value for msgs in got.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    return asyncio.run(main())


def kcat_round_trip(conf: dict, topic: str, n: int) -> list[str]:
    """Produce lines "line-<i>" for i < n with kcat given librdkafka settings `conf`
    (as -X), then consume the topic from the beginning -> the lines read."""
    conf = dict(conf)
    args = ["-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    lines = "".join(f"line-{i}\n" for i in range(n))
    subprocess.run(["kcat", *args, "-P", "-t", topic], input=lines.encode(), check=True, timeout=30)
    out = subprocess.run(
        ["kcat", *args, "-C", "-t", topic, "-e", "-o", "beginning", "-q"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    return out.splitlines()
