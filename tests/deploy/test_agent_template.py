"""The production web host's agent, deploy/agent/: pipelines.yaml validates once
agent.env's four settings are filled in, and without them names each with file and
line; what it ships is what deploy/README.md says."""

import os
import subprocess
import sys

import pytest

from agent.config import compile_text
from common.envfile import parse_env_file
from tests.deploy.template import (
    AGENT_ENV,
    PIPELINES,
    REPO,
    SETTINGS,
    filled,
    first_line_of,
    relocated,
    settings,
)


def validate(config, env_file):
    """`logflume agent validate` of this tree, in an environment without the settings."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    cmd = [sys.executable, "-m", "logflume", "agent", "validate", "--config", str(config)]
    return subprocess.run(
        [*cmd, "--env-file", str(env_file)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )


def test_agent_env_leaves_the_settings_unset_and_shows_each(tmp_path):
    text = AGENT_ENV.read_text()
    assert parse_env_file(text, str(AGENT_ENV)) == {}
    for name in (*SETTINGS, "HOST"):
        assert f"\n#{name}=" in text
    unset = compile_text(PIPELINES.read_text(), str(PIPELINES), {"HOST": "web-01"})[1]
    named = {e.message.split()[2] for e in unset if "environment variable" in e.message}
    assert named == set(SETTINGS)  # what agent.env offers is what the template needs


def test_the_template_validates_once_the_settings_are_filled_in(tmp_path):
    config = relocated(PIPELINES, tmp_path)
    env_file = filled(AGENT_ENV, settings(tmp_path), tmp_path / "agent.env")
    result = validate(config, env_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "OK: agents web"


@pytest.mark.parametrize("given", [(), SETTINGS[1:]], ids=["none", "all-but-brokers"])
def test_without_its_settings_validate_names_them_with_file_and_line(tmp_path, given):
    config = relocated(PIPELINES, tmp_path)
    values = {k: v for k, v in settings(tmp_path).items() if k in given}
    env_file = filled(AGENT_ENV, values, tmp_path / "agent.env")
    result = validate(config, env_file)
    assert result.returncode == 1
    line = first_line_of(config.read_text(), "bootstrap_servers: ${LOGFLUME_BOOTSTRAP_SERVERS}")
    assert (
        f"{config}:{line}:28: agents.web.sinks.access-kafka.bootstrap_servers: "
        "environment variable LOGFLUME_BOOTSTRAP_SERVERS is not set"
    ) in result.stderr
    errors = result.stderr.splitlines()[:-1]
    assert errors and all("is not set" in e for e in errors)
    assert {name for name in SETTINGS if name in result.stderr} == set(SETTINGS) - set(given)
    assert "s3cret" not in result.stdout + result.stderr


def test_what_the_template_ships(tmp_path):
    """deploy/README.md's account of it: access log parsed to nginx-access, error log
    raw to nginx-error, UDP on loopback to netcat, every source adding the host
    header, file channels, exactly-once over SASL_SSL with SCRAM-SHA-512."""
    config = relocated(PIPELINES, tmp_path)
    agents, errors = compile_text(config.read_text(), str(config), settings(tmp_path))
    assert errors == []
    (web,) = agents.values()
    assert web.name == "web"
    logs = tmp_path / "nginx"
    kinds = {name: source.cls.__module__ for name, source in web.sources.items()}
    assert kinds == {
        "access-log": "sources.tail",
        "error-log": "sources.tail",
        "netcat": "sources.udp",
    }
    assert web.sources["access-log"].config.paths == [f"{logs}/access.log"]
    assert web.sources["error-log"].config.paths == [f"{logs}/error.log"]
    assert web.sources["netcat"].config.listen == "127.0.0.1:8285"
    parsers = [i.cls.__module__ for i in web.sources["access-log"].interceptors]
    assert parsers == ["agent.interceptors.nginx"] and not web.sources["error-log"].interceptors
    assert all(source.config.add_host for source in web.sources.values())
    assert {c.cls.__module__ for c in web.channels.values()} == {"agent.channels.file"}
    topics = {}
    for source in web.sources.values():
        (channel,) = source.channels
        (sink,) = [k for k in web.sinks.values() if k.channel == channel]
        topics[source.name] = sink.config.topic
        assert sink.config.delivery == "exactly_once"
        assert sink.config.positions_topic == "logflume-positions"
        assert sink.config.dead_letter_topic is None  # <topic>.dlq
        assert sink.config.transactional_id is None  # logflume-<host>-web-<sink>
        assert sink.config.sasl.mechanism == "SCRAM-SHA-512" and sink.config.tls is not None
    assert topics == {"access-log": "nginx-access", "error-log": "nginx-error", "netcat": "netcat"}
