"""$LOGFLUME_BOOTSTRAP_SERVER and the client profile (~/.config/logflume/client.properties
or $LOGFLUME_COMMAND_CONFIG) as the defaults of --bootstrap-server and --command-config
(common/client_options.py): parsed by every command that takes them, the flags winning,
one line when no broker is named; and for real against a broker whose SASL listener
only the profile's credentials open."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from common.client_options import BOOTSTRAP_ENV, COMMAND_CONFIG_ENV
from logflume.cli import build_parser
from testkit.kafka import create_topic
from testkit.secured import start_secured_broker
from tests.logflume.test_command_config import SCRAM_FAILED, commands

LF = [sys.executable, "-m", "logflume"]
NO_BROKER = "no broker to connect to: give --bootstrap-server HOST:PORT or set " + BOOTSTRAP_ENV


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No variable of ours, and a HOME without a profile."""
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    monkeypatch.delenv(COMMAND_CONFIG_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def broker_commands() -> list[str]:
    """Every command that takes --bootstrap-server and has no default broker (the
    ETL jobs default to 127.0.0.1:9092; `cluster restart` reads the brokers of the
    `cluster up` named by --data-dir: test_cluster_restart_on_systemd_needs_a_broker)."""
    return sorted(
        name
        for name, p in commands(build_parser())
        if "--bootstrap-server" in p._option_string_actions
        and not name.startswith("etl")
        and name != "cluster restart"
    )


def test_without_a_broker_every_command_says_the_flag_and_the_variable(clean_env, capsys):
    names = broker_commands()
    assert {"consume", "produce", "topics", "transactions", "users add", "groups"} <= set(names)
    for name in names:
        with pytest.raises(SystemExit) as stopped:
            parse(*name.split())
        err = capsys.readouterr().err
        assert stopped.value.code == 2, name
        assert err == f"logflume {name}: error: {NO_BROKER}\n", name


def test_cluster_restart_on_systemd_needs_a_broker(clean_env):
    argv = [*LF, "cluster", "restart", "--rolling", "--systemd-unit", "logflume-broker@{id}"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        f"logflume cluster restart: --systemd-unit needs --bootstrap-server (or ${BOOTSTRAP_ENV})\n"
    )


def test_the_command_prints_one_line(clean_env):
    r = subprocess.run([*LF, "consume", "--topic", "t"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"logflume consume: error: {NO_BROKER}\n", "")


def test_the_variable_is_the_default_and_the_flag_wins(clean_env):
    clean_env.setenv(BOOTSTRAP_ENV, "from-env:9092")
    assert parse("topics", "--list").bootstrap_server == "from-env:9092"
    assert parse("users", "list").bootstrap_server == "from-env:9092"
    flagged = parse("topics", "--list", "--bootstrap-server", "from-flag:9092")
    assert flagged.bootstrap_server == "from-flag:9092"
    assert parse("etl", "offline").bootstrap_server == "from-env:9092"
    clean_env.delenv(BOOTSTRAP_ENV)
    assert parse("etl", "offline").bootstrap_server == "127.0.0.1:9092"


def test_the_profile_is_the_default_command_config(clean_env, tmp_path):
    b = ("--bootstrap-server", "h:9092")
    assert parse("topics", "--list", *b).command_config is None
    profile = tmp_path / "home" / ".config" / "logflume" / "client.properties"
    profile.parent.mkdir(parents=True)
    profile.write_text("security.protocol=SSL\n")
    assert parse("topics", "--list", *b).command_config == str(profile)
    assert parse("etl", "realtime").command_config == str(profile)
    clean_env.setenv(COMMAND_CONFIG_ENV, "/etc/named.properties")
    assert parse("consume", "-t", "x", *b).command_config == "/etc/named.properties"
    flagged = parse("consume", "-t", "x", *b, "--command-config", "/tmp/flag.properties")
    assert flagged.command_config == "/tmp/flag.properties"
    assert parse("consume", "-t", "x", *b, "--command-config", "").command_config == ""


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    settings = {"transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}
    secured = start_secured_broker(tmp_path_factory.mktemp("co"), {"op": "op-secret"}, settings)
    create_topic(secured.plain, "co-t", 1)
    yield secured
    secured.stop()


def env_for(home, **variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (BOOTSTRAP_ENV, COMMAND_CONFIG_ENV)}
    return env | {"HOME": str(home)} | variables


def lf(*args: str, env: dict[str, str], input: bytes | None = None):
    return subprocess.run([*LF, *args], input=input, env=env, capture_output=True, timeout=60)


def test_against_a_broker_the_variable_and_the_profile_connect(secured, tmp_path):
    home = tmp_path / "home"
    profile = home / ".config" / "logflume" / "client.properties"
    profile.parent.mkdir(parents=True)
    profile.write_text(secured.java_properties("op", "op-secret", "SASL_PLAINTEXT"))
    env = env_for(home, **{BOOTSTRAP_ENV: secured.sasl_plaintext})

    listed = lf("topics", "--list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert b"co-t" in listed.stdout.split()
    produced = lf("produce", "--topic", "co-t", env=env, input=b"one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = lf("consume", "-t", "co-t", "-o", "beginning", "-e", env=env)
    assert (consumed.returncode, consumed.stdout) == (0, b"one\ntwo\n"), consumed.stderr
    transactions = lf("transactions", "list", env=env)  # the broker's own codec
    assert transactions.returncode == 0, transactions.stderr

    # the flag wins over the variable
    dead = env | {BOOTSTRAP_ENV: "127.0.0.1:1"}
    assert (
        lf("topics", "--list", "--bootstrap-server", secured.sasl_plaintext, env=dead).returncode
        == 0
    )
    unreachable = lf("topics", "--list", "--timeout-ms", "1500", env=dead)
    assert unreachable.returncode == 1 and b"127.0.0.1:1" in unreachable.stderr

    # $LOGFLUME_COMMAND_CONFIG wins over the profile, --command-config over both
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(secured.java_properties("op", "not-the-secret", "SASL_PLAINTEXT"))
    named = env | {COMMAND_CONFIG_ENV: str(wrong)}
    refused = lf("topics", "--list", "--timeout-ms", "5000", env=named)
    assert refused.returncode == 1 and SCRAM_FAILED in refused.stderr.decode(), refused.stderr
    assert lf("topics", "--list", "--command-config", str(profile), env=named).returncode == 0
    # an empty --command-config is none: SASL_PLAINTEXT's listener refuses plaintext
    unconfigured = lf("topics", "--list", "--timeout-ms", "1500", "--command-config", "", env=env)
    assert unconfigured.returncode == 1

    missing = env | {COMMAND_CONFIG_ENV: str(tmp_path / "nowhere.properties")}
    r = lf("topics", "--list", env=missing)
    assert r.returncode == 1 and b"nowhere.properties: No such file or directory" in r.stderr
