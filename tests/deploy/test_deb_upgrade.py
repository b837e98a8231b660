"""Upgrading the agent's Debian package under a running agent, then removing and
purging it.

Two .debs of this tree: the newer is the tree's own, the older the same code under an
older version (its wheel rewritten, tests/deploy/wheels.py), built side by side. The
older is installed with dpkg, the operator's edits made (pipelines.yaml and agent.env
pointed at a broker on loopback, a note in /var/lib/logflume), and an agent started
from it as its unit starts it (the unit's user, its `agent run`) tails a log into the
broker, exactly once, while the test keeps writing lines. Then `dpkg -i` of the newer
package, the agent still running.

Systemd does not run here. The maintainer scripts get stubs of systemctl,
deb-systemd-invoke and deb-systemd-helper first on the PATH, which record their
arguments, and LOGFLUME_RUN_SYSTEMD_SYSTEM naming a directory that exists (the
scripts' stand-in for /run/systemd/system): they act as on a host booted with systemd.
The test restarts the agent from the new package itself, standing in for the
try-restart the stubs recorded, and checks that every line written reached the topic
once. Root is needed, as for test_deb.py.
"""

import grp
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

import logflume
from common.ports import free_port
from testkit.agent import read_topic
from testkit.kafka import create_topic
from tests.deploy.debs import StubTools, build_deb
from tests.deploy.template import filled
from tests.deploy.wheels import rewritten

OLD = "0.0.9"  # the older package's version; the newer is this tree's
NEW = logflume.__version__
TOPIC = "upgrade-lines"
PIPELINES = Path("/etc/logflume/pipelines.yaml")
AGENT_ENV = Path("/etc/logflume/agent.env")
SYSCTL = Path("/etc/sysctl.d/60-logflume-agent.conf")
STATE = Path("/var/lib/logflume")
NOTE = STATE / "operator-note"
LOGFLUME = "/opt/logflume/bin/logflume"
WANTS = Path("/etc/systemd/system/multi-user.target.wants")
ENABLED = WANTS / "logflume-agent@web.service"  # as `systemctl enable logflume-agent@web`


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)


def dpkg(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """dpkg, never asking: a conffile question would read end-of-file and fail."""
    return run(["dpkg", *args], env=env, stdin=subprocess.DEVNULL)


def rmem_max() -> int:
    return int(Path("/proc/sys/net/core/rmem_max").read_text())


class Agent:
    """`logflume agent run` of the installed package, as logflume-agent@web runs it:
    its User= and Group= (with the user's other groups, as systemd gives them), / as
    working directory, the settings of agent.env."""

    def __init__(self, metrics_port: int, log: Path):
        self.metrics_port = metrics_port
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Agent":
        user = pwd.getpwnam("logflume")
        cmd = [LOGFLUME, "agent", "run", "--config", str(PIPELINES), "--env-file", str(AGENT_ENV)]
        cmd += ["--name", "web", "--state-dir", str(STATE / "agent-web")]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(STATE), "PYTHONUNBUFFERED": "1"}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                user=user.pw_uid,
                group=user.pw_gid,
                extra_groups=os.getgrouplist("logflume", user.pw_gid),
                cwd="/",
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while self.health() != 200:
            assert self.proc.poll() is None, f"the agent exited:\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"agent not healthy:\n{self.log.read_text()}"
            time.sleep(0.1)
        return self

    def health(self) -> int | None:
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/health"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def stop(self) -> int | None:
        """SIGTERM, as systemctl stop sends it (the agent drains its channels)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise


class Writer(threading.Thread):
    """Appends numbered lines to the access log, about a thousand a second, until
    stopped: `written` of them."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.written = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        with open(self.path, "a") as log:
            while not self.stopped.is_set():
                for _ in range(20):
                    log.write(f"upgrade line {self.written:06d}\n")
                    self.written += 1
                log.flush()
                time.sleep(0.02)

    def stop(self) -> list[str]:
        self.stopped.set()
        self.join(10)
        return [f"upgrade line {n:06d}" for n in range(self.written)]


def committed_lines(bootstrap: str) -> list[str]:
    """Every committed record of TOPIC, to the end of its log (read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "logflume-upgrade-test",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    lines: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is None:
                lines.append(msg.value().decode())
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                return lines
        raise TimeoutError(f"{TOPIC}: no end of partition after 60 s ({len(lines)} read)")
    finally:
        consumer.close()


@dataclass
class Upgrade:
    """What the module's one upgrade saw, for the tests to check."""

    stubs: StubTools
    env: dict[str, str]  # dpkg's environment: the stubs, systemd "running"
    installed: subprocess.CompletedProcess  # dpkg -i of the older package
    upgraded: subprocess.CompletedProcess  # dpkg -i of the newer, the agent running
    calls: dict[str, list[str]] = field(default_factory=dict)  # by step
    versions: dict[str, str] = field(default_factory=dict)  # `logflume --version`, by step
    edited: dict[Path, str] = field(default_factory=dict)  # the operator's conffiles
    after: dict[Path, str] = field(default_factory=dict)  # ... after the upgrade
    note: str = ""  # the operator's file in /var/lib/logflume
    positions_before: set[str] = field(default_factory=set)  # agent-web's files
    positions_after: set[str] = field(default_factory=set)
    old_agent_ran_through_dpkg: bool = False
    old_agent_exit: int | None = None
    written: list[str] = field(default_factory=list)
    shipped: list[str] = field(default_factory=list)  # TOPIC, committed
    rmem_max: tuple[int, int] = (0, 0)  # before and after installing


@pytest.fixture(scope="module")
def debs(wheel, tmp_path_factory, request) -> tuple[Path, Path]:
    """The older .deb, built here, and the newer, this tree's (`deb`, which
    test_deb.py may have built already), built side by side."""
    older = rewritten(wheel, tmp_path_factory.mktemp("old-wheel"), version=OLD)
    with ThreadPoolExecutor(1) as pool:
        old = pool.submit(build_deb, older, tmp_path_factory.mktemp("old-deb"))
        new = request.getfixturevalue("deb")
        return old.result(), new


@pytest.fixture(scope="module")
def upgrade(debs, module_broker, tmp_path_factory):
    old_deb, new_deb = debs
    assert os.geteuid() == 0, "dpkg -i needs root (CI runs the suite as root)"
    stubs = StubTools(tmp_path_factory.mktemp("stubs"))
    env = stubs.env(dict(os.environ), systemd=True)
    if "installed" in run(["dpkg-query", "-W", "-f=${Status}", "logflume-agent"]).stdout:
        assert dpkg("--purge", "logflume-agent", env=env).returncode == 0  # a failed run's
    assert not Path("/opt/logflume").exists(), "/opt/logflume exists and is no package's"
    assert not ENABLED.exists(), f"{ENABLED} exists: is an agent enabled on this machine?"
    rmem_before = rmem_max()
    installed = dpkg("-i", str(old_deb), env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    seen = Upgrade(stubs, env, installed, installed)
    seen.calls["install"] = stubs.calls()
    seen.rmem_max = (rmem_before, rmem_max())
    seen.versions["installed"] = run([LOGFLUME, "--version"], cwd="/").stdout.strip()

    # The operator's edits: the agent pointed at the broker, and a file of theirs.
    logs = Path(tempfile.mkdtemp(prefix="logflume-upgrade-"))
    logs.chmod(0o755)  # the agent runs as logflume
    access_log = logs / "access.log"
    access_log.touch(mode=0o644)
    metrics_port = free_port()
    PIPELINES.write_text(
        "# the operator's: one log, exactly once to the brokers of agent.env\n"
        "agents:\n  web:\n"
        f"    metrics: {{listen: '127.0.0.1:{metrics_port}'}}\n"
        "    sources:\n"
        f"      access-log: {{type: tail, paths: ['{access_log}'], start_at: beginning,"
        " channels: [access]}\n"
        "    channels:\n      access: {type: file}\n"
        "    sinks:\n"
        f"      access-kafka: {{type: kafka, channel: access, topic: {TOPIC},"
        " delivery: exactly_once, bootstrap_servers: '${LOGFLUME_BOOTSTRAP_SERVERS}'}\n"
    )
    filled(AGENT_ENV, {"LOGFLUME_BOOTSTRAP_SERVERS": module_broker.bootstrap}, AGENT_ENV)
    seen.edited = {path: path.read_text() for path in (PIPELINES, AGENT_ENV)}
    shutil.rmtree(STATE / "agent-web", ignore_errors=True)  # test_deb.py's agent's
    seen.note = "kept across upgrades\n"
    NOTE.write_text(seen.note)
    create_topic(module_broker.bootstrap, TOPIC)

    agent_log = tmp_path_factory.mktemp("agent") / "agent.log"
    old_agent = Agent(metrics_port, agent_log).start()
    new_agent = Agent(metrics_port, agent_log)
    writer = Writer(access_log)
    writer.start()
    try:
        got = read_topic(module_broker.bootstrap, TOPIC, lambda m: len(m) >= 100, 60)
        assert len(got) >= 100, f"the old agent shipped {len(got)} lines:\n{agent_log.read_text()}"
        seen.positions_before = {p.name for p in (STATE / "agent-web").iterdir()}

        seen.upgraded = dpkg("-i", str(new_deb), env=env)
        assert seen.upgraded.returncode == 0, seen.upgraded.stdout + seen.upgraded.stderr
        seen.calls["upgrade"] = stubs.calls()
        seen.versions["upgraded"] = run([LOGFLUME, "--version"], cwd="/").stdout.strip()
        seen.after = {path: path.read_text() for path in (PIPELINES, AGENT_ENV)}
        seen.positions_after = {p.name for p in (STATE / "agent-web").iterdir()}
        seen.old_agent_ran_through_dpkg = old_agent.proc.poll() is None

        # What systemd's try-restart does, the stubs having recorded it: stop, start.
        seen.old_agent_exit = old_agent.stop()
        new_agent.start()
        time.sleep(1)  # lines the new agent takes from the start
        seen.written = writer.stop()
        last = seen.written[-1].encode()
        read_topic(module_broker.bootstrap, TOPIC, lambda m: any(x.value() == last for x in m))
    finally:
        seen.written = seen.written or writer.stop()
        old_agent.stop()
        new_agent.stop()
    seen.shipped = committed_lines(module_broker.bootstrap)
    yield seen

    # normally test_remove_and_purge_... purged it already
    if "installed" in run(["dpkg-query", "-W", "-f=${Status}", "logflume-agent"]).stdout:
        dpkg("--purge", "logflume-agent", env=env)
    shutil.rmtree(logs, ignore_errors=True)
    NOTE.unlink(missing_ok=True)


def test_the_newer_version_is_installed(upgrade):
    assert upgrade.versions == {"installed": f"logflume {OLD}", "upgraded": f"logflume {NEW}"}
    status = run(["dpkg-query", "-W", "-f=${Version} ${Status}", "logflume-agent"]).stdout
    assert status == f"{NEW}-1 install ok installed"
    assert f"logflume-agent: upgraded from {OLD}-1; logflume {NEW}" in upgrade.upgraded.stdout


def test_the_upgrade_keeps_the_operators_conffiles_and_state(upgrade):
    """The conffiles are the same in both packages: dpkg keeps the edited ones without
    asking. /var/lib/logflume is the operator's and the agent's."""
    assert upgrade.after == upgrade.edited
    assert "# the operator's" in upgrade.after[PIPELINES]
    assert "LOGFLUME_BOOTSTRAP_SERVERS=" in upgrade.after[AGENT_ENV]
    for path in upgrade.after:
        mode = path.stat()
        assert mode.st_mode & 0o777 == 0o640 and mode.st_gid == grp.getgrnam("logflume").gr_gid
    assert NOTE.read_text() == upgrade.note
    assert upgrade.positions_before and upgrade.positions_before <= upgrade.positions_after


def test_the_upgrade_restarts_the_running_agents_as_debhelper_does(upgrade):
    """A first install reloads systemd and starts nothing; the upgrade stops nothing
    (prerm upgrade) and try-restarts the agents that run, through deb-systemd-invoke
    (which asks policy-rc.d)."""
    assert upgrade.calls["install"] == ["systemctl --system daemon-reload"]
    assert upgrade.calls["upgrade"] == [
        "systemctl --system daemon-reload",
        "deb-systemd-invoke try-restart logflume-agent@*.service",
    ]
    assert "running logflume-agent@ units restarted (try-restart)" in upgrade.upgraded.stdout


def test_no_line_is_lost_or_doubled_across_the_upgrade(upgrade):
    """The old agent ran while dpkg replaced its code; stopped (SIGTERM) and started
    again from the new package, it resumed from the positions it committed."""
    assert upgrade.old_agent_ran_through_dpkg and upgrade.old_agent_exit == 0
    assert len(upgrade.written) > 1000
    assert sorted(upgrade.shipped) == upgrade.written


def test_the_sysctl_file_is_a_conffile_not_applied(upgrade):
    shipped = Path(__file__).parents[2] / "deploy" / "sysctl" / SYSCTL.name
    assert SYSCTL.read_text() == shipped.read_text()
    assert upgrade.rmem_max[0] == upgrade.rmem_max[1]
    assert "sysctl --system" in upgrade.installed.stdout


POSTINST = "/var/lib/dpkg/info/logflume-agent.postinst"


def test_an_upgrade_leaves_the_agents_alone_on_a_configuration_the_new_code_refuses(upgrade):
    """postinst of an upgrade, run again as dpkg runs it, on a pipelines.yaml the
    installed code finds invalid: the unit's ExecStartPre would refuse to start the
    agents again, so they are not restarted, and it says so."""
    PIPELINES.write_text("agents:\n  web:\n    sources: {nc: {type: no-such-source}}\n")
    try:
        result = run(["/bin/sh", POSTINST, "configure", f"{OLD}-1"], env=upgrade.env)
    finally:
        PIPELINES.write_text(upgrade.edited[PIPELINES])
    assert result.returncode == 0, result.stdout + result.stderr
    assert upgrade.stubs.calls() == ["systemctl --system daemon-reload"]
    assert "running logflume-agent@ units NOT restarted" in result.stdout


def test_without_deb_systemd_invoke_the_upgrade_restarts_with_systemctl(upgrade, tmp_path):
    """deb-systemd-invoke (init-system-helpers) missing: postinst falls back to
    systemctl. The PATH holds only the tools postinst runs."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("getent", "useradd", "usermod", "install", "chgrp", "chmod", "runuser"):
        found = shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")
        assert found, f"no {tool}"
        (tools / tool).symlink_to(found)
    (tools / "systemctl").symlink_to(upgrade.stubs.bin / "systemctl")
    env = {**upgrade.env, "PATH": str(tools)}
    result = run(["/bin/sh", POSTINST, "configure", f"{OLD}-1"], env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert upgrade.stubs.calls() == [
        "systemctl --system daemon-reload",
        "systemctl try-restart logflume-agent@*.service",
    ]


def test_remove_stops_and_disables_the_agents_and_purge_forgets_them(upgrade):
    """With logflume-agent@web enabled (its link, as `systemctl enable` makes it):
    remove stops the agents and disables it, purge forgets it; both reload systemd.
    /var/lib/logflume and the user stay."""
    made_wants = not WANTS.exists()
    WANTS.mkdir(parents=True, exist_ok=True)
    ENABLED.symlink_to("/lib/systemd/system/logflume-agent@.service")
    try:
        removed = dpkg("--remove", "logflume-agent", env=upgrade.env)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert upgrade.stubs.calls() == [
            "deb-systemd-invoke stop logflume-agent@*.service",
            "deb-systemd-helper disable logflume-agent@web.service",
            # the stub removed no link: as for a unit enabled by systemctl, not by it
            "systemctl --no-reload disable logflume-agent@web.service",
            "systemctl --system daemon-reload",
        ]
        assert PIPELINES.exists() and not Path("/opt/logflume").exists()
        purged = dpkg("--purge", "logflume-agent", env=upgrade.env)
        assert purged.returncode == 0, purged.stdout + purged.stderr
        assert upgrade.stubs.calls() == [
            "deb-systemd-helper purge logflume-agent@web.service",
            "systemctl --system daemon-reload",
        ]
    finally:
        ENABLED.unlink()
        if made_wants:
            WANTS.rmdir()
    assert not [p for p in (PIPELINES, AGENT_ENV, SYSCTL) if p.exists()]
    assert NOTE.read_text() == upgrade.note and (STATE / "agent-web").is_dir()
    pwd.getpwnam("logflume")
