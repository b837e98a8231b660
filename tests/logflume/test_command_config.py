"""`--command-config FILE` on every `logflume` command that talks to the broker, and
for real against one broker with SASL_SSL (SCRAM-SHA-512), SSL and SASL_PLAINTEXT
listeners: `topics` (librdkafka), `transactions` and `groups --delete-offsets` (the
broker's own codec, broker/protocol/client.BlockingClient); a wrong password is
named as an authentication failure, an unsupported SASL mechanism as an error."""

import argparse

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from logflume.cli import build_parser
from testkit.kafka import create_topic
from testkit.secured import start_secured_broker
from tests.logflume.test_commands_clients import lf

BROKER_FACING = {
    "acls",
    "configs",
    "console",
    "consume",
    "etl offline",
    "etl realtime",
    "groups",
    "produce",
    "topics",
    "transactions",
    "users add",
    "users delete",
    "users list",
}


def commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(name, parser) of every command and subcommand that runs something."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from commands(sub, f"{prefix} {name}".strip())


def test_every_command_with_a_bootstrap_server_takes_a_command_config():
    options = {name: set(p._option_string_actions) for name, p in commands(build_parser())}
    facing = {name for name, opts in options.items() if "--bootstrap-server" in opts}
    assert BROKER_FACING <= facing
    assert [name for name in sorted(facing) if "--command-config" not in options[name]] == []


SCRAM_FAILED = (
    "Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism SCRAM-SHA-512"
)


def test_librdkafkas_authentication_error_gives_the_brokers_message():
    from logflume.client_config import authentication_message

    text = (
        "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: "
        f"{SCRAM_FAILED} (after 7ms in state AUTH_REQ, 1 identical error(s) suppressed)"
    )
    assert authentication_message(text) == SCRAM_FAILED
    other = "h:1/1: SASL authentication error: Broker: bad (after 1ms in state AUTH_HANDSHAKE)"
    assert authentication_message(other) == "Authentication failed: Broker: bad"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    settings = {"transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}
    root = tmp_path_factory.mktemp("cc")
    secured = start_secured_broker(root, {"admin": "admin-secret"}, settings)
    create_topic(secured.plain, "over-sasl-ssl", 1)
    yield secured
    secured.stop()


def command_config(secured, tmp_path, protocol="SASL_SSL", password="admin-secret") -> str:
    path = tmp_path / f"{protocol}-{password}.properties"
    path.write_text(secured.java_properties("admin", password, protocol))
    return str(path)


def test_topics_list_over_sasl_ssl(secured, tmp_path):
    b = ["--bootstrap-server", secured.sasl_ssl]
    r = lf("topics", *b, "--list", "--command-config", command_config(secured, tmp_path))
    assert r.returncode == 0, r.stderr
    assert b"over-sasl-ssl" in r.stdout.split()


@pytest.fixture(scope="module")
def open_transaction(secured):
    """An ongoing transaction of confluent-kafka's, id "sec-tx", on sec-txn-0. It stays
    open until the module's last test on this worker is done (over a minute on a busy
    machine), so its timeout is the broker's longest (transaction.max.timeout.ms):
    with librdkafka's 60 s the coordinator aborted it and fenced the producer first."""
    create_topic(secured.plain, "sec-txn", 1)
    producer = Producer(
        {
            "bootstrap.servers": secured.plain,
            "transactional.id": "sec-tx",
            "transaction.timeout.ms": 900000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("sec-txn", b"x", partition=0)
    assert producer.flush(30) == 0
    yield
    producer.abort_transaction(30)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
def test_transactions_list_describe_find_hanging_over(
    protocol, secured, open_transaction, tmp_path
):
    bootstrap = {"SASL_SSL": secured.sasl_ssl, "SSL": secured.ssl}.get(
        protocol, secured.sasl_plaintext
    )
    b = ["--bootstrap-server", bootstrap, "--command-config"]
    b.append(command_config(secured, tmp_path, protocol))
    listed = lf("transactions", *b, "list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.decode().splitlines()[1:]]
    assert [r[3] for r in rows if r[0] == "sec-tx"] == ["Ongoing"]
    described = lf("transactions", *b, "describe", "--transactional-id", "sec-tx")
    assert described.returncode == 0, described.stderr
    row = [c.strip() for c in described.stdout.decode().splitlines()[1].split("\t")]
    assert (row[1], row[4], row[-1]) == ("sec-tx", "Ongoing", "sec-txn-0")
    # open for more than 0 minutes, but its coordinator will end it: not hanging
    hanging = lf(
        "transactions", *b, "find-hanging", "--topic", "sec-txn", "--max-transaction-timeout", "0"
    )
    assert hanging.returncode == 0, hanging.stderr
    (header,) = hanging.stdout.decode().splitlines()
    assert header.split()[:3] == ["Topic", "Partition", "ProducerId"]


def test_groups_delete_offsets_over_sasl_ssl(secured, tmp_path):
    create_topic(secured.plain, "sec-offsets", 1)
    tp = TopicPartition("sec-offsets", 0, 0)
    consumer = Consumer({"bootstrap.servers": secured.plain, "group.id": "sec-group"})
    try:
        consumer.commit(offsets=[tp], asynchronous=False)
        assert consumer.committed([tp], timeout=10)[0].offset == 0
        r = lf(
            "groups",
            *["--bootstrap-server", secured.sasl_ssl],
            *["--command-config", command_config(secured, tmp_path)],
            *["--delete-offsets", "--group", "sec-group", "--topic", "sec-offsets"],
        )
        assert r.returncode == 0, r.stderr
        assert ["sec-offsets", "0", "Successful"] in [
            line.split() for line in r.stdout.decode().splitlines()
        ]
        assert consumer.committed([tp], timeout=10)[0].offset < 0  # none committed
    finally:
        consumer.close()


def test_a_wrong_password_is_an_authentication_failure(secured, tmp_path):
    wrong = command_config(secured, tmp_path, password="not-the-secret")
    b = ["--bootstrap-server", secured.sasl_ssl, "--command-config", wrong]
    r = lf("topics", *b, "--list", "--timeout-ms", "5000")
    assert r.returncode == 1
    assert r.stderr.decode() == f"Error while executing topic command : {SCRAM_FAILED}\n"
    r = lf("transactions", *b, "list")
    assert (r.returncode, r.stderr.decode()) == (1, f"Error: {SCRAM_FAILED}\n")
    r = lf("groups", *b, "--delete-offsets", "--group", "g", "--topic", "t")
    assert (r.returncode, r.stderr.decode()) == (1, f"Error: {SCRAM_FAILED}\n")


@pytest.mark.parametrize(
    "command",
    [
        ["groups", "--list"],
        ["acls", "--list"],
        ["users", "list"],
        ["configs", "--describe", "--entity-type", "topics"],
    ],
    ids=" ".join,
)
def test_a_wrong_password_is_named_by_every_admin_command(command, secured, tmp_path):
    wrong = command_config(secured, tmp_path, password="not-the-secret")
    b = ["--bootstrap-server", secured.sasl_ssl, "--command-config", wrong]
    r = lf(*command, *b, "--timeout-ms", "3000")
    assert r.returncode == 1
    assert r.stderr.decode().endswith(f"{SCRAM_FAILED}\n"), r.stderr
    assert r.stderr.count(b"\n") == 1


def test_an_unsupported_mechanism_is_named(secured, tmp_path):
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
    )
    b = ["--bootstrap-server", secured.sasl_ssl, "--command-config", str(gssapi)]
    for command in (["transactions", "list"], ["groups", "--delete-offsets", "--group", "g"]):
        r = lf(*command, *b, "--topic", "t") if command[0] == "groups" else lf(*command, *b)
        assert r.returncode == 1
        assert r.stderr.decode().startswith("Error: sasl.mechanism: GSSAPI is not supported")
