"""Records and groups the console's tests read: a transaction of JSON records with
headers (the partition then ends with a commit marker), records with set
timestamps, committed offsets and a live group member; and a broker's count of the
requests it answered, per API (its /metrics), to count what the console sends."""

import json
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from console.model import samples
from testkit.procs import wait_until

T0 = 1_795_935_600_000  # 2026-11-29T07:00:00Z


def transactional_records(bootstrap: str, topic: str, count: int) -> None:
    """`count` JSON records with headers in one committed transaction: the
    partition's last offset is then the commit marker."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(count):
        value = json.dumps({"file": f"/var/log/nginx/access.log.{i}", "position": i * 100})
        producer.produce(
            topic, key=b"k%d" % i, value=value.encode(), partition=0, headers=[("host", b"web-a")]
        )
    producer.commit_transaction(30)


def timed_records(bootstrap: str, topic: str) -> None:
    """Ten records a second apart from T0: record i at T0 + i s."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"line %d" % i, partition=0, timestamp=T0 + 1000 * i)
    assert producer.flush(20) == 0


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def member(bootstrap: str, group: str, topic: str, client_id: str) -> Consumer:
    """A consumer that joined `group` and was given `topic`'s partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    wait_until(lambda: consumer.poll(0.2) is None and consumer.assignment(), 30, "an assignment")
    return consumer


def requests_by_api(metrics_port: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {
        labels["api"]: value
        for name, labels, value in samples(text)
        if name == "logflume_broker_requests_total"
    }
