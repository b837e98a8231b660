"""`logflume configs`, `topics --alter`, `groups --reset-offsets/--delete/--delete-offsets`
and `--command-config`, as a user runs them (kafka-configs / kafka-topics /
kafka-consumer-groups flags), against a broker subprocess."""

import json

import pytest

from logflume.client_config import CommandConfigError, translate
from testkit.kafka import create_topic, produce
from tests.logflume.test_commands_clients import lf


def _b(broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def test_configs_alter_and_describe(module_broker):
    b = _b(module_broker)
    create_topic(module_broker.bootstrap, "cfg")
    r = lf(
        "configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--alter",
        "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]",
    )  # fmt: skip
    assert r.returncode == 0 and b"Completed updating config for topic cfg." in r.stdout, r.stderr
    out = lf("configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--describe")
    text = out.stdout.decode()
    assert text.splitlines()[0] == "Dynamic configs for topic cfg are:"
    assert "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" in text
    assert "  retention.ms=3600000 sensitive=false" in text
    as_json = lf(
        "configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--describe",
        "--output", "json",
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    (described,) = json.loads(as_json.stdout)
    assert described["entity_type"] == "topics" and described["entity_name"] == "cfg"
    assert [c["name"] for c in described["configs"]] == ["cleanup.policy", "retention.ms"]
    assert described["configs"][1] == {
        "name": "retention.ms", "value": "3600000", "sensitive": False,
        "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False,
        "synonyms": [
            {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
            {"name": "log.retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"},
        ],
    }  # fmt: skip
    r = lf(
        "configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--alter",
        "--delete-config", "cleanup.policy,retention.ms",
    )  # fmt: skip
    assert r.returncode == 0
    out = lf("configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--describe")
    assert out.stdout.decode().splitlines() == ["Dynamic configs for topic cfg are:"]
    everything = lf(
        "configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--describe", "--all"
    )
    assert "  segment.bytes=1073741824 sensitive=false" in everything.stdout.decode()

    r = lf(
        "configs", *b, "--entity-type", "topics", "--entity-name", "cfg", "--alter",
        "--add-config", "retention.ms=later",
    )  # fmt: skip
    assert r.returncode == 1 and b"retention.ms" in r.stderr
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-name", "0", "--alter",
        "--add-config", "num.partitions=4",
    )  # fmt: skip
    assert r.returncode == 1 and b"Cannot update these configs dynamically" in r.stderr
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-name", "0", "--alter",
        "--add-config", "log.cleaner.threads=2",
    )  # fmt: skip
    assert r.stdout == b"Completed updating config for broker 0.\n", r.stderr
    brokers = lf("configs", *b, "--entity-type", "brokers", "--entity-name", "0", "--describe")
    assert brokers.stdout.decode().splitlines() == [
        "Dynamic configs for broker 0 are:",
        "  log.cleaner.threads=2 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2}",
    ]
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-name", "0", "--alter",
        "--delete-config", "log.cleaner.threads",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    brokers = lf("configs", *b, "--entity-type", "brokers", "--entity-name", "0", "--describe",
                 "--all")  # fmt: skip
    assert b"All configs for broker 0 are:" in brokers.stdout
    assert b"  listeners=" in brokers.stdout
    brokers = lf(
        "configs", *b, "--entity-type", "brokers", "--describe", "--all", "--output", "json"
    ).stdout
    (broker,) = json.loads(brokers)
    assert broker["entity_type"] == "brokers" and broker["entity_name"] == "0"
    (listeners,) = [c for c in broker["configs"] if c["name"] == "listeners"]
    assert listeners["source"] == "STATIC_BROKER_CONFIG" and listeners["read_only"] is True
    default = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-default", "--describe",
        "--output", "json",
    )  # fmt: skip
    assert json.loads(default.stdout) == [
        {"entity_type": "brokers", "entity_name": None, "configs": []}
    ], default.stderr


def test_topics_alter_partitions_and_describe_filters(module_broker):
    b = _b(module_broker)
    create_topic(module_broker.bootstrap, "wider")
    r = lf("topics", *b, "--alter", "--topic", "wider", "--partitions", "3")
    assert r.returncode == 0 and b"3 partitions" in r.stdout, r.stderr
    desc = lf("topics", *b, "--describe", "--topic", "wider").stdout.decode()
    assert "PartitionCount: 3" in desc
    r = lf("topics", *b, "--alter", "--topic", "wider", "--partitions", "2")
    assert r.returncode == 1 and b"higher than the requested 2" in r.stderr
    for flag in (
        "--under-replicated-partitions",
        "--unavailable-partitions",
        "--under-min-isr-partitions",
    ):
        r = lf("topics", *b, "--describe", flag)
        assert r.returncode == 0 and r.stdout == b"", flag  # one healthy node
    create_topic(module_broker.bootstrap, "strict", config={"min.insync.replicas": "2"})
    r = lf("topics", *b, "--describe", "--under-min-isr-partitions")
    assert r.stdout.decode().split("\t")[1:3] == ["Topic: strict", "Partition: 0"]
    r = lf("topics", *b, "--describe", "--under-min-isr-partitions", "--output", "json")
    assert json.loads(r.stdout) == [
        {"topic": "strict", "partition_count": 1, "replication_factor": 1,
         "configs": {"min.insync.replicas": "2"},
         "partitions": [{"partition": 0, "leader": 0, "replicas": [0], "isr": [0]}]}
    ]  # fmt: skip


def test_groups_reset_delete_offsets_and_delete(module_broker):
    b = _b(module_broker)
    create_topic(module_broker.bootstrap, "events", 2)
    produce(module_broker.bootstrap, "events", [b"%d" % i for i in range(20)], partition=0)
    produce(module_broker.bootstrap, "events", [b"%d" % i for i in range(10)], partition=1)
    r = lf(
        "consume", *b, "--topic", "events", "--group", "readers", "--from-beginning",
        "--max-messages", "30", "--timeout-ms", "20000",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr

    def committed() -> dict[str, str]:
        out = lf("groups", *b, "--describe", "--group", "readers").stdout.decode()
        rows = [line.split() for line in out.splitlines() if line.startswith("readers")]
        return {row[2]: row[3] for row in rows}

    assert committed() == {"0": "20", "1": "10"}
    as_json = lf("groups", *b, "--describe", "--group", "readers", "--output", "json")
    assert as_json.returncode == 0 and b"no active members" in as_json.stderr
    assert json.loads(as_json.stdout) == [
        {"group": "readers", "topic": "events", "partition": p, "current_offset": n,
         "log_end_offset": n, "lag": 0, "consumer_id": None, "host": None, "client_id": None}
        for p, n in ((0, 20), (1, 10))
    ]  # fmt: skip
    listed = json.loads(lf("groups", *b, "--list", "--output", "json").stdout)
    assert {"group": "readers", "state": "EMPTY", "type": "classic"} in listed
    plan = lf(
        "groups", *b, "--reset-offsets", "--group", "readers", "--topic", "events",
        "--to-offset", "15",
    )  # fmt: skip
    assert b"No action will be performed" in plan.stdout
    assert [line.split() for line in plan.stdout.decode().splitlines()[-2:]] == [
        ["readers", "events", "0", "15"],
        ["readers", "events", "1", "10"],  # kept within the log end
    ]
    assert committed() == {"0": "20", "1": "10"}
    plan = lf(
        "groups", *b, "--reset-offsets", "--group", "readers", "--topic", "events:1",
        "--to-offset", "5", "--output", "json",
    )  # fmt: skip
    assert json.loads(plan.stdout) == [
        {"group": "readers", "topic": "events", "partition": 1, "new_offset": 5}
    ]
    r = lf(
        "groups", *b, "--reset-offsets", "--group", "readers", "--topic", "events:0",
        "--shift-by", "-5", "--execute",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert committed() == {"0": "15", "1": "10"}
    r = lf(
        "groups", *b, "--reset-offsets", "--group", "readers", "--all-topics",
        "--to-earliest", "--execute",
    )  # fmt: skip
    assert committed() == {"0": "0", "1": "0"}
    r = lf(
        "groups", *b, "--reset-offsets", "--group", "readers", "--all-topics",
        "--by-duration", "PT1H", "--execute",
    )  # fmt: skip
    assert r.returncode == 0 and committed() == {"0": "0", "1": "0"}  # all newer than an hour

    r = lf("groups", *b, "--delete-offsets", "--group", "readers", "--topic", "events:1")
    assert r.returncode == 0 and b"events 1         Successful" in r.stdout, r.stdout
    assert committed() == {"0": "0"}
    r = lf("groups", *b, "--delete", "--group", "readers", "--group", "nobody")
    assert r.returncode == 1
    assert b"Deletion of requested consumer groups ('readers') was successful." in r.stdout
    assert b"* Group 'nobody' could not be deleted" in r.stderr
    assert b"readers" not in lf("groups", *b, "--list").stdout


def test_command_config_is_read_and_checked(module_broker, tmp_path):
    b = _b(module_broker)
    good = tmp_path / "client.properties"
    good.write_text("client.id=ops-cli\nsecurity.protocol=PLAINTEXT\n")
    r = lf("topics", *b, "--command-config", str(good), "--list")
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text("client.idd=ops\n")
    r = lf("topics", *b, "--command-config", str(bad), "--list")
    assert r.returncode == 1 and b"client.idd" in r.stderr
    r = lf("groups", *b, "--command-config", str(tmp_path / "missing"), "--list")
    assert r.returncode == 1 and b"missing" in r.stderr


def test_java_client_properties_are_translated():
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cr\\"et";'
    )
    got = translate(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/etc/kafka/client.pem",
        }
    )
    assert got == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 's3cr"et',
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.pem",
    }
    with pytest.raises(CommandConfigError, match="JKS trust store"):
        translate({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/x.jks"})
    with pytest.raises(CommandConfigError, match="only PlainLoginModule"):
        translate({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"})
