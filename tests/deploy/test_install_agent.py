"""deploy/install-agent.sh and deploy/systemd/: lint, a real trial install, unit checks.

The trial installs the production template (deploy/agent/), whose settings agent.env
leaves unset: the agent's unit is reported not enabled, with validate's errors.

The trial install reuses this virtualenv's site-packages (`--reuse-site-packages`) so
that pip resolves every dependency as already present and only builds logflume
itself: a real install, in seconds rather than the minutes pyspark's wheel takes.
"""

import configparser
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.deploy.template import AGENT_ENV, PIPELINES, filled, first_line_of, relocated, settings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "install-agent.sh"
UNITS = REPO / "deploy" / "systemd"


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)


def install(prefix: Path, *options: str):
    cmd = ["bash", str(SCRIPT), "--prefix", str(prefix), "--python", sys.executable, *options]
    cmd += ["--reuse-site-packages", sysconfig.get_path("purelib")]
    result = run(cmd)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def parse_unit(path: Path) -> configparser.ConfigParser:
    """systemd unit files are INI-like; keys may repeat (ExecReload), values are kept."""
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str
    parser.read_string(path.read_text())
    return parser


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("trial") / "logflume"
    out = install(prefix)
    return prefix, out


def test_script_is_valid_bash_and_shellcheck_clean():
    assert run(["bash", "-n", str(SCRIPT)]).returncode == 0
    result = run(["shellcheck", str(SCRIPT)])
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    "unit, expected",
    [
        (
            "logflume-agent@.service",
            {"User": "logflume", "Restart": "on-failure", "KillSignal": "SIGTERM"},
        ),
        (
            "logflume-broker@.service",
            {"User": "logflume", "Restart": "on-failure", "KillSignal": "SIGTERM"},
        ),
    ],
)
def test_units_have_the_service_basics(unit, expected):
    service = parse_unit(UNITS / unit)["Service"]
    for key, value in expected.items():
        assert service[key] == value
    assert int(service["LimitNOFILE"]) >= 65536
    assert int(service["TimeoutStopSec"]) > 10
    assert service["ProtectSystem"] == "strict" and service["NoNewPrivileges"] == "yes"
    assert "/opt/logflume/bin/logflume" in service["ExecStart"]


def test_agent_unit_reloads_with_sighup_and_broker_unit_is_per_id():
    agent = (UNITS / "logflume-agent@.service").read_text()
    assert "ExecReload=/bin/kill -HUP $MAINPID" in agent
    assert "--name %i" in agent
    broker = parse_unit(UNITS / "logflume-broker@.service")["Service"]["ExecStart"]
    assert "--config /etc/logflume/broker-%i.properties" in broker
    assert "--data-dir /var/lib/logflume/broker-%i" in broker


def test_trial_install_gives_a_working_agent_validate(trial, tmp_path):
    """The installed template and agent.env, filled in as an operator does (the nginx
    logs moved into tmp_path), pass the installed `logflume agent validate`."""
    prefix, _ = trial
    etc = prefix / "etc" / "logflume"
    assert (etc / "pipelines.yaml").read_text() == PIPELINES.read_text()
    assert (etc / "agent.env").read_text() == AGENT_ENV.read_text()
    config = relocated(etc / "pipelines.yaml", tmp_path)
    env_file = filled(etc / "agent.env", settings(tmp_path), tmp_path / "agent.env")
    validate = [str(prefix / "bin" / "logflume"), "agent", "validate", "--config", str(config)]
    result = run([*validate, "--env-file", str(env_file)], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # the installed code is a copy, not a link back into the source tree
    code = run(
        [str(prefix / "bin" / "python"), "-c", "import agent; print(agent.__file__)"],
        cwd=tmp_path,
    )
    assert code.stdout.strip().startswith(str(prefix))


def test_trial_install_reports_the_unit_not_enabled_with_validates_errors(trial):
    """agent.env's settings are unset: the unit is not enabled, validate's errors are
    shown (each with its line of pipelines.yaml), then the steps left."""
    prefix, out = trial
    etc = prefix / "etc" / "logflume"
    config, env_file = etc / "pipelines.yaml", etc / "agent.env"
    assert (
        f"install-agent: logflume-agent@web is NOT enabled: {config} does not validate "
        f"with the settings of {env_file}:"
    ) in out
    shown = out.split(f"with the settings of {env_file}:\n", 1)[1].split("install-agent: done.")[0]
    assert all(line.startswith("    ") for line in shown.splitlines())
    *errors, count = (line.strip() for line in shown.splitlines())
    assert re.fullmatch(rf"\d+ error\(s\) in {re.escape(str(config))}", count)
    # the unset settings; and on a machine without nginx, its log directory
    assert all("is not set" in e or "/var/log/nginx" in e for e in errors), shown
    line = first_line_of(PIPELINES.read_text(), "${LOGFLUME_BOOTSTRAP_SERVERS}")
    assert (
        f"{config}:{line}:28: agents.web.sinks.access-kafka.bootstrap_servers: environment "
        "variable LOGFLUME_BOOTSTRAP_SERVERS is not set" in shown
    )
    logflume = prefix / "bin" / "logflume"
    assert f"  edit     {env_file}" in out
    assert f"  check    {logflume} agent validate --config {config} --env-file {env_file}\n" in out
    assert f"  start    {logflume} agent run --config {config} --env-file {env_file}" in out


def test_trial_units_point_into_the_prefix_and_verify(trial, tmp_path):
    prefix, _ = trial
    unit_dir = prefix / "etc" / "systemd" / "system"
    for template, instance in [
        ("logflume-agent@.service", "web"),
        ("logflume-broker@.service", "1"),
    ]:
        service = parse_unit(unit_dir / template)["Service"]
        exe = service["ExecStart"].split()[0]
        assert exe == str(prefix / "bin" / "logflume") and os.access(exe, os.X_OK)
        assert "/opt/logflume" not in (unit_dir / template).read_text()
        shutil.copy(unit_dir / template, tmp_path / template.replace("@", f"@{instance}"))
    for other in unit_dir.iterdir():  # the offline Spark job's service and timer
        if "@" not in other.name:
            shutil.copy(other, tmp_path / other.name)
    units = sorted(str(p) for p in tmp_path.iterdir())
    result = run(["systemd-analyze", "verify", "--man=no", *units])
    assert result.returncode == 0, result.stdout + result.stderr


def test_second_install_keeps_the_operators_configuration(trial):
    """Even with --demo-config: pipelines.yaml and agent.env are the operator's."""
    prefix, _ = trial
    etc = prefix / "etc" / "logflume"
    edited = {}
    for name in ("pipelines.yaml", "agent.env"):
        edited[name] = (etc / name).read_text() + "# edited by the operator\n"
        (etc / name).write_text(edited[name])
    out = install(prefix, "--demo-config")
    for name, text in edited.items():
        assert f"keeping existing {etc / name}" in out
        assert (etc / name).read_text() == text


def test_unknown_option_is_refused():
    result = run(["bash", str(SCRIPT), "--bogus"])
    assert result.returncode != 0 and "unknown option: --bogus" in result.stderr


def test_trial_install_prepares_the_cron_line_and_guards_the_config(trial):
    """The offline job's cron line (share/logflume/, paths pointing into the prefix)
    finds the directories it locks and logs in; pipelines.yaml and agent.env, which
    may hold credentials, are not world-readable."""
    prefix, _ = trial
    cron = (prefix / "share" / "logflume" / "logflume-etl-offline.cron").read_text()
    (line,) = [x for x in cron.splitlines() if x and not x.startswith(("#", "SHELL"))]
    words = line.split()
    lock = Path(words[words.index("-n") + 1])
    log = Path(words[words.index(">>") + 1])
    assert lock.is_relative_to(prefix) and log.is_relative_to(prefix)
    assert lock.parent.is_dir() and log.parent.is_dir()
    assert words[words.index("-n") + 2] == str(prefix / "bin" / "logflume")
    for name in ("pipelines.yaml", "agent.env"):  # agent.env: the secrets for ${VAR}
        assert (prefix / "etc" / "logflume" / name).stat().st_mode & 0o777 == 0o640


def test_trial_install_brings_the_man_page_and_bash_completion(trial):
    prefix, _ = trial
    page = prefix / "share" / "man" / "man1" / "logflume.1"
    shown = run(["man", "-l", str(page)], env={**os.environ, "MANPAGER": "cat"})
    assert shown.returncode == 0 and "logflume agent run" in shown.stdout, shown.stderr
    completion = prefix / "share" / "bash-completion" / "completions" / "logflume"
    loaded = run(["bash", "--norc", "-c", f"source {completion} && complete -p logflume"])
    assert loaded.returncode == 0 and loaded.stdout.startswith("complete "), loaded.stderr


@pytest.mark.parametrize(
    "unit",
    [
        UNITS / "logflume-agent@.service",
        UNITS / "logflume-broker@.service",
        REPO / "deploy" / "etl" / "logflume-etl-offline.service",
    ],
    ids=lambda p: p.name,
)
def test_every_unit_is_hardened(unit, tmp_path):
    """`systemd-analyze security` rates each unit below 5 ("OK"; 10 is fully exposed)."""
    copy = tmp_path / unit.name.replace("@", "@1")
    shutil.copy(unit, copy)
    result = run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(copy)])
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert found, result.stdout + result.stderr
    assert float(found.group(1)) < 5, result.stdout


def test_broker_unit_fails_loudly_without_its_properties():
    """A missing config file is an error (AssertPathExists), not a silent skip."""
    unit = parse_unit(UNITS / "logflume-broker@.service")["Unit"]
    assert unit["AssertPathExists"] == "/etc/logflume/broker-%i.properties"
    assert "ConditionPathExists" not in unit
