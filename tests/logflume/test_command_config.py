"""`--command-config FILE` on every `logflume` command that talks to the broker, and
one of them for real over SASL_SSL (SCRAM-SHA-512)."""

import argparse

import pytest

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


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    secured = start_secured_broker(tmp_path_factory.mktemp("cc"), {"admin": "admin-secret"})
    create_topic(secured.plain, "over-sasl-ssl", 1)
    yield secured
    secured.stop()


def test_topics_list_over_sasl_ssl(secured, tmp_path):
    good, bad = tmp_path / "admin.properties", tmp_path / "wrong.properties"
    good.write_text(secured.java_properties("admin", "admin-secret"))
    bad.write_text(secured.java_properties("admin", "not-the-secret"))
    b = ["--bootstrap-server", secured.sasl_ssl]
    r = lf("topics", *b, "--list", "--command-config", str(good))
    assert r.returncode == 0, r.stderr
    assert b"over-sasl-ssl" in r.stdout.split()
    r = lf("topics", *b, "--list", "--command-config", str(bad), timeout=60)
    assert r.returncode != 0
    assert b"not-the-secret" not in r.stdout + r.stderr
