"""Helpers for cluster tests: reading ZooKeeper state, waiting on conditions, clients."""

import time

import orjson
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from common import certs
from testkit.procs import wait_until  # noqa: F401  (the cluster tests import it from here)


class ZkView:
    """A kazoo client on a cluster's chroot, for assertions about znodes."""

    def __init__(self, connect: str):
        hosts, _, chroot = connect.partition("/")
        self.client = KazooClient(hosts=hosts)
        self.client.start(timeout=30)
        self.client.ensure_path("/" + chroot)
        self.client.chroot = "/" + chroot

    def state(self, topic: str, partition: int = 0) -> dict | None:
        data = self._get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return None if data is None else orjson.loads(data)

    def assignment(self, topic: str, partition: int = 0) -> list[int]:
        raw = orjson.loads(self.client.get(f"/brokers/topics/{topic}")[0])
        return raw["partitions"][str(partition)]

    def partition_count(self, topic: str) -> int:
        """How many partitions the topic's assignment has (0 before it is written)."""
        data = self._get(f"/brokers/topics/{topic}")
        return 0 if data is None else len(orjson.loads(data)["partitions"])

    def controller(self) -> int:
        data = self._get("/controller")
        return -1 if data is None else orjson.loads(data)["brokerid"]

    def _get(self, path: str) -> bytes | None:
        """The znode's data, None when there is none. One read: an exists() first
        would race with a broker deleting the znode (a controller dying)."""
        try:
            return self.client.get(path)[0]
        except NoNodeError:
            return None

    def live(self) -> list[int]:
        return sorted(int(c) for c in self.client.get_children("/brokers/ids"))

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def create_topic(cluster, name: str, partitions: int = 1, rf: int = 3, config=None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, rf, config=config or {})], operation_timeout=10
    )
    futures[name].result(20)
    for p in range(partitions):
        wait_until(
            lambda p=p: (
                (s := cluster.zk.state(name, p))
                and s["leader"] == cluster.zk.assignment(name, p)[0]
                and len(s["isr"]) == rf
            ),
            what=f"{name}-{p} to get its preferred leader and a full ISR",
        )


def producer(cluster, **conf) -> Producer:
    base = {
        "bootstrap.servers": cluster.bootstrap,
        "linger.ms": 5,
        "topic.metadata.refresh.interval.ms": 1000,
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 500,
    }
    return Producer({**base, **conf})


def consume_all(cluster, topic: str, expected_at_least: int, timeout: float = 60.0, group=None):
    """Every value of `topic` from the start (a fresh group), as a list of bytes."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group or f"reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.subscribe([topic])
    values = []
    deadline = time.monotonic() + timeout
    idle_since = None
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                if len(values) >= expected_at_least:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 2:
                        break
                continue
            idle_since = None
            values.append(msg.value())
    finally:
        c.close()
    return values


def mutual_tls_settings(d, ca) -> dict:
    """Broker settings for replication over mutual TLS on the SSL listener: every
    broker's certificate `broker` (CN=broker) issued by `ca`, written under `d` with
    the CA (`d`/ca.crt)."""
    broker = certs.issue(ca, "broker", hosts=["127.0.0.1"], server=True)
    return {
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.write_keystore(d, "broker", broker)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.write_ca(d, ca)),
        "ssl.client.auth": "required",
    }


def replicate_through_a_leader_kill(cluster, topic: str) -> None:
    """Produce 500 values with acks=all, kill the leader of `topic`-0, produce 500 more
    to its successor, restart the victim and wait for the full ISR (it catches up by
    replication), then check every value is there."""
    p = producer(cluster, acks="all")
    for i in range(500):
        p.produce(topic, b"%d" % i)
    assert p.flush(20) == 0
    victim = cluster.zk.state(topic)["leader"]
    cluster.brokers[victim].kill()
    wait_until(lambda: cluster.zk.state(topic)["leader"] not in (-1, victim), what="a new leader")
    for i in range(500, 1000):
        p.produce(topic, b"%d" % i)
    assert p.flush(30) == 0
    cluster.brokers[victim].start()
    wait_until(lambda: len(cluster.zk.state(topic)["isr"]) == 3, what="the ISR full again")
    values = consume_all(cluster, topic, 1000, timeout=30)
    assert sorted(int(v) for v in values) == list(range(1000))
