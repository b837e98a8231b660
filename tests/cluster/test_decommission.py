"""Decommissioning a broker as deploy/README.md tells it ("Removing a broker"), with
real processes: a fourth broker joins a three-broker cluster, broker 1's replicas are
moved off it with `logflume reassign --generate/--execute/--verify`, `logflume topics
--describe` shows no replica left on it, and SIGTERM stops it (a controlled shutdown).
An acks=all idempotent producer writing all along sees no error, and every record it
wrote is read back exactly once."""

import json
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, TopicPartition

from tests.cluster.util import create_topic, producer, wait_until

TOPIC = "decommissioned"
PARTITIONS = 4
LEAVING = 1


def _logflume(cluster, command: str, *args: str) -> str:
    """`logflume <command> --bootstrap-server ... <args>`: its stdout (status 0 asserted)."""
    done = subprocess.run(
        [sys.executable, "-m", "logflume", command, "--bootstrap-server", cluster.bootstrap]
        + ["--command-config", "", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (command, args, done.stdout, done.stderr)
    return done.stdout


def _described(cluster) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """(topic, partition) -> (replicas, ISR), from `logflume topics --describe`."""
    described = json.loads(_logflume(cluster, "topics", "--describe", "--output", "json"))
    return {
        (t["topic"], p["partition"]): (p["replicas"], p["isr"])
        for t in described
        for p in t["partitions"]
    }


def _read_everything(cluster) -> list[bytes]:
    """Every record of the topic's partitions, up to their high watermarks."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "decommission-check",
            "enable.auto.commit": False,
        }
    )
    try:
        highs = {
            p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30, cached=False)[1]
            for p in range(PARTITIONS)
        }
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 120
        while len(got) < sum(highs.values()) and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is None:
                    got[(m.partition(), m.offset())] = m.value()
        assert len(got) == sum(highs.values()), f"read {len(got)} of {highs}"
        return list(got.values())
    finally:
        c.close()


def test_a_broker_is_decommissioned_under_an_acks_all_producer(cluster_factory, tmp_path):
    cluster = cluster_factory()
    create_topic(cluster, TOPIC, PARTITIONS, rf=2)
    acked: list[bytes] = []
    errors: list[str] = []
    unflushed: list[int] = []
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value())

    def produce_loop():
        p = producer(cluster, acks="all", **{"enable.idempotence": True})
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, b"%d" % i, key=b"%d" % i, on_delivery=on_delivery)
            i += 1
            p.poll(0.002)
        unflushed.append(p.flush(60))

    writer = threading.Thread(target=produce_loop)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 300, what="records acknowledged")
        cluster.add_broker()
        wait_until(lambda: cluster.zk.live() == [0, 1, 2, 3], what="broker 3 to register")
        cluster.wait_joined()

        # 1. a plan that moves every replica off broker 1: all topics, the others listed
        topics = tmp_path / "topics.json"
        names = json.loads(_logflume(cluster, "topics", "--list", "--output", "json"))
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in names]}))
        before = _described(cluster)
        assert any(LEAVING in replicas for replicas, _ in before.values())
        out = _logflume(
            cluster,
            "reassign",
            "--generate",
            "--topics-to-move-json-file",
            str(topics),
            "--broker-list",
            "0,2,3",
        )
        proposal = out.split("Proposed partition reassignment configuration\n")[1]
        plan = tmp_path / "plan.json"
        plan.write_text(proposal)
        proposed = {(e["topic"], e["partition"]): e["replicas"] for e in json.loads(proposal)["partitions"]}  # fmt: skip
        assert set(proposed) == set(before)
        for key, replicas in proposed.items():
            assert LEAVING not in replicas
            assert len(replicas) == len(before[key][0])  # the replication factor is kept

        # 2. execute it, 3. verify until every move completed
        out = _logflume(cluster, "reassign", "--execute", "--reassignment-json-file", str(plan))
        assert "Successfully started partition reassignment" in out

        def verified() -> bool:
            out = _logflume(cluster, "reassign", "--verify", "--reassignment-json-file", str(plan))
            moves = [ln for ln in out.splitlines() if ln.startswith("Reassignment of partition")]
            return bool(moves) and all(ln.endswith("is completed.") for ln in moves)

        wait_until(verified, 120, what="--verify to report every move completed", every=0.5)

        # 4. nothing left on broker 1, as `logflume topics --describe` shows it
        after = _described(cluster)
        assert {k: r for k, (r, _) in after.items()} == proposed
        assert not [k for k, (r, isr) in after.items() if LEAVING in r or LEAVING in isr]
        wait_until(
            lambda: not list(cluster.brokers[LEAVING].data_dir.glob(f"{TOPIC}-*")),
            what="broker 1 to delete its replicas",
        )

        # 5. stop it: SIGTERM, a controlled shutdown; its registration goes with it
        moved_at = len(acked)
        assert cluster.brokers[LEAVING].stop(60) == 0
        wait_until(lambda: cluster.zk.live() == [0, 2, 3], what="broker 1 to be unregistered")
        wait_until(lambda: len(acked) >= moved_at + 300, what="records acknowledged after it")
    finally:
        stop.set()
        writer.join(90)
    assert (errors, unflushed) == ([], [0])
    assert not [k for k, (r, isr) in _described(cluster).items() if LEAVING in r or LEAVING in isr]
    read = _read_everything(cluster)
    assert len(read) == len(acked) == len(set(read))  # every record once: none lost, none twice
    assert set(read) == set(acked)
