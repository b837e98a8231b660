"""Several brokers per machine: six brokers on three loopback "hosts" (127.0.0.2-4,
two brokers each, as two cores of three machines). Every partition's replicas are on
three distinct hosts, so losing a whole host (both of its brokers, SIGKILL) leaves
every partition a leader and an ISR of two: an idempotent acks=all producer with
min.insync.replicas=2 loses nothing and sees no error. `logflume reassign --generate`
keeps the same rule."""

import json
import subprocess
import sys

from confluent_kafka import KafkaError

from common.ports import free_port
from tests.cluster.util import consume_all, create_topic, producer, wait_until

TOPIC = "spread"
PARTITIONS = 12


def on_host(i: int) -> dict:
    """Broker i's listener: brokers 0 and 1 on 127.0.0.2, 2 and 3 on 127.0.0.3..."""
    return {"listeners": f"PLAINTEXT://127.0.0.{2 + i // 2}:{free_port()}"}


def generate(cluster, tmp_path, broker_list: str) -> tuple[list[list[int]], str]:
    """`logflume reassign --generate` for TOPIC: the proposed replica lists, stderr."""
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    done = subprocess.run(
        [sys.executable, "-m", "logflume", "reassign", "--bootstrap-server", cluster.bootstrap]
        + ["--command-config", "", "--generate", "--topics-to-move-json-file", str(topics)]
        + ["--broker-list", broker_list],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    proposed = json.loads(done.stdout.splitlines()[4])["partitions"]
    return [p["replicas"] for p in sorted(proposed, key=lambda p: p["partition"])], done.stderr


def test_losing_a_whole_host_loses_no_partition_and_no_write(cluster_factory, tmp_path):
    cluster = cluster_factory(count=6, per_broker=on_host)
    host = {i: b.host for i, b in cluster.brokers.items()}
    assert sorted(set(host.values())) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    create_topic(cluster, TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})

    assignment = [cluster.zk.assignment(TOPIC, p) for p in range(PARTITIONS)]
    for replicas in assignment:
        assert len({host[b] for b in replicas}) == 3, assignment
    leaders = sorted(replicas[0] for replicas in assignment)
    assert leaders == sorted(list(range(6)) * 2)  # two preferred leaderships each

    proposed, warned = generate(cluster, tmp_path, "0,1,2,3,4,5")
    assert all(len({host[b] for b in replicas}) == 3 for replicas in proposed)
    assert warned == ""
    proposed, warned = generate(cluster, tmp_path, "0,1,2,3")  # two hosts for RF 3
    assert all(len({host[b] for b in replicas}) == 2 for replicas in proposed)
    assert "some replicas of a partition share a host" in warned

    errors: list[KafkaError] = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    p = producer(cluster, acks="all", **{"enable.idempotence": True})
    for i in range(400):
        p.produce(TOPIC, b"%d" % i, key=b"%d" % i, on_delivery=delivered)
    assert p.flush(60) == 0
    for i in range(400, 800):  # in flight while the host goes
        p.produce(TOPIC, b"%d" % i, key=b"%d" % i, on_delivery=delivered)
    lost = [i for i, h in host.items() if h == "127.0.0.2"]
    for i in lost:
        cluster.brokers[i].kill()
    p.poll(0)

    def led_elsewhere() -> bool:
        states = [cluster.zk.state(TOPIC, part) for part in range(PARTITIONS)]
        return all(s["leader"] not in (-1, *lost) and len(s["isr"]) >= 2 for s in states)

    wait_until(led_elsewhere, timeout=120, what="a leader off the lost host for every partition")
    for i in range(800, 1200):
        p.produce(TOPIC, b"%d" % i, key=b"%d" % i, on_delivery=delivered)
    assert p.flush(120) == 0
    assert errors == []
    del p

    values = consume_all(cluster, TOPIC, 1200, timeout=120)
    assert sorted(int(v) for v in values) == list(range(1200))  # nothing lost or twice
