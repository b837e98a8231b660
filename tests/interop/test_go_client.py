"""A Go client against the broker: kafka-go as Debian packages it (0.2.1, which
writes and reads the legacy message format, magic 1). It creates a topic, writes
uncompressed and gzip records, reads them in a group and commits each
(go/kafkago.go); the commits and the records are then checked with a current
client. Then, as kafka-go's test "delete topics with an invalid topic", it deletes a
topic and at once reads its partitions with Metadata v1, which auto-creates it:
Kafka answers that request LEADER_NOT_AVAILABLE with no partitions, and the topic
is there for the next one. On one broker and on a three-broker cluster
(conftest.py)."""

import json
import os
import subprocess
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from testkit.kafka import consume_all
from testkit.procs import wait_until

GO_DIR = Path(__file__).parent / "go"


def test_kafka_go_produces_consumes_and_commits(target, tmp_path):
    env = os.environ | {
        "GOPATH": "/usr/share/gocode",  # Debian's Go packages, no module download
        "GO111MODULE": "off",
        "GOCACHE": str(tmp_path / "gocache"),
    }
    binary = tmp_path / "kafkago"
    build = subprocess.run(
        ["go", "build", "-o", str(binary), "kafkago.go"],
        cwd=GO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run(
        [str(binary), target.bootstrap, "go-topic", "go-group", str(target.replication)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    expected = sorted(f"{codec}-{i}" for codec in ("none", "gzip") for i in range(20))
    seen = json.loads(run.stdout)
    assert seen["consumed"] == expected
    assert seen["delete_error"] == "UnknownTopicOrPartition"
    assert seen["partitions_after"] == 0

    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("go-group")])
    committed = offsets["go-group"].result(30).topic_partitions
    assert sum(tp.offset for tp in committed) == 40
    values = sorted(m.value().decode() for m in consume_all(target.bootstrap, "go-topic", 2))
    assert values == expected
    wait_until(
        lambda: "go-topic-deleted" in admin.list_topics(timeout=30).topics,
        what="go-topic-deleted created again by the Metadata request",
    )
