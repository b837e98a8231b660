"""The agent's Debian package (deploy/deb/build-agent-deb.sh): built from this tree's
wheel, installed with dpkg on this machine, the agent started as its unit starts it,
then purged. It ships the production agent's configuration (deploy/agent/) as its
conffiles, with the settings unset: it enables nothing. Systemd does not run here:
the maintainer scripts, run with stubs of the systemd tools on the PATH, call none
that needs it. (test_deb_upgrade.py upgrades and removes the package as if it ran.)

The build is offline: the dependencies' wheels come from the wheelhouse `make test`
fills in set-up (.venv/wheelhouse). Installing needs root and Debian's python3.11,
which deploy/system-deps.sh provides; the package owns /opt/logflume, so the test
refuses to run over a /opt/logflume that some other install made.
"""

import grp
import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from common.ports import free_port
from tests.deploy import udp_agent
from tests.deploy.debs import StubTools
from tests.deploy.template import AGENT_ENV, PIPELINES, REPO

UNIT = Path("/lib/systemd/system/logflume-agent@.service")
SYSCTL = Path("/etc/sysctl.d/60-logflume-agent.conf")
CONFFILES = {
    Path("/etc/logflume/pipelines.yaml"): PIPELINES,
    Path("/etc/logflume/agent.env"): AGENT_ENV,
    SYSCTL: REPO / "deploy" / "sysctl" / SYSCTL.name,
}


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> StubTools:
    return StubTools(tmp_path_factory.mktemp("stubs"))


@pytest.fixture(scope="module")
def installed(deb, stubs):
    """The package installed on this machine for the module's tests, purged after;
    dpkg runs the maintainer scripts with the stubs first on the PATH."""
    assert os.geteuid() == 0, "dpkg -i needs root (CI runs the suite as root)"
    owner = run(["dpkg-query", "-W", "-f=${Status}", "logflume-agent"])
    if "installed" not in owner.stdout:
        assert not Path("/opt/logflume").exists(), "/opt/logflume exists and is no package's"
    env = stubs.env(dict(os.environ), systemd=False)
    result = run(["dpkg", "-i", str(deb)], env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    yield result.stdout
    purged = run(["dpkg", "--purge", "logflume-agent"], env=env, stdin=subprocess.DEVNULL)
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert not Path("/opt/logflume").exists() and not Path("/usr/bin/logflume").exists()
    assert not [path for path in CONFFILES if path.exists()]
    assert stubs.calls() == []  # no unit enabled, systemd not running: nothing to call


def test_package_fields_and_contents(deb):
    fields = run(["dpkg-deb", "-f", str(deb)]).stdout
    assert re.search(r"^Package: logflume-agent$", fields, re.MULTILINE)
    assert re.search(r"^Depends: python3\.11", fields, re.MULTILINE)
    conffiles = run(["dpkg-deb", "-I", str(deb), "conffiles"]).stdout.split()
    assert conffiles == [str(path) for path in CONFFILES]
    listing = run(["dpkg-deb", "-c", str(deb)]).stdout
    modes = {line.split()[5].removeprefix("."): line.split()[0] for line in listing.splitlines()}
    paths = set(modes)
    assert {modes[path] for path in conffiles[:2]} == {"-rw-r-----"}  # credentials
    assert modes[str(SYSCTL)] == "-rw-r--r--"
    assert {
        "/usr/bin/logflume",
        "/opt/logflume/bin/logflume",
        "/lib/systemd/system/logflume-agent@.service",
        "/usr/share/man/man1/logflume.1.gz",
        "/usr/share/bash-completion/completions/logflume",
        "/usr/share/zsh/vendor-completions/_logflume",
    } <= paths
    assert not [p for p in paths if p.endswith(".pyc")]  # compiled by postinst
    assert not [p for p in paths if "/pyspark/" in p or "/kazoo/" in p]  # the agent only


def test_dpkg_install_sets_up_user_config_and_command(installed):
    user = pwd.getpwnam("logflume")
    for path, source in CONFFILES.items():
        assert path.read_text() == source.read_text()
        if path == SYSCTL:
            continue
        config = path.stat()
        assert config.st_mode & 0o777 == 0o640 and config.st_uid == 0
        assert config.st_gid == grp.getgrnam("logflume").gr_gid
    state = Path("/var/lib/logflume").stat()
    assert state.st_uid == user.pw_uid and state.st_mode & 0o777 == 0o750
    assert run(["/usr/bin/logflume", "--help"]).returncode == 0
    assert run(["man", "-w", "logflume"]).stdout.strip() == "/usr/share/man/man1/logflume.1.gz"
    # Debian's zsh has vendor-completions on its fpath, and compinit finds _logflume
    comps = "autoload -Uz compinit && compinit -u -D && print -rl $_comps[logflume] $^fpath/_logflume(N)"
    found = run(["zsh", "-f", "-c", comps]).stdout.splitlines()
    assert found[0] == "_logflume" and "/usr/share/zsh/vendor-completions/_logflume" in found
    assert list(Path("/opt/logflume/lib").rglob("__pycache__"))  # postinst compiled them


def test_the_package_enables_nothing_until_the_settings_are_given(installed):
    """agent.env ships with the settings unset: validate names them, with their line of
    pipelines.yaml; postinst says what to do and no unit is enabled."""
    assert "/etc/logflume/agent.env" in installed and "--env-file" in installed
    assert not list(Path("/etc/systemd/system").glob("*.wants/logflume-agent@*"))
    check = run(
        ["/usr/bin/logflume", "agent", "validate", "--config", "/etc/logflume/pipelines.yaml",
         "--env-file", "/etc/logflume/agent.env"],
        cwd="/",
    )  # fmt: skip
    assert check.returncode == 1
    assert re.search(
        r"^/etc/logflume/pipelines\.yaml:\d+:\d+: agents\.web\.sinks\.access-kafka\."
        r"bootstrap_servers: environment variable LOGFLUME_BOOTSTRAP_SERVERS is not set",
        check.stderr,
        re.MULTILINE,
    ), check.stderr


def test_the_installed_unit_verifies(installed, tmp_path):
    shutil.copy(UNIT, tmp_path / "logflume-agent@web.service")
    result = run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / "logflume-agent@web.service")]
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_agent_runs_as_its_unit_runs_it(installed):
    """ExecStartPre and ExecStart of the installed unit, as its User=, on a config an
    operator wrote: a UDP line comes out of the console sink."""
    port = free_port()
    Path("/etc/logflume/pipelines.yaml").write_text(udp_agent.config(port))
    state = Path("/var/lib/logflume/agent-web")
    shutil.rmtree(state, ignore_errors=True)  # a previous run's positions and channel
    unit = UNIT.read_text().replace("%i", "web")
    user = re.search(r"^User=(\S+)$", unit, re.MULTILINE)[1]
    pre = re.search(r"^ExecStartPre=(.+)$", unit, re.MULTILINE)[1].split()
    start = re.search(r"^ExecStart=(.+)$", unit, re.MULTILINE)[1].split()
    checked = run(["runuser", "-u", user, "--", *pre], cwd="/")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    line = "hello from a packaged agent"
    output = udp_agent.echoes(["runuser", "-u", user, "--", *start], port, line, cwd="/")
    assert output and output[-1].strip() == line, "".join(output)
    assert state.is_dir() and state.stat().st_uid == pwd.getpwnam(user).pw_uid


def test_the_packages_scripts_are_shellcheck_clean():
    scripts = [REPO / "deploy" / "deb" / name for name in ("postinst", "prerm", "postrm")]
    result = run(["shellcheck", str(REPO / "deploy" / "deb" / "build-agent-deb.sh"), *scripts])
    assert result.returncode == 0, result.stdout
