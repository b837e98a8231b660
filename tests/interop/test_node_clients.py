"""Node.js Kafka clients against the broker: kafkajs 2.2 (the most used one) and
@platformatic/kafka (which needs Kafka >= 3.5: flexible ApiVersions, Fetch with
topic ids). Each creates a topic, produces uncompressed and gzip records, consumes
them in a group and commits, adds a partition and describes the group (node
clients.mjs); a current Python client then reads the same records. On one broker
and on a three-broker cluster (conftest.py)."""

import json
import subprocess
from pathlib import Path

import pytest

from testkit.kafka import consume_all

NODE_DIR = Path(__file__).parent / "node"


@pytest.mark.parametrize("client", ["kafkajs", "platformatic"])
def test_node_client_produces_consumes_commits_and_administers(target, client):
    topic, group = f"node-{client}", f"node-group-{client}"
    run = subprocess.run(
        ["node", "clients.mjs", client, target.bootstrap, topic, group, str(target.replication)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    expected = sorted(f"{codec}-{i}" for codec in ("none", "gzip") for i in range(20))
    assert result["consumed"] == expected
    assert result["committed"] == 40
    assert result["partitions"] == 3
    assert result["groupState"].lower() == "empty"
    if client == "kafkajs":
        assert result["configEntries"] > 10
    values = sorted(m.value().decode() for m in consume_all(target.bootstrap, topic, 3))
    assert values == expected
