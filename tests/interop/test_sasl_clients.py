"""SASL listeners with real clients: one broker with PLAINTEXT (for setup),
SASL_PLAINTEXT and SASL_SSL listeners, PLAIN users from the listeners' JAAS entries
and SCRAM users created with confluent-kafka's AdminClient
(AlterUserScramCredentials). confluent-kafka, kafka-python, aiokafka and kcat
produce and consume over SASL_SSL; wrong credentials are refused with a clear
error, counted, logged without the password, and write nothing; requests before
authentication and hostile SASL frames close the connection and leave the broker
serving; `logflume users` and `logflume configs --entity-type users` manage SCRAM
users; SCRAM users survive a restart."""

import json
import struct
import types

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker.protocol import ApiKey, ErrorCode
from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess, wait_until
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient, batch, produce_body
from tests.interop.secure_clients import (
    aiokafka_round_trip,
    confluent_round_trip,
    end_offset,
    kafka_python_round_trip,
    kcat_round_trip,
)
from tests.logflume.test_commands_clients import lf

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice \\"quoted\\" secret";'
)
ALICE = ("alice", 'alice "quoted" secret')
SCRAM_USERS = {"SCRAM-SHA-512": ("bob", "bob-secret"), "SCRAM-SHA-256": ("carol", "carol-secret")}
USERS = {"PLAIN": ALICE, **SCRAM_USERS}


@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl")
    d = root / "certs"
    ca = certs.new_ca()
    ca_file = certs.write_ca(d, ca)
    broker_pem = certs.write_keystore(
        d, "broker", certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    )
    plain, sasl_plain, sasl_ssl, metrics = (free_port() for _ in range(4))
    settings = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
            f"SASL_SSL://127.0.0.1:{sasl_ssl}"
        ),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_pem),
        "metrics.listen": f"127.0.0.1:{metrics}",
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 3,
    }
    broker = BrokerProcess(root / "data", port=plain, settings=settings).start()
    for port in (sasl_plain, sasl_ssl, metrics):
        wait_for_port(port, proc=broker.proc)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    upserts = [
        UserScramCredentialUpsertion(
            user,
            ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 4096),
            pw.encode(),
        )
        for m, (user, pw) in SCRAM_USERS.items()
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(10)
    admin.create_topics([NewTopic("refused", 1, 1)])["refused"].result(10)
    yield types.SimpleNamespace(
        broker=broker,
        ca=str(ca_file),
        plain=plain,
        sasl_plain=sasl_plain,
        sasl_ssl=sasl_ssl,
        metrics=metrics,
        admin=admin,
    )
    broker.stop()


def _rdkafka(sasl, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{sasl.sasl_ssl}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": sasl.ca,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _python_client(sasl, mechanism: str) -> dict:
    """The SASL_SSL settings kafka-python and aiokafka share (each takes the CA its
    own way), for the user of `mechanism`."""
    user, password = USERS[mechanism]
    return {
        "bootstrap_servers": f"127.0.0.1:{sasl.sasl_ssl}",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def _create(sasl, name: str) -> None:
    sasl.admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)


@pytest.mark.parametrize("mechanism", list(USERS))
def test_confluent_kafka_produces_and_consumes_in_a_group(sasl, mechanism):
    conf = _rdkafka(sasl, mechanism, *USERS[mechanism])
    values, _ = confluent_round_trip(conf, f"ck-{mechanism}", 500, "500 records over SASL_SSL")
    assert sorted(values) == sorted(b"v-%d" % i for i in range(500))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_over_sasl_ssl(sasl, mechanism):
    topic = f"kp-{mechanism}"
    _create(sasl, topic)
    conf = _python_client(sasl, mechanism) | {"ssl_cafile": sasl.ca}
    assert kafka_python_round_trip(conf, topic, 300) == [b"kp-%d" % i for i in range(300)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_aiokafka_over_sasl_ssl(sasl, mechanism):
    from aiokafka.helpers import create_ssl_context

    topic = f"aio-{mechanism}"
    _create(sasl, topic)
    conf = _python_client(sasl, mechanism) | {"ssl_context": create_ssl_context(cafile=sasl.ca)}
    assert aiokafka_round_trip(conf, topic, 200) == [b"aio-%d" % i for i in range(200)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcat_over_sasl_ssl(sasl, mechanism):
    conf = _rdkafka(sasl, mechanism, *USERS[mechanism])
    lines = kcat_round_trip(conf, f"kcat-{mechanism}", 300)
    assert lines == [f"line-{i}" for i in range(300)]


def _failures(sasl, mechanism: str) -> float:
    return scrape(sasl.metrics).sum(
        "logflume_broker_failed_authentication_total", listener="SASL_SSL", mechanism=mechanism
    )


@pytest.mark.parametrize(
    "mechanism, user, password, message",
    [
        ("PLAIN", "alice", "wrong-pw-1", "Invalid username or password"),
        ("PLAIN", "mallory", "wrong-pw-2", "Invalid username or password"),
        ("SCRAM-SHA-512", "bob", "wrong-pw-3", "invalid credentials with SASL mechanism"),
        ("SCRAM-SHA-512", "mallory", "wrong-pw-4", "Invalid user credentials"),
        ("SCRAM-SHA-256", "bob", "bob-secret", "Invalid user credentials"),  # 512 only
    ],
)
def test_bad_credentials_are_refused_counted_and_write_nothing(
    sasl, mechanism, user, password, message
):
    topic = "refused"
    before = _failures(sasl, mechanism)
    errors = []
    producer = Producer({**_rdkafka(sasl, mechanism, user, password), "error_cb": errors.append})
    producer.produce(topic, b"must not land")

    def refused() -> bool:
        producer.poll(0.1)
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_until(refused, timeout=10, what="an authentication error")
    auth = next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert message in auth.str()
    producer.purge()
    assert producer.flush(1) == 0
    wait_until(lambda: _failures(sasl, mechanism) > before, timeout=10, what="failure counted")
    assert end_offset(sasl.plain, topic) == 0
    log = sasl.broker.log_text()
    assert f"failed authentication of user '{user}'" in log
    assert password not in log
    assert sasl.broker.proc.poll() is None


def _handshake(client: WireClient, mechanism: str = "PLAIN", version: int = 1) -> dict:
    return client.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def test_only_sasl_requests_before_authentication(sasl):
    with WireClient(sasl.sasl_plain) as c:
        assert c.request(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
        c.send(ApiKey.METADATA, 1, {"topics": []})
        assert c.is_closed_by_peer()
    with WireClient(sasl.sasl_plain) as c:
        r = _handshake(c, "GSSAPI")
        assert r["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert r["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.is_closed_by_peer()
    with WireClient(sasl.sasl_plain) as c:
        assert _handshake(c)["error_code"] == 0
        token = b"\0%s\0%s" % (ALICE[0].encode(), ALICE[1].encode())
        r = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert r["error_code"] == 0 and r["session_lifetime_ms"] == 0
        assert c.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
        # no re-authentication: Kafka's answer once authenticated
        assert _handshake(c)["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_v0_handshake_takes_raw_tokens(sasl):
    """The pre-KIP-152 path: bare size-prefixed tokens after SaslHandshake v0."""
    with WireClient(sasl.sasl_plain) as c:
        assert _handshake(c, version=0)["error_code"] == 0
        token = b"\0%s\0%s" % (ALICE[0].encode(), ALICE[1].encode())
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c._recv_exact(4) == b"\0\0\0\0"  # an empty server token
        r = c.request(ApiKey.PRODUCE, 3, produce_body("raw-v0", batch(b"after v0 auth")))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
    with WireClient(sasl.sasl_plain) as c:
        _handshake(c, version=0)
        token = b"\0alice\0nope"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.is_closed_by_peer()  # v0 has no error answer: the connection closes


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


AUTH_V1 = struct.pack(">hhih", ApiKey.SASL_AUTHENTICATE, 1, 7, -1)  # header v1, no client id


@pytest.mark.parametrize(
    "name, handshake, frames",
    [
        ("raw token before any handshake", False, [_frame(b"\0alice\0pw")]),
        ("SaslAuthenticate before the handshake", False, [_frame(AUTH_V1 + b"\0\0\0\2hi")]),
        ("truncated SaslAuthenticate", True, [_frame(AUTH_V1 + b"\0\0\0\x64ab")]),
        ("random SaslAuthenticate body", True, [_frame(AUTH_V1 + bytes(range(250, 256)) * 3)]),
        ("oversized frame", True, [struct.pack(">i", 0x7FFFFFF0) + b"x" * 64]),
        ("above sasl.server.max.receive.size", True, [struct.pack(">i", 524289) + b"x" * 64]),
        ("negative size", True, [struct.pack(">i", -5)]),
    ],
)
def test_hostile_frames_close_the_connection_and_the_broker_serves(sasl, name, handshake, frames):
    with WireClient(sasl.sasl_plain) as c:
        if handshake:
            assert _handshake(c)["error_code"] == 0
        for frame in frames:
            c.send_raw(frame)
        assert c.is_closed_by_peer(), name
    with WireClient(sasl.sasl_plain) as c:
        assert c.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    assert "Traceback" not in sasl.broker.log_text()


def test_scram_garbage_after_handshake_fails_cleanly(sasl):
    for token in (b"", b"\xff\xfe", b"n,,n=bob", b"n,,n=bob,r=x" + b"A" * 10000):
        with WireClient(sasl.sasl_plain) as c:
            assert _handshake(c, "SCRAM-SHA-512")["error_code"] == 0
            r = c.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
            if r["error_code"] == 0:  # a valid-looking first message: finish with garbage
                r = c.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"c=biws,p=zz"})
            assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert c.is_closed_by_peer()


def test_describe_and_delete_scram_users(sasl):
    futures = sasl.admin.describe_user_scram_credentials(["bob", "carol"])
    described = {user: f.result(10) for user, f in futures.items()}
    infos = {
        u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
        for u, d in described.items()
    }
    assert infos == {
        "bob": [(ScramMechanism.SCRAM_SHA_512, 4096)],
        "carol": [(ScramMechanism.SCRAM_SHA_256, 4096)],
    }
    with pytest.raises(Exception, match="does not exist"):
        sasl.admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    mech = ScramMechanism.SCRAM_SHA_512
    add = UserScramCredentialUpsertion("dave", ScramCredentialInfo(mech, 8192), b"dave-secret")
    sasl.admin.alter_user_scram_credentials([add])["dave"].result(10)
    conf = _rdkafka(sasl, "SCRAM-SHA-512", "dave", "dave-secret")
    producer = Producer(conf)
    producer.produce("dave", b"x")
    assert producer.flush(10) == 0
    delete = UserScramCredentialDeletion("dave", mech)
    sasl.admin.alter_user_scram_credentials([delete])["dave"].result(10)
    errors = []
    producer = Producer({**conf, "error_cb": errors.append})

    def refused() -> bool:
        producer.poll(0.1)
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_until(refused, timeout=10, what="dave refused once deleted")


def test_users_and_configs_commands(sasl, tmp_path):
    """`logflume users` and kafka-configs' form of `logflume configs`, the latter
    logged in over SASL_SSL with --command-config (Java client properties)."""
    plain = ["--bootstrap-server", f"127.0.0.1:{sasl.plain}"]
    secret = tmp_path / "pw"
    secret.write_text("erin-secret\n")
    r = lf("users", "add", *plain, "erin", "--password-file", str(secret))
    assert r.returncode == 0 and b"erin: SCRAM-SHA-512 credential set" in r.stdout, r.stderr
    r = lf("users", "add", *plain, "erin", "--mechanism", "SCRAM-SHA-256", input=b"erin-256\n")
    assert r.returncode == 0, r.stderr
    assert _authenticates_scram(sasl, "SCRAM-SHA-256", "erin", "erin-256")
    listed = lf("users", "list", *plain, "erin").stdout.decode()
    assert listed == "erin: SCRAM-SHA-256 (iterations 4096), SCRAM-SHA-512 (iterations 4096)\n"

    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={sasl.ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="erin" password="erin-secret";\n'
    )
    secure = ["--bootstrap-server", f"127.0.0.1:{sasl.sasl_ssl}", "--command-config", str(props)]
    r = lf(
        "configs", *secure, "--alter", "--entity-type", "users", "--entity-name", "frank",
        "--add-config", "SCRAM-SHA-512=[iterations=8192,password=frank-secret]",
    )  # fmt: skip
    assert r.returncode == 0 and b"Completed updating config for user frank." in r.stdout, r.stderr
    out = lf("configs", *secure, "--describe", "--entity-type", "users", "--entity-name", "frank")
    assert out.stdout == (
        b"SCRAM credential configs for user-principal 'frank' are SCRAM-SHA-512=iterations=8192\n"
    )
    out = lf("configs", *secure, "--describe", "--entity-type", "users", "--entity-name", "frank",
             "--output", "json")  # fmt: skip
    assert json.loads(out.stdout) == [
        {"entity_type": "users", "entity_name": "frank",
         "configs": [{"name": "SCRAM-SHA-512", "iterations": 8192}]}
    ], out.stderr  # fmt: skip
    assert _authenticates_scram(sasl, "SCRAM-SHA-512", "frank", "frank-secret")
    r = lf(
        "configs", *plain, "--alter", "--entity-type", "users", "--entity-name", "frank",
        "--delete-config", "SCRAM-SHA-512",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = lf("users", "delete", *plain, "erin")
    assert r.returncode == 0 and b"SCRAM-SHA-256, SCRAM-SHA-512 deleted" in r.stdout
    assert lf("users", "list", *plain).stdout.decode().split() == [
        "bob:", "SCRAM-SHA-512", "(iterations", "4096)", "carol:", "SCRAM-SHA-256", "(iterations",
        "4096)",
    ]  # fmt: skip
    r = lf("users", "delete", *plain, "nobody")
    assert r.returncode == 1 and b"does not exist" in r.stderr


def _authenticates_scram(sasl, mechanism: str, user: str, password: str) -> bool:
    producer = Producer(_rdkafka(sasl, mechanism, user, password))
    producer.produce("cli-users", b"x")
    return producer.flush(10) == 0


def test_scram_users_survive_a_restart(sasl):
    """Last in the module: restarts the broker."""
    sasl.broker.restart()
    wait_for_port(sasl.sasl_ssl, proc=sasl.broker.proc)
    producer = Producer(_rdkafka(sasl, "SCRAM-SHA-512", *SCRAM_USERS["SCRAM-SHA-512"]))
    producer.produce("after-restart", b"x")
    assert producer.flush(15) == 0
    described = sasl.admin.describe_user_scram_credentials().result()
    assert sorted(described) == ["bob", "carol"]
