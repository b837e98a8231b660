"""`logflume cluster up` in the background and `logflume cluster down`, as a user runs
them: records go through the printed bootstrap servers, and down stops everything."""

import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.util import wait_until


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_up_produce_consume_down(tmp_path):
    data = tmp_path / "cluster"
    log = open(tmp_path / "up.log", "w+")
    up = subprocess.Popen(
        [sys.executable, "-m", "logflume", "cluster", "up", "--brokers", "3"]
        + ["--data-dir", str(data), "--base-port", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = wait_until(
            lambda: next(
                (x for x in (tmp_path / "up.log").read_text().splitlines() if "bootstrap" in x),
                None,
            ),
            what="the bootstrap servers line",
        )
        bootstrap = line.split()[-1]
        pids = [int(p.read_text()) for p in data.glob("*.pid")]
        assert len(pids) == 5  # up itself, ZooKeeper, 3 brokers

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(20):
            producer.produce("cli", str(i).encode())
        assert producer.flush(30) == 0
        del producer  # destroyed while its brokers are up (librdkafka waits otherwise)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli"})
        consumer.assign([TopicPartition("cli", 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 20 and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(20, 1) if m.error() is None]
        consumer.close()
        assert values == [str(i).encode() for i in range(20)]

        down = subprocess.run(
            [sys.executable, "-m", "logflume", "cluster", "down", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert down.returncode == 0, down.stderr
        assert up.wait(30) == 0
        assert not [p for p in pids if _running(p)]
        assert not list(data.glob("*.pid"))
    finally:
        if up.poll() is None:
            up.terminate()
            up.wait(60)
        log.close()
