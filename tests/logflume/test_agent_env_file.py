"""`logflume agent validate|run --env-file FILE`: the variables of a systemd
EnvironmentFile for `${NAME}` in pipelines.yaml, winning over the environment."""

import json
import os
import socket
import subprocess
import sys
import threading

from common.ports import free_port

PIPELINES = (
    "agents:\n  solo:\n    sources:\n"
    "      u: {type: udp, listen: '127.0.0.1:${LF_TEST_PORT}', add_host: true, channels: [c]}\n"
    "    channels:\n      c: {type: memory}\n"
    "    sinks:\n      out: {type: console, channel: c, format: '${LF_TEST_FORMAT}'}\n"
)


def logflume(*args, env=None, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "logflume", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def test_validate_takes_the_files_variables_over_the_environment(tmp_path):
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINES)
    env_file = tmp_path / "agent.env"
    env_file.write_text("# the unit's settings\nLF_TEST_FORMAT='json'\n")
    environment = {"LF_TEST_PORT": "8285", "LF_TEST_FORMAT": "yaml"}  # no such format
    without = logflume("agent", "validate", "--config", str(config), env=environment)
    assert without.returncode == 1 and "format" in without.stderr
    checked = logflume(
        "agent", "validate", "--config", str(config), "--env-file", str(env_file), env=environment
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "OK: agents solo"


def test_validate_names_an_unset_variable_the_file_does_not_give(tmp_path):
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINES)
    env_file = tmp_path / "agent.env"
    env_file.write_text("LF_TEST_FORMAT=raw\n")
    result = logflume("agent", "validate", "--config", str(config), "--env-file", str(env_file))
    assert result.returncode == 1
    assert f"{config}:4:" in result.stderr and "LF_TEST_PORT is not set" in result.stderr
    assert "LF_TEST_FORMAT" not in result.stderr


def test_a_malformed_or_missing_env_file_is_an_error_naming_it(tmp_path):
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINES)
    env_file = tmp_path / "agent.env"
    env_file.write_text("LF_TEST_PORT=8285\nexport LF_TEST_FORMAT=raw\n")
    for command in ("validate", "run"):
        bad = logflume("agent", command, "--config", str(config), "--env-file", str(env_file))
        assert bad.returncode == 1
        assert f"{env_file}:2: 'export LF_TEST_FORMAT' is not a variable name" in bad.stderr
    missing = tmp_path / "missing.env"
    gone = logflume("agent", "validate", "--config", str(config), "--env-file", str(missing))
    assert gone.returncode == 1 and f"{missing}: cannot read" in gone.stderr


def test_run_gives_the_files_variables_to_the_agent(tmp_path):
    """The port and format come from the file, and so does HOST, which the agent's
    `add_host` header reads at run time, as under systemd's EnvironmentFile=."""
    port = free_port()
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINES)
    env_file = tmp_path / "agent.env"
    env_file.write_text(f"LF_TEST_PORT={port}\nLF_TEST_FORMAT=json\nHOST=from-the-env-file\n")
    cmd = [sys.executable, "-m", "logflume", "agent", "run", "--config", str(config)]
    cmd += ["--env-file", str(env_file), "--state-dir", str(tmp_path / "state")]
    agent = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HOST": "from-the-process"},
    )
    printed = threading.Event()

    def send() -> None:  # until the agent has bound its port and printed the line
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(150):
                if printed.wait(0.2):
                    break
                s.sendto(b"hello\n", ("127.0.0.1", port))
        agent.terminate()

    sender = threading.Thread(target=send)
    sender.start()
    try:
        line = agent.stdout.readline()
    finally:
        printed.set()
        sender.join()
        agent.wait(30)
    event = json.loads(line)
    assert (event["message"], event["host"]) == ("hello", "from-the-env-file")
