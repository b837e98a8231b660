"""`logflume agent test-output`, run as an operator runs it, against real brokers: a
PLAINTEXT one with the authorizer on (everyone allowed where no ACL says otherwise)
and a SASL_SSL one (SCRAM-SHA-512) whose agent user has exactly the ACLs an agent
needs. One line per kafka sink, exit 0 / 1 / 2."""

import subprocess
import sys

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from common import certs
from common.ports import free_port
from common.topic_names import AUDIT_TOPIC, POSITIONS_TOPIC
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess
from testkit.secured import start_secured_broker

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PASSWORD = "agent-secret: #1"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(rtype, name, user, op, permission=ALLOW, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, permission)


def grant(bootstrap: str, *bindings: AclBinding) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_acls(list(bindings)).values():
        f.result(10)


def run_test_output(tmp_path, sinks: str, *extra: str, env=None) -> tuple[int, str, str]:
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        "agents:\n  a:\n    sources:\n      u: {type: udp, listen: '127.0.0.1:0', channels: "
        f"[{', '.join(_channels(sinks))}]}}\n    channels:\n"
        + "".join(f"      {c}: {{type: memory}}\n" for c in _channels(sinks))
        + "    sinks:\n"
        + sinks
    )
    cmd = [sys.executable, "-m", "logflume", "agent", "test-output", "--config", str(config)]
    result = subprocess.run(
        [*cmd, "--timeout", "15", *extra], capture_output=True, text=True, timeout=120, env=env
    )
    return result.returncode, result.stdout, result.stderr


def _channels(sinks: str) -> list[str]:
    return [line.split("channel:")[1].split(",")[0].strip() for line in sinks.splitlines()]


def line_of(out: str, sink: str) -> str:
    (line,) = [x for x in out.splitlines() if x.startswith(f"sink {sink}: ")]
    return line


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """Authorizer on, everyone allowed where no ACL names the resource; `locked` may
    be described but not written."""
    settings = {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    broker = BrokerProcess(tmp_path_factory.mktemp("plain") / "data", settings=settings).start()
    for topic in ("web", "locked"):
        create_topic(broker.bootstrap, topic, 1)
    grant(
        broker.bootstrap,
        acl(ResourceType.TOPIC, "locked", "ANONYMOUS", AclOperation.WRITE, DENY),
        acl(ResourceType.TOPIC, "locked", "ANONYMOUS", AclOperation.DESCRIBE),
    )
    yield broker
    broker.stop()


def test_plaintext_ok_missing_denied_and_unreachable(tmp_path, plain):
    b = plain.bootstrap
    code, out, err = run_test_output(
        tmp_path,
        f"      ok: {{type: kafka, channel: c1, topic: web, bootstrap_servers: '{b}'}}\n"
        f"      missing: {{type: kafka, channel: c2, topic: nope, bootstrap_servers: '{b}'}}\n"
        f"      locked: {{type: kafka, channel: c3, topic: locked, bootstrap_servers: '{b}'}}\n"
        f"      down: {{type: kafka, channel: c4, topic: web, bootstrap_servers: "
        f"'127.0.0.1:{free_port()}'}}\n"
        f"      file: {{type: file, channel: c5, directory: '{tmp_path}'}}\n",
    )
    assert code == 1, err
    assert line_of(out, "ok") == (
        f"sink ok: ok (bootstrap {b}, topic web WRITE allowed, audit topic {AUDIT_TOPIC} "
        "missing: the sink creates it at start)"
    )
    assert line_of(out, "missing").startswith("sink missing: FAILED (topic nope missing; ")
    assert "the broker would create it on first write" in line_of(out, "missing")
    assert line_of(out, "locked") == "sink locked: FAILED (topic locked: WRITE denied)"
    assert "unreachable" in line_of(out, "down") and "Connection refused" in line_of(out, "down")
    assert line_of(out, "file") == "sink file: not checked (type file)"
    assert len(out.splitlines()) == 5 and not err.strip()


def test_all_ok_exits_0_and_json_has_one_object_per_sink(tmp_path, plain):
    b = plain.bootstrap
    code, out, err = run_test_output(
        tmp_path,
        f"      k: {{type: kafka, channel: c1, topic: web, bootstrap_servers: '{b}', "
        "audit: false}\n",
        "--output",
        "json",
    )
    assert code == 0, (out, err)
    (doc,) = orjson.loads(out)
    assert doc == {
        "agent": "a",
        "sink": "k",
        "ok": True,
        "bootstrap": b,
        "topic": "web",
        "detail": f"bootstrap {b}, topic web WRITE allowed",
    }


def test_a_bad_file_exits_2(tmp_path):
    code, out, err = run_test_output(tmp_path, "      k: {type: kafka, channel: c1, topic: ''}\n")
    assert code == 2 and "topic: must not be empty" in err and not out


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """SASL_SSL with SCRAM user `agent`, allowed what an exactly-once agent needs on
    `web` and ids `logflume-*`; `other` it may only describe. PLAINTEXT is the
    super user's, for the setup."""
    settings = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"}
    s = start_secured_broker(tmp_path_factory.mktemp("secured"), {"agent": PASSWORD}, settings)
    for topic in ("web", "web.dlq", "other", POSITIONS_TOPIC, AUDIT_TOPIC):
        create_topic(s.plain, topic, 1)
    t, op = ResourceType.TOPIC, AclOperation
    bindings = [acl(t, "other", "agent", op.DESCRIBE)]
    for topic, ops in (
        ("web", (op.WRITE, op.DESCRIBE)),
        ("web.dlq", (op.WRITE, op.DESCRIBE)),
        (POSITIONS_TOPIC, (op.WRITE, op.READ, op.DESCRIBE)),
        (AUDIT_TOPIC, (op.WRITE, op.DESCRIBE)),
    ):
        bindings += [acl(t, topic, "agent", o) for o in ops]
    prefixed = ResourcePatternType.PREFIXED
    bindings += [
        acl(ResourceType.TRANSACTIONAL_ID, "logflume-", "agent", o, pattern=prefixed)
        for o in (op.WRITE, op.DESCRIBE)
    ]
    grant(s.plain, *bindings)
    yield s
    s.stop()


def sasl_sink(secured, name: str, channel: str, topic: str, extra: str = "", ca=None) -> str:
    return (
        f"      {name}: {{type: kafka, channel: {channel}, topic: {topic}, "
        f"bootstrap_servers: '{secured.sasl_ssl}', tls: {{ca: '{ca or secured.ca}'}}, "
        "sasl: {mechanism: SCRAM-SHA-512, username: agent, password: '${LF_PW}'}"
        f"{extra}}}\n"
    )


def env_with(password: str) -> dict:
    import os

    return {**os.environ, "LF_PW": password}


def test_sasl_ssl_ok_denied_and_a_wrong_ca(tmp_path, secured):
    other_ca = certs.write_ca(tmp_path / "other", certs.new_ca())
    code, out, err = run_test_output(
        tmp_path,
        sasl_sink(secured, "ok", "c1", "web")
        + sasl_sink(secured, "denied", "c2", "other", ", audit: false")
        + sasl_sink(secured, "badca", "c3", "web", ca=other_ca),
        env=env_with(PASSWORD),
    )
    assert code == 1, err
    assert line_of(out, "ok") == (
        f"sink ok: ok (bootstrap {secured.sasl_ssl}, topic web WRITE allowed, "
        f"audit topic {AUDIT_TOPIC} WRITE and DESCRIBE allowed)"
    )
    assert line_of(out, "denied") == "sink denied: FAILED (topic other: WRITE denied)"
    assert line_of(out, "badca").startswith("sink badca: FAILED (TLS handshake failed: ")
    assert "certificate verify failed" in line_of(out, "badca")


def test_a_wrong_password_is_an_authentication_failure(tmp_path, secured):
    code, out, err = run_test_output(
        tmp_path, sasl_sink(secured, "k", "c1", "web"), env=env_with("not the password")
    )
    assert code == 1, err
    assert line_of(out, "k").startswith("sink k: FAILED (SASL authentication failed: "), out
    assert "not the password" not in out + err


def test_an_exactly_once_sink_without_fencing_the_running_producer(tmp_path, secured):
    """The transactional id is checked without InitProducerId: a producer that holds
    the id, mid-transaction, still commits after the check."""
    conf = {
        "bootstrap.servers": secured.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secured.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "agent",
        "sasl.password": PASSWORD,
    }
    running = Producer({**conf, "transactional.id": "logflume-eos-1"})
    running.init_transactions(30)
    running.begin_transaction()
    running.produce("web", b"in flight")
    eos = ", delivery: exactly_once, transactional_id: "
    code, out, err = run_test_output(
        tmp_path,
        sasl_sink(secured, "eos", "c1", "web", eos + "logflume-eos-1")
        + sasl_sink(secured, "rogue", "c2", "web", eos + "rogue-1")
        + sasl_sink(secured, "dlq", "c3", "web", eos + "logflume-eos-2, dead_letter_topic: other"),
        env=env_with(PASSWORD),
    )
    running.commit_transaction(30)  # not fenced
    assert code == 1, err
    assert line_of(out, "eos") == (
        f"sink eos: ok (bootstrap {secured.sasl_ssl}, topic web WRITE allowed, dead-letter "
        f"topic web.dlq WRITE allowed, positions topic {POSITIONS_TOPIC} WRITE and READ "
        f"allowed, audit topic {AUDIT_TOPIC} WRITE and DESCRIBE allowed, transactional id "
        "logflume-eos-1 WRITE allowed)"
    )
    assert line_of(out, "rogue") == "sink rogue: FAILED (transactional id rogue-1: WRITE denied)"
    assert line_of(out, "dlq") == "sink dlq: FAILED (dead-letter topic other: WRITE denied)"
