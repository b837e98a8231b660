"""The Spark data source's offset planning across a leader change: asking the
partitions' watermarks while a partition has no live leader waits for one (as Kafka's
consumers do) instead of failing the query. The fleet run's realtime job died here
with librdkafka's "Local: Unknown partition", which is what a one-partition watermark
query answers while the metadata names no live leader."""

import logging
import threading

import pytest

from spark_etl.source import client
from spark_etl.source.options import SourceOptions
from tests.cluster.util import create_topic, producer, wait_until


@pytest.fixture
def pooled_consumers_closed():
    """The source keeps its consumers pooled for the process's next query; this
    process is pytest's, so close them before the cluster goes."""
    yield
    client.close_pooled()


def test_watermarks_wait_for_a_leader_instead_of_failing(cluster_factory, pooled_consumers_closed):
    cluster = cluster_factory(count=2, settings={"min.insync.replicas": 1})
    topic = "leaderless"
    create_topic(cluster, topic, partitions=1, rf=1)
    p = producer(cluster)
    for i in range(50):
        p.produce(topic, str(i).encode())
    assert p.flush(30) == 0
    leader = cluster.zk.state(topic)["leader"]
    opts = SourceOptions.parse(
        {"kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic}, streaming=True
    )
    cluster.brokers[leader].kill()
    wait_until(
        lambda: cluster.zk.state(topic)["leader"] == -1, what="the partition to lose its leader"
    )
    answers: list = []
    asking = threading.Thread(
        target=lambda: answers.append(_try(lambda: client.watermarks(opts, [(topic, 0)])))
    )
    asking.start()
    asking.join(3)
    assert asking.is_alive(), f"answered while no broker leads the partition: {answers}"
    cluster.brokers[leader].start()
    asking.join(client.METADATA_TIMEOUT_S)
    assert answers == [{(topic, 0): (0, 50)}]


def _try(call):
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the test reports what the call raised
        return exc


def test_a_read_carries_on_from_the_new_leader(cluster_factory, pooled_consumers_closed, caplog):
    """read_range's Fetch requests follow the partition to its new leader when the
    leader is killed mid-read: every offset of the range once, in order."""
    from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA

    cluster = cluster_factory(count=2, settings={"min.insync.replicas": 1})
    topic = "moving"
    create_topic(cluster, topic, partitions=1, rf=2)
    p = producer(cluster, acks="all")
    value = b"m" * 1000
    for i in range(10_000):  # ~10 MB: several fetches
        while True:
            try:
                p.produce(topic, b"%d:" % i + value)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    opts = SourceOptions.parse(
        {"kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic}, streaming=False
    )
    reader = client.read_range(opts, (topic, 0), 0, 10_000, RECORDS_ARROW_SCHEMA)
    offsets = next(reader).column("offset").to_pylist()
    assert offsets[0] == 0 and offsets[-1] < 9_999
    leader = cluster.zk.state(topic)["leader"]
    cluster.brokers[leader].kill()
    wait_until(lambda: cluster.zk.state(topic)["leader"] not in (-1, leader), what="a new leader")
    with caplog.at_level(logging.INFO, "spark_etl.source"):
        for batch in reader:
            offsets += batch.column("offset").to_pylist()
    assert offsets == list(range(10_000))
    assert f"fetch of {topic}-0" in caplog.text  # it did lose the leader mid-read
