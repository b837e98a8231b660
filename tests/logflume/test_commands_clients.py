"""`logflume broker/topics/produce/consume` end to end, as a user runs them."""

import json
import subprocess
import sys

from common.ports import free_port

LF = [sys.executable, "-m", "logflume"]


def lf(*args, input=None, timeout=60):
    return subprocess.run([*LF, *args], input=input, capture_output=True, timeout=timeout)


def test_topics_produce_consume_roundtrip(module_broker):
    b = ["--bootstrap-server", module_broker.bootstrap]
    r = lf(
        "topics",
        *b,
        "--create",
        "--topic",
        "cli-t",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
    )
    assert r.returncode == 0, r.stderr
    assert b"Created topic cli-t." in r.stdout
    r = lf("topics", *b, "--create", "--topic", "cli-t", "--partitions", "2")
    assert r.returncode == 1 and b"already exists" in r.stderr
    assert b"cli-t" in lf("topics", *b, "--list").stdout.split()
    desc = lf("topics", *b, "--describe", "--topic", "cli-t").stdout.decode()
    assert (
        "Topic: cli-t\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=3600000"
        in desc
    )
    assert "\tTopic: cli-t\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0" in desc
    as_json = lf("topics", *b, "--describe", "--topic", "cli-t", "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [
        {"topic": "cli-t", "partition_count": 2, "replication_factor": 1,
         "configs": {"retention.ms": "3600000"},
         "partitions": [{"partition": p, "leader": 0, "replicas": [0], "isr": [0]}
                        for p in (0, 1)]}
    ]  # fmt: skip
    assert "cli-t" in json.loads(lf("topics", *b, "--list", "--output", "json").stdout)

    lines = b"".join(b"k%d:value %d\n" % (i % 5, i) for i in range(300))
    r = lf(
        "produce",
        *b,
        "--topic",
        "cli-t",
        "--acks",
        "all",
        "--compression",
        "lz4",
        "--key-separator",
        ":",
        input=lines,
    )
    assert r.returncode == 0, r.stderr
    r = lf("consume", *b, "--topic", "cli-t", "--from-beginning", "--max-messages", "300")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(b"value %d" % i for i in range(300))
    r = lf(
        "consume",
        *b,
        "--topic",
        "cli-t",
        "--partition",
        "0",
        "--offset",
        "0",
        "--timeout-ms",
        "1500",
        "--print-key",
    )
    assert r.returncode == 0
    keys = {line.split(b"\t")[0] for line in r.stdout.splitlines()}
    assert keys and keys < {b"k%d" % i for i in range(5)}

    r = lf("topics", *b, "--delete", "--topic", "cli-t")
    assert r.returncode == 0, r.stderr
    assert b"cli-t" not in lf("topics", *b, "--list").stdout.split()


def test_clients_fail_fast_when_broker_unreachable():
    b = ["--bootstrap-server", f"127.0.0.1:{free_port()}"]
    for args, stdin in (
        (("topics", *b, "--list", "--timeout-ms", "1500"), None),
        (("produce", *b, "--topic", "x", "--timeout-ms", "1500"), b"a\n"),
        (("consume", *b, "--topic", "x", "--timeout-ms", "1500"), None),
    ):
        r = lf(*args, input=stdin, timeout=30)
        assert r.returncode == 1
        assert b"127.0.0.1" in r.stderr


def test_broker_rejects_bad_config(tmp_path):
    r = lf("broker", "--data-dir", str(tmp_path), "--set", "num.partitons=3", timeout=30)
    assert r.returncode == 2
    assert b"num.partitons: unknown broker config key (did you mean num.partitions?)" in r.stderr
    conf = tmp_path / "server.properties"
    conf.write_text("message.max.bytes=lots\n")
    r = lf("broker", "--data-dir", str(tmp_path), "--config", str(conf), timeout=30)
    assert r.returncode == 2 and b"message.max.bytes" in r.stderr


def test_consume_with_group_resumes_after_commit(module_broker):
    b = ["--bootstrap-server", module_broker.bootstrap]
    # One partition: a group commits offsets only for partitions it consumed from, and
    # with no commit `latest` applies, so a later line on an unconsumed partition of a
    # multi-partition topic would (correctly, as in Kafka) be skipped.
    assert lf("topics", *b, "--create", "--topic", "cli-g", "--partitions", "1").returncode == 0
    lines = b"".join(b"g%d\n" % i for i in range(100))
    assert lf("produce", *b, "--topic", "cli-g", input=lines).returncode == 0
    first = lf(
        "consume",
        *b,
        "--topic",
        "cli-g",
        "--group",
        "cli-grp",
        "--from-beginning",
        "--max-messages",
        "100",
    )
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.splitlines()) == sorted(b"g%d" % i for i in range(100))
    assert lf("produce", *b, "--topic", "cli-g", input=b"later\n").returncode == 0
    second = lf("consume", *b, "--topic", "cli-g", "--group", "cli-grp", "--max-messages", "1")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [b"later"]
