"""Replication throttles (KIP-73) in a three-broker ZooKeeper cluster, with real broker
processes and `logflume reassign --throttle`: a partition of 2 MiB moved to a new
replica at 200 KiB/s (`make soak`: 64 MiB at 1 MiB/s) takes at least its bytes over
the rate (less one window), both sides count throttled bytes, and a partition with a
follower on the same brokers keeps it in its ISR meanwhile; `--verify` removes every
throttle config; a rate raised with `--additional --throttle` while a move crawls
applies at once."""

import os
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from common.ports import free_port
from testkit.scrape import scrape
from tests.cluster.test_reassignment_cluster import (
    _create,
    _format,
    _reassign,
    _settled,
    _sizes,
)
from tests.cluster.util import producer, wait_until

RATE = 200 * 1024
WINDOW_S = 1  # replication.quota.window.size.seconds
# A fetch brings at most this much of a partition (and a batch is never cut): the
# burst a throttle lets through before it measures it, kept small beside RATE.
SETTINGS = {"replica.fetch.max.bytes": 65536}
THROTTLES = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def _cluster(cluster_factory):
    ports = {i: free_port() for i in range(3)}
    cluster = cluster_factory(
        settings=SETTINGS, per_broker=lambda i: {"metrics.listen": f"127.0.0.1:{ports[i]}"}
    )
    cluster.metrics_ports = ports
    return cluster


def _fill(cluster, topic: str, nbytes: int) -> None:
    """`nbytes` of incompressible 1 KiB records, in small batches."""
    p = producer(cluster, acks="all", **{"batch.size": 16384, "linger.ms": 1})
    for _ in range(nbytes // 1024):
        p.produce(topic, os.urandom(1024))
        p.poll(0)
    assert p.flush(60) == 0


def _configs(cluster, broker: int, topic: str) -> dict[str, str | None]:
    """The throttle configs as broker `broker` and topic `topic` describe them."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    found = {}
    for resource in (ConfigResource("BROKER", str(broker)), ConfigResource("TOPIC", topic)):
        described = admin.describe_configs([resource])[resource].result(20)
        for name in THROTTLES:
            if name in described:
                found[name] = described[name].value
    return found


def _metric(cluster, broker: int, name: str, side: str) -> float | None:
    return scrape(cluster.metrics_ports[broker]).get(
        f"logflume_broker_replication_throttled_{name}", side=side
    )


@pytest.mark.parametrize(
    ("size_mib", "rate"),
    [(2, RATE), pytest.param(64, 1024 * 1024, marks=pytest.mark.soak)],
)
def test_a_throttled_move_keeps_to_the_rate_and_spares_the_other_partitions(
    cluster_factory, tmp_path, size_mib, rate
):
    """A lower bound only, which load cannot break: a fetch is let through only while
    the measured rate is within the throttle, so over every measurement span (10-11 s)
    at most the rate's bytes and one fetch (64 KiB and a batch) pass, which keeps a
    move of any length within one window of bytes / rate."""
    cluster = _cluster(cluster_factory)
    _create(cluster, "moving", [[0]])
    _create(cluster, "steady", [[0, 2]])
    wait_until(lambda: sorted(cluster.zk.state("steady")["isr"]) == [0, 2], what="steady's ISR")
    _fill(cluster, "moving", size_mib * 1024 * 1024)
    (size,) = _sizes(cluster, "moving", [0])
    plan = tmp_path / "plan.json"
    plan.write_text(_format({("moving", 0): [0, 2]}))

    stop = threading.Event()
    acked: list[int] = []
    errors: list[str] = []
    isr_seen: list[list[int]] = []

    def steady_traffic():
        p = producer(cluster, acks="all")
        while not stop.is_set():
            p.produce(
                "steady",
                os.urandom(512),
                on_delivery=lambda err, _m: errors.append(str(err)) if err else acked.append(1),
            )
            p.poll(0.02)
            isr_seen.append(cluster.zk.state("steady")["isr"])
        p.flush(30)

    writer = threading.Thread(target=steady_traffic)
    writer.start()
    try:
        started = time.monotonic()
        done = _reassign(
            cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(rate)
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-3:] == [
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed.",
            f"The inter-broker throttle limit was set to {rate} B/s",
            "Successfully started partition reassignment for moving-0",
        ]
        assert _configs(cluster, 2, "moving") == {
            "leader.replication.throttled.rate": str(rate),
            "follower.replication.throttled.rate": str(rate),
            "leader.replication.throttled.replicas": "0:0",
            "follower.replication.throttled.replicas": "0:2",
        }
        assert "leader.replication.throttled.rate" not in _configs(cluster, 1, "moving")
        wait_until(lambda: _settled(cluster, "moving", 0, [0, 2]), 600, what="the move")
        took = time.monotonic() - started
    finally:
        stop.set()
        writer.join(60)
    # the rate bounds the copy from below: whatever the load, never faster
    assert took >= size / rate - WINDOW_S, (took, size)
    assert _metric(cluster, 0, "bytes_total", "leader") > size // 2
    assert _metric(cluster, 2, "bytes_total", "follower") > size // 2
    assert _metric(cluster, 0, "rate_limit", "leader") == rate
    assert _metric(cluster, 1, "bytes_total", "leader") == 0
    # the unthrottled partition on the same two brokers kept its follower in sync
    assert errors == [] and len(acked) > 0
    assert isr_seen and all(sorted(isr) == [0, 2] for isr in isr_seen), isr_seen

    done = _reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
    assert done.stdout.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition moving-0 is completed.",
        "Clearing broker-level throttles on brokers 0,1,2",
        "Clearing topic-level throttles on topic moving",
    ]
    for broker in range(3):
        assert _configs(cluster, broker, "moving") == {
            "leader.replication.throttled.replicas": "",
            "follower.replication.throttled.replicas": "",
        }
    assert _metric(cluster, 0, "rate_limit", "leader") is None


def test_a_rate_raised_while_a_move_crawls_applies_at_once(cluster_factory, tmp_path):
    cluster = _cluster(cluster_factory)
    _create(cluster, "crawling", [[1]])
    _fill(cluster, "crawling", 2 * 1024 * 1024)
    plan = tmp_path / "plan.json"
    plan.write_text(_format({("crawling", 0): [1, 0]}))
    done = _reassign(
        cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1000"
    )
    assert done.returncode == 0, done.stderr
    wait_until(lambda: _sizes(cluster, "crawling", [0])[0] > 0, what="the first bytes copied")
    time.sleep(2)
    # at 1000 B/s (a burst every 11 s at most) 2 MiB take minutes: still moving
    assert not _settled(cluster, "crawling", 0, [1, 0])
    done = _reassign(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert done.returncode == 1
    assert "The --additional flag can also be used to change the throttle" in done.stderr

    faster = 100 * 1024 * 1024
    done = _reassign(
        cluster,
        "--execute",
        "--additional",
        "--reassignment-json-file",
        str(plan),
        "--throttle",
        str(faster),
    )
    assert done.returncode == 0, done.stderr
    assert f"The inter-broker throttle limit was set to {faster} B/s" in done.stdout
    for broker, side in ((1, "leader"), (0, "follower")):
        wait_until(
            lambda b=broker, s=side: _metric(cluster, b, "rate_limit", s) == faster,
            what=f"broker {broker} to apply the new rate",
        )
    wait_until(lambda: _settled(cluster, "crawling", 0, [1, 0]), 120, what="the move")
    wait_until(lambda: len(set(_sizes(cluster, "crawling", [0, 1]))) == 1, what="equal replicas")

    done = _reassign(
        cluster, "--cancel", "--preserve-throttles", "--reassignment-json-file", str(plan)
    )
    assert done.stdout == "None of the specified partition reassignments are active.\n"
    assert _configs(cluster, 0, "crawling")["follower.replication.throttled.rate"] == str(faster)
    done = _reassign(cluster, "--cancel", "--reassignment-json-file", str(plan))
    assert done.stdout.splitlines()[1:] == [
        "Clearing broker-level throttles on brokers 0,1,2",
        "Clearing topic-level throttles on topic crawling",
    ]
    assert "follower.replication.throttled.rate" not in _configs(cluster, 0, "crawling")
