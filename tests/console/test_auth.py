"""The console's login, pure parts (console/auth.py): the auth file's hashes, its
refusals, sessions and where the console may listen; and the groups' reader's
settings (console/groups.py)."""

import os

import pytest

from console.auth import (
    AuthFile,
    AuthFileError,
    Sessions,
    check_listen,
    hash_password,
    hash_token,
    is_loopback,
)
from console.groups import GroupsConfigError, admin_config

TOKEN = "f" * 20 + "0123456789abcdef"


def write(tmp_path, text, mode=0o600):
    path = tmp_path / "console.auth"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_passwords_and_tokens_round_trip(tmp_path):
    alice, bob, ci = hash_password("s3cret"), hash_password("other"), hash_token(TOKEN)
    path = write(tmp_path, f"# people\nalice:{alice}\n\n  bob:{bob}  \nci:{ci}\n")
    auth = AuthFile.load(path)
    assert auth.check_password("alice", "s3cret")
    assert auth.check_password("bob", "other")
    assert not auth.check_password("alice", "other")
    assert not auth.check_password("nobody", "s3cret")
    assert not auth.check_password("ci", TOKEN)  # a token is no password
    assert auth.check_token(TOKEN) == "ci"
    assert auth.check_token(TOKEN + "x") is None
    assert auth.check_token("s3cret") is None


def test_each_hash_is_salted():
    assert hash_password("same") != hash_password("same")
    assert hash_password("same").startswith("scrypt$16384$8$1$")


def test_a_short_token_or_an_empty_password_is_refused():
    with pytest.raises(ValueError, match="at least 32"):
        hash_token("short")
    with pytest.raises(ValueError, match="empty"):
        hash_password("")


@pytest.mark.parametrize(
    "text, message",
    [
        ("alice:s3cret\n", r":1: the hash must start scrypt\$.*in clear are not accepted"),
        ("# c\nalice\n", ":2: expected NAME:HASH"),
        ("alice:scrypt$1$2\n", r":1: a password hash is scrypt\$N\$R\$P\$SALT\$HASH"),
        ("alice:scrypt$1000$8$1$AAAA$AAAA\n", ":1: scrypt needs N a power of 2"),
        ("ci:sha256$abcd\n", ":1: a token hash is sha256"),
        ("# nothing\n", "no user and no token"),
    ],
)
def test_a_bad_auth_file_is_refused_with_its_line(tmp_path, text, message):
    with pytest.raises(AuthFileError, match=message):
        AuthFile.load(write(tmp_path, text))


def test_a_name_given_twice_is_refused(tmp_path):
    line = "alice:" + hash_token(TOKEN) + "\n"
    with pytest.raises(AuthFileError, match=":2: 'alice' is given twice"):
        AuthFile.load(write(tmp_path, line * 2))


def test_an_auth_file_others_may_write_is_refused(tmp_path):
    path = write(tmp_path, "ci:" + hash_token(TOKEN) + "\n", mode=0o664)
    with pytest.raises(AuthFileError, match="writable by its group or others.*chmod go-w"):
        AuthFile.load(path)
    with pytest.raises(AuthFileError, match="No such file"):
        AuthFile.load(tmp_path / "missing")


def test_sessions_expire():
    now = [0.0]
    sessions = Sessions(lifetime=10, clock=lambda: now[0])
    token = sessions.new("alice")
    assert sessions.user(token) == "alice"
    assert sessions.user("forged") is None
    now[0] = 10.0
    assert sessions.user(token) is None
    again = sessions.new("alice")
    sessions.end(again)
    assert sessions.user(again) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_needs_nothing(host):
    assert is_loopback(host)
    assert check_listen(host, authenticated=False, tls=False) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "10.1.2.3", "console.example.net"])
def test_beyond_loopback_needs_an_auth_file_and_warns_without_tls(host):
    with pytest.raises(ValueError, match="refusing to listen on .* without --auth-file"):
        check_listen(host, authenticated=False, tls=True)
    assert "without --tls-cert" in check_listen(host, authenticated=True, tls=False)
    assert check_listen(host, authenticated=True, tls=True) is None


def test_groups_reader_settings_from_librdkafka_settings():
    conf = {
        "bootstrap.servers": "a:9093, b:9093",
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "socket.timeout.ms": 5000,  # librdkafka tuning: not carried over
        "logger": object(),
    }
    out = admin_config(conf, 2.5)
    assert out["bootstrap_servers"] == ["a:9093", "b:9093"]
    assert out["security_protocol"] == "SASL_SSL"
    assert out["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (out["sasl_plain_username"], out["sasl_plain_password"]) == ("u", "p")
    assert out["ssl_cafile"] == "/ca.pem" and out["ssl_check_hostname"] is False
    assert out["request_timeout_ms"] == 2500
    assert "socket_timeout_ms" not in out
    plain = admin_config({"bootstrap.servers": "a:9092"}, 1)
    assert plain["security_protocol"] == "PLAINTEXT" and "ssl_check_hostname" not in plain


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"ssl.keystore.location": "/k.p12"}, "cannot use ssl.keystore.location"),
        ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism GSSAPI"),
    ],
)
def test_groups_reader_names_the_settings_it_cannot_use(extra, message):
    with pytest.raises(GroupsConfigError, match=message):
        admin_config({"bootstrap.servers": "a:9092", **extra}, 1)
