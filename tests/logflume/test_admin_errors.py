"""Plainly wrong input to the admin commands (`logflume configs`, `topics`, `groups`,
`acls`, `users`) ends as Kafka's tools end it: one line on stderr and a non-zero
exit status, never a traceback; against a broker subprocess, and against a port
nothing listens on."""

import pytest

from common.ports import free_port
from testkit.kafka import create_topic
from tests.logflume.test_commands_clients import lf


def one_error_line(r) -> str:
    """The one line a failed command printed on stderr."""
    err = r.stderr.decode()
    assert r.returncode != 0, (r.stdout, err)
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_cluster_default_broker_configs_altered_and_described(module_broker):
    """kafka-configs' --entity-default (the broker resource ""): a dynamic key is
    taken and described with its source; a read-only one, or a per-broker one at the
    default level, is refused in one line with Kafka's message."""
    b = ["--bootstrap-server", module_broker.bootstrap]
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-default", "--alter",
        "--add-config", "log.retention.ms=7200000",
    )  # fmt: skip
    assert r.stdout == b"Completed updating default config for brokers in the cluster.\n", r.stderr
    r = lf("configs", *b, "--entity-type", "brokers", "--entity-default", "--describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=7200000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}",
    ]
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-default", "--alter",
        "--delete-config", "log.retention.ms",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-default", "--alter",
        "--add-config", "log.retention.hours=2",
    )  # fmt: skip
    assert r.returncode == 1 and r.stdout == b""
    assert one_error_line(r) == (
        "Error while executing config command with args: INVALID_CONFIG: Invalid config "
        "value for resource ConfigResource(type=BROKER, name=''): Cannot update these "
        "configs dynamically: Set(log.retention.hours)"
    )
    r = lf(
        "configs", *b, "--entity-type", "brokers", "--entity-default", "--alter",
        "--add-config", "listener.name.plaintext.ssl.keystore.location=/x.pem",
    )  # fmt: skip
    assert "Cannot update these configs at default cluster level" in one_error_line(r)
    r = lf("configs", *b, "--entity-type", "brokers", "--entity-name", "0", "--alter",
           "--add-config", "broker.id=2")  # fmt: skip
    assert one_error_line(r).endswith(
        "INVALID_CONFIG: Invalid config value for resource ConfigResource(type=BROKER, "
        "name='0'): Cannot update these configs dynamically: Set(broker.id)"
    )


CONFIGS_MISTAKES = {
    "default of topics": (
        ["--entity-type", "topics", "--entity-default", "--describe"],
        "--entity-default is for --entity-type brokers, not topics",
    ),
    "default of users with credentials": (
        ["--entity-type", "users", "--entity-default", "--alter", "--delete-config",
         "SCRAM-SHA-512"],
        "SCRAM credentials belong to --entity-type users --entity-name U",
    ),
    "topics and clients": (
        ["--entity-type", "topics", "--entity-type", "clients", "--describe"],
        "only --entity-type users and --entity-type clients combine",
    ),
    "a name without a type": (
        ["--entity-type", "clients", "--entity-name", "a", "--entity-name", "b", "--describe"],
        "each --entity-name or --entity-default needs its --entity-type",
    ),
    "quota not a number": (
        ["--entity-type", "clients", "--entity-name", "a", "--alter", "--add-config",
         "producer_byte_rate=fast"],
        "--add-config producer_byte_rate=fast: not a number",
    ),
    "unknown quota": (
        ["--entity-type", "clients", "--entity-name", "a", "--alter", "--add-config",
         "producer_rate=1"],
        "INVALID_REQUEST: Invalid configuration key producer_rate",
    ),
    "broker name not an id": (
        ["--entity-type", "brokers", "--entity-name", "broker-1", "--describe"],
        "The entity name for brokers must be a valid integer broker id, but it is: broker-1",
    ),
    "empty name": (
        ["--entity-type", "topics", "--entity-name", "", "--describe"],
        "--entity-name is empty",
    ),
    "alter without a name": (
        ["--entity-type", "topics", "--alter", "--add-config", "retention.ms=1"],
        "--alter needs --entity-name",
    ),
    "alter without a change": (
        ["--entity-type", "topics", "--entity-name", "err-t", "--alter"],
        "--alter needs --add-config or --delete-config",
    ),
    "a change without alter": (
        ["--entity-type", "topics", "--entity-name", "err-t", "--describe", "--add-config",
         "retention.ms=1"],
        "--add-config and --delete-config go with --alter",
    ),
    "KEY without =VALUE": (
        ["--entity-type", "topics", "--entity-name", "err-t", "--alter", "--add-config",
         "retention.ms"],
        "expected K=V",
    ),
    "unclosed list": (
        ["--entity-type", "topics", "--entity-name", "err-t", "--alter", "--add-config",
         "cleanup.policy=[compact,delete"],
        "unclosed [",
    ),
    "unknown topic config": (
        ["--entity-type", "topics", "--entity-name", "err-t", "--alter", "--add-config",
         "retention.msec=1"],
        "INVALID_CONFIG: ",
    ),
    "unknown topic": (
        ["--entity-type", "topics", "--entity-name", "err-missing", "--describe"],
        "UNKNOWN_TOPIC_OR_PARTITION: ",
    ),
    "user's mechanism": (
        ["--entity-type", "users", "--entity-name", "alice", "--alter", "--delete-config",
         "SCRAM-SHA-1"],
        "SCRAM-SHA-1: users take SCRAM-SHA-256, SCRAM-SHA-512",
    ),
    "user's iterations": (
        ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
         "SCRAM-SHA-512=[iterations=many,password=secret]"],
        "iterations=many is not a number",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def err_topic(module_broker) -> None:
    """The topic the cases name (created once for the module's broker)."""
    create_topic(module_broker.bootstrap, "err-t")


@pytest.mark.usefixtures("err_topic")
@pytest.mark.parametrize("case", sorted(CONFIGS_MISTAKES))
def test_configs_mistakes_are_one_line(module_broker, case):
    args, expected = CONFIGS_MISTAKES[case]
    r = lf("configs", "--bootstrap-server", module_broker.bootstrap, *args)
    line = one_error_line(r)
    assert line.startswith("Error while executing config command with args: ")
    assert expected in line


def test_other_admin_commands_mistakes_are_one_line(module_broker):
    b = ["--bootstrap-server", module_broker.bootstrap]
    create_topic(module_broker.bootstrap, "err-g")
    for args, expected in (
        (["topics", *b, "--create", "--topic", "err-c", "--config", "retention.ms"],
         "--config 'retention.ms': expected KEY=VALUE"),
        (["topics", *b, "--alter", "--topic", "err-g"], "--alter needs --partitions"),
        (["topics", *b, "--create", "--topic", "err-c", "--partitions", "0"],
         "The partitions must be greater than 0"),
        (["topics", *b, "--create", "--topic", "err-c", "--replication-factor", "0"],
         "The replication factor must be between 1 and 32767 inclusive"),
        (["topics", *b, "--create", "--topic", "err-c", "--config", "retention.msec=1"],
         "retention.msec"),
        (["groups", *b, "--reset-offsets", "--group", "g", "--topic", "err-g:first",
          "--to-earliest"], "--topic 'err-g:first': expected TOPIC or TOPIC:PARTITION,..."),
        (["groups", *b, "--delete-offsets", "--group", "g", "--topic", "err-g:"],
         "--topic 'err-g:': expected TOPIC or TOPIC:PARTITION,..."),
        (["groups", *b, "--describe"], "--group is required"),
        (["acls", *b, "--add", "--topic", "err-g"], "--add needs --allow-principal"),
        (["users", "delete", *b, "nobody"], "nobody"),
        (["users", "add", *b, "", "--password", "secret"], "'user' cannot be empty"),
        (["users", "add", *b, "alice", "--password", "secret", "--iterations", "0"],
         "Iterations should be positive"),
    ):  # fmt: skip
        line = one_error_line(lf(*args))
        assert expected in line, (args, line)


def test_reassign_mistakes_are_one_line(module_broker, tmp_path):
    b = ["--bootstrap-server", module_broker.bootstrap]
    create_topic(module_broker.bootstrap, "err-r")
    topics = tmp_path / "topics.json"
    topics.write_text('{"version": 1, "topics": [{"topic": "err-r"}]}')
    twice = tmp_path / "twice.json"
    twice.write_text(
        '{"version": 1, "partitions": [{"topic": "err-r", "partition": 0, "replicas": [0, 0]}]}'
    )
    nowhere = tmp_path / "nowhere.json"
    nowhere.write_text(
        '{"version": 1, "partitions": [{"topic": "nowhere", "partition": 0, "replicas": [0]}]}'
    )
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1, "partitions": [')
    for args, expected in (
        (["--generate", "--topics-to-move-json-file", str(topics)],
         'Missing required argument "[--broker-list]"'),
        (["--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "0,0"],
         "Broker list contains duplicate entries: 0"),
        (["--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "0,5"],
         "The following brokers are not present in the cluster: 5"),
        (["--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "one"],
         "--broker-list one: broker ids"),
        (["--verify", "--reassignment-json-file", str(tmp_path / "missing.json")],
         "Cannot read"),
        (["--execute", "--reassignment-json-file", str(broken)], "is not valid JSON"),
        (["--execute", "--reassignment-json-file", str(twice)],
         "Partition replica lists may not contain duplicate entries: err-r-0 contains 0,0"),
        (["--execute", "--reassignment-json-file", str(nowhere)], "Topic(s) nowhere do not exist"),
        (["--list", "--reassignment-json-file", str(twice)],
         'Option "[--reassignment-json-file]" can\'t be used with "[--list]"'),
    ):  # fmt: skip
        line = one_error_line(lf("reassign", *b, *args))
        assert expected in line, (args, line)


def test_reassign_on_a_single_broker_completes_at_once(module_broker, tmp_path):
    """As on a one-broker Kafka: a move onto the only broker is done when started."""
    b = ["--bootstrap-server", module_broker.bootstrap]
    create_topic(module_broker.bootstrap, "err-s")
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "err-s", "partition": 0, '
                    '"replicas": [0]}]}')  # fmt: skip
    r = lf("reassign", *b, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines()[-3:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 1000 B/s",
        "Successfully started partition reassignment for err-s-0",
    ]
    r = lf("reassign", *b, "--verify", "--reassignment-json-file", str(plan))
    assert r.stdout.decode().splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition err-s-0 is completed.",
        "Clearing broker-level throttles on broker 0",
        "Clearing topic-level throttles on topic err-s",
    ]
    r = lf(
        "reassign", *b, "--verify", "--preserve-throttles", "--reassignment-json-file", str(plan)
    )
    assert r.stdout.decode().splitlines()[-1] == "Reassignment of partition err-s-0 is completed."
    r = lf("reassign", *b, "--list", "--preserve-throttles")
    assert (r.returncode, r.stderr.decode().strip()) == (
        1,
        'Option "[--preserve-throttles]" can\'t be used with "[--list]"',
    )
    r = lf("reassign", *b, "--list")
    assert (r.returncode, r.stdout) == (0, b"No partition reassignments found.\n")


def test_acls_remove_without_an_answer_removes_nothing(module_broker):
    """--remove asks first; with no terminal to answer (stdin closed) it removes
    nothing, where it used to end in EOFError."""
    r = lf(
        "acls", "--bootstrap-server", module_broker.bootstrap, "--remove", "--topic", "err-a",
        input=b"",
    )  # fmt: skip
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    assert b"Removed ACLs" not in r.stdout


def test_unknown_choices_are_usage_errors():
    """argparse's own refusal: usage, then one error line, status 2."""
    b = ["--bootstrap-server", "127.0.0.1:9"]
    for args, expected in (
        (["configs", *b, "--entity-type", "ips", "--describe"], "invalid choice: 'ips'"),
        (["acls", *b, "--list", "--operation", "Fly"], "'Fly' is not one of All, Read"),
    ):
        r = lf(*args)
        err = r.stderr.decode()
        assert r.returncode == 2 and "Traceback" not in err
        assert expected in err.splitlines()[-1]


UNREACHABLE = [
    ["configs", "--entity-type", "topics", "--entity-name", "t", "--describe"],
    ["configs", "--entity-type", "brokers", "--describe"],
    ["configs", "--entity-type", "brokers", "--entity-default", "--describe"],
    ["configs", "--entity-type", "users", "--describe"],
    ["configs", "--entity-type", "clients", "--describe"],
    ["topics", "--describe"],
    ["groups", "--list"],
    ["groups", "--describe", "--group", "g"],
    ["groups", "--delete-offsets", "--group", "g", "--topic", "t"],
    ["acls", "--list"],
    ["users", "list"],
    ["reassign", "--list"],
]


@pytest.mark.parametrize("args", UNREACHABLE, ids=" ".join)
def test_an_unreachable_broker_is_one_line(args):
    bootstrap = f"127.0.0.1:{free_port()}"
    r = lf(*args, "--bootstrap-server", bootstrap, "--timeout-ms", "1500", timeout=60)
    assert r.returncode == 1
    assert bootstrap in one_error_line(r)
