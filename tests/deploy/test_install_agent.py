"""deploy/install-agent.sh and deploy/systemd/: lint, a real trial install, unit checks,
re-runs that upgrade in place, and system installs in a private mount namespace.

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

import logflume
from tests.deploy.template import AGENT_ENV, PIPELINES, filled, first_line_of, relocated, settings
from tests.deploy.wheels import rewritten

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "install-agent.sh"
UNITS = REPO / "deploy" / "systemd"
SYSCTL = REPO / "deploy" / "sysctl" / "60-logflume-agent.conf"


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


def test_trial_install_brings_the_man_page_and_bash_and_zsh_completion(trial):
    prefix, _ = trial
    page = prefix / "share" / "man" / "man1" / "logflume.1"
    shown = run(["man", "-l", str(page)], env={**os.environ, "MANPAGER": "cat"})
    assert shown.returncode == 0 and "logflume agent run" in shown.stdout, shown.stderr
    completion = prefix / "share" / "bash-completion" / "completions" / "logflume"
    loaded = run(["bash", "--norc", "-c", f"source {completion} && complete -p logflume"])
    assert loaded.returncode == 0 and loaded.stdout.startswith("complete "), loaded.stderr
    # zsh: compinit, with site-functions on the fpath, makes _logflume complete logflume
    functions = prefix / "share" / "zsh" / "site-functions"
    assert (functions / "_logflume").read_text().startswith("#compdef logflume\n")
    comps = "autoload -Uz compinit && compinit -u -D && print -r -- $_comps[logflume]"
    loaded = run(["zsh", "-f", "-c", f"fpath=($1 $fpath) && {comps}", "zsh", str(functions)])
    assert loaded.returncode == 0 and loaded.stdout == "_logflume\n", loaded.stderr


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


def test_a_broker_host_gets_the_c_records_check_from_the_tree(tmp_path):
    """The broker extra requires logflume-recordscheck, which no index has: the script
    builds it from native/recordscheck beside the pure-Python logflume wheel."""
    prefix = tmp_path / "logflume"
    install(prefix, "--extras", "broker", "--no-enable")
    check = "import importlib.metadata as m; from broker.protocol import records; "
    check += "print(m.version('logflume-recordscheck'), records._fast_check is not None)"
    out = run([str(prefix / "bin" / "python"), "-I", "-c", check])
    assert out.stdout.split() == ["0.2.0", "True"], out.stdout + out.stderr


def test_a_spark_host_gets_the_c_record_decoding_from_the_tree(tmp_path):
    """The etl extra requires logflume-recordscheck too: the Spark source decodes
    fetched records with its decode_batches."""
    prefix = tmp_path / "logflume"
    install(prefix, "--extras", "etl", "--no-enable")
    check = "import importlib.metadata as m; from logflume_recordscheck import decode_batches; "
    check += "print(m.version('logflume-recordscheck'))"
    out = run([str(prefix / "bin" / "python"), "-I", "-c", check])
    assert out.stdout.split() == ["0.2.0"], out.stdout + out.stderr


PARSER_FILE = "import logflume_nginxparse, agent.interceptors.nginx as n; "
PARSER_FILE += "print(logflume_nginxparse.__file__, n.native_combined is not None)"


def test_a_web_host_gets_the_c_nginx_parser_from_the_tree(trial):
    """The agent's nginx parser in C (native/nginxparse) is built and installed with
    the agent, and the installed agent parses with it."""
    prefix, out = trial
    assert "installed the nginx parser in C (logflume_nginxparse-0.1.0-" in out, out
    result = run([str(prefix / "bin" / "python"), "-I", "-c", PARSER_FILE])
    where, used = result.stdout.split()
    assert where.startswith(str(prefix)) and used == "True", result.stdout + result.stderr


def test_without_a_c_compiler_the_agent_installs_without_the_c_parser(tmp_path):
    """The C parser is optional: where it does not build, the install says so and
    goes on (the agent then parses every line with the reference parser)."""
    prefix = tmp_path / "logflume"
    cmd = ["bash", str(SCRIPT), "--prefix", str(prefix), "--python", sys.executable]
    cmd += ["--reuse-site-packages", sysconfig.get_path("purelib"), "--no-enable"]
    result = run(cmd, env={**os.environ, "CC": "false"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the nginx parser in C did not build" in result.stdout, result.stdout
    assert not list(prefix.glob("lib/python*/site-packages/logflume_nginxparse*"))
    validate = run([str(prefix / "bin" / "logflume"), "agent", "--help"])
    assert validate.returncode == 0, validate.stderr


def test_an_agent_install_from_a_wheel_takes_the_c_parser_beside_it(wheel, tmp_path):
    """`make dist` puts logflume_nginxparse-*.whl beside the logflume wheel: --wheel
    installs it; one for another platform is said and left out."""
    dist = tmp_path / "dist"
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    build += ["--no-build-isolation", "--wheel-dir", str(dist), str(REPO / "native/nginxparse")]
    assert run(build).returncode == 0
    shutil.copy(wheel, dist / wheel.name)
    prefix = tmp_path / "logflume"
    out = install(prefix, "--wheel", str(dist / wheel.name), "--no-enable")
    assert "installed the nginx parser in C (logflume_nginxparse-0.1.0-" in out, out
    result = run([str(prefix / "bin" / "python"), "-I", "-c", PARSER_FILE])
    where, used = result.stdout.split()
    assert where.startswith(str(prefix)) and used == "True", result.stdout + result.stderr

    (built,) = dist.glob("logflume_nginxparse-*.whl")
    built.rename(dist / "logflume_nginxparse-0.1.0-cp311-cp311-win_amd64.whl")
    other = install(tmp_path / "other", "--wheel", str(dist / wheel.name), "--no-enable")
    assert "logflume_nginxparse-0.1.0-cp311-cp311-win_amd64.whl does not install here" in other
    assert not list((tmp_path / "other").glob("lib/python*/site-packages/logflume_nginxparse*"))


def test_a_broker_install_from_a_wheel_wants_the_records_check_beside_it(wheel, tmp_path):
    alone = tmp_path / "dist"
    alone.mkdir()
    shutil.copy(wheel, alone / wheel.name)
    cmd = ["bash", str(SCRIPT), "--prefix", str(tmp_path / "lf"), "--python", sys.executable]
    cmd += ["--wheel", str(alone / wheel.name), "--extras", "agent,broker", "--no-enable"]
    result = run(cmd)
    assert result.returncode == 1
    assert "needs logflume_recordscheck-*.whl beside" in result.stderr, result.stderr


def test_the_agent_unit_yields_to_nginx_within_limits():
    """Beside nginx (CPUWeight 100, the default) the agent gets less CPU under
    contention, and its memory is bounded: reclaimed above MemoryHigh, capped at
    MemoryMax. The comment says how to change them."""
    text = (UNITS / "logflume-agent@.service").read_text()
    service = parse_unit(UNITS / "logflume-agent@.service")["Service"]
    mib = {"M": 1, "G": 1024}
    high, top = (int(service[k][:-1]) * mib[service[k][-1]] for k in ("MemoryHigh", "MemoryMax"))
    assert 0 < high < top <= 4096
    assert 0 < int(service["CPUWeight"]) < 100
    assert "systemctl edit logflume-agent@web" in text and "drop-in" in text


def test_the_sysctl_file_raises_rmem_max_to_the_udp_sources_buffer():
    """60-logflume-agent.conf gives a UDP source the receive buffer it asks for by
    default (rcvbuf_bytes), and names the warning the agent logs without it."""
    from sources.udp import UdpConfig

    settings = [line for line in SYSCTL.read_text().splitlines() if line and line[0] != "#"]
    assert settings == [f"net.core.rmem_max={int(UdpConfig().rcvbuf_bytes)}"]
    assert "udp: receive buffer capped at" in SYSCTL.read_text()
    udp = (REPO / "sources" / "udp.py").read_text()
    assert '"udp: receive buffer capped at %d bytes' in udp  # the agent's own words


def test_runs_again_upgrade_in_place_and_never_enable_the_demo_config(wheel, tmp_path):
    """Run again, the script upgrades in place: a wheel of the same version with other
    code (pip alone would keep the installed one) replaces the code, a newer version
    replaces it too; the dependencies are left alone (--no-deps). The demo's pipelines
    (--demo-config) validate, yet no unit is enabled on them, nor on a later run
    without the option (the file is kept), and the script says why. The sysctl file
    comes with --udp-buffer-sysctl only."""
    prefix = tmp_path / "logflume"
    version = logflume.__version__
    python = prefix / "bin" / "python"
    config = prefix / "etc" / "logflume" / "pipelines.yaml"
    sysctl = prefix / "etc" / "sysctl.d" / SYSCTL.name
    demo = f"install-agent: logflume-agent@web is NOT enabled: {config} is the demo's"
    first = install(prefix, "--wheel", str(wheel), "--demo-config")
    assert f"install-agent: installed logflume {version} into {prefix}\n" in first
    assert demo in first and config.read_text() == (REPO / "pipelines.yaml").read_text()
    assert not sysctl.parent.exists() and "sysctl" not in first
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    listed = [str(python), "-m", "pip", "list", "--format=freeze", "--path", site.stdout.strip()]
    packages = run(listed).stdout

    same = rewritten(wheel, tmp_path / "same", marker="rebuilt: the same version")
    out = install(prefix, "--wheel", str(same), "--udp-buffer-sysctl")
    assert (
        f"install-agent: reinstalled logflume {version} in {prefix} (the same version: its "
        "code replaced)"
    ) in out
    code = run([str(python), "-c", "import logflume; print(logflume.__file__)"], cwd=tmp_path)
    assert Path(code.stdout.strip()).read_text().endswith("# rebuilt: the same version\n")
    assert f"trial install: agents started from {prefix} run the code they started with" in out
    assert run(listed).stdout == packages  # logflume alone, reinstalled
    assert demo in out
    assert sysctl.read_text() == SYSCTL.read_text() and sysctl.stat().st_mode & 0o777 == 0o644
    assert f"install-agent: trial install: {sysctl} is not applied" in out

    newer = rewritten(wheel, tmp_path / "newer", version="99.0")
    out = install(prefix, "--wheel", str(newer))
    assert f"install-agent: upgraded logflume {version} -> 99.0 in {prefix}\n" in out
    assert run([str(prefix / "bin" / "logflume"), "--version"]).stdout == "logflume 99.0\n"
    assert run(listed).stdout == packages.replace(f"logflume=={version}", "logflume==99.0")


# A system install (no --prefix) run three times in a private mount namespace whose
# /etc, /opt, /usr/local and /var are overlays on this machine's, their changes in a
# tmpfs that goes with the namespace, and in a network namespace of its own (whose
# net.core.rmem_max, the kernel's, --udp-buffer-sysctl cannot change); a stub
# systemctl reports logflume-agent@web running. Each run's output, status and
# systemctl calls land in $out/<n>.*.
SYSTEM_RUNS = r"""
set -eu
scratch=$1 out=$2 calls=$3 script=$4 demo=$5 udp=$6 wheel=$7 newer=$8
shift 8
mount -t tmpfs tmpfs "$scratch"
for dir in etc opt usr/local var; do
  layer="$scratch/${dir//\//-}"
  mkdir -p "$layer/upper" "$layer/work"
  mount -t overlay overlay \
    -o "lowerdir=/$dir,upperdir=$layer/upper,workdir=$layer/work" "/$dir"
done
n=0
one_run() {
  n=$((n + 1))
  rc=0
  bash "$script" "$@" >"$out/$n.out" 2>&1 || rc=$?
  echo "$rc" >"$out/$n.rc"
  mv "$calls" "$out/$n.calls"
  touch "$calls"
}
one_run --wheel "$wheel" "$@"     # 1. the template, its settings unset
cp "$demo" /etc/logflume/pipelines.yaml
one_run --wheel "$wheel" "$@"     # 2. the demo's pipelines, kept
cp "$udp" /etc/logflume/pipelines.yaml
one_run --wheel "$newer" "$@"     # 3. a newer version; pipelines that validate
"""


def test_a_system_install_run_again_restarts_the_running_agents(wheel, tmp_path):
    """install-agent.sh as root, as if systemd ran (tests/deploy/debs.py's stubs).
    Each run reloads systemd and try-restarts the agents that run, once the
    configuration validates with the new code; the unit is enabled only on a
    configuration that validates and is not the demo's. --udp-buffer-sysctl writes
    the sysctl file once and tries to apply it."""
    from tests.deploy import udp_agent
    from tests.deploy.debs import StubTools

    assert os.geteuid() == 0 and shutil.which("unshare"), (
        "a system install is tried in a mount namespace: run as root with unshare(1)"
    )
    # The agent's user runs the installed Python: not one under /root, as this
    # virtualenv's may be. Debian's python3.11 (deploy/system-deps.sh) is the .deb's.
    python = "/usr/bin/python3.11"
    assert Path(python).exists(), f"no {python}: bash deploy/system-deps.sh"
    running = "logflume-agent@web.service loaded active running logflume agent web\n"
    stubs = StubTools(tmp_path / "stubs", list_units=running)
    (tmp_path / "scratch").mkdir()
    (tmp_path / "out").mkdir()
    udp = tmp_path / "udp.yaml"
    udp.write_text(udp_agent.config(12345))
    newer = rewritten(wheel, tmp_path / "newer", version="99.0")
    args = [tmp_path / "scratch", tmp_path / "out", stubs.log, SCRIPT, REPO / "pipelines.yaml"]
    args += [udp, wheel, newer, "--python", python, "--udp-buffer-sysctl"]
    args += ["--reuse-site-packages", sysconfig.get_path("purelib")]
    rmem_max = Path("/proc/sys/net/core/rmem_max").read_text()
    result = run(
        ["unshare", "--mount", "--net", "--propagation", "private", "bash", "-c", SYSTEM_RUNS]
        + ["runs"]
        + [str(a) for a in args],
        env=stubs.env(dict(os.environ), systemd=True),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert Path("/proc/sys/net/core/rmem_max").read_text() == rmem_max
    out = {
        n: (tmp_path / "out" / f"{n}.out").read_text()
        + f"[status {(tmp_path / 'out' / f'{n}.rc').read_text().strip()}]"
        for n in (1, 2, 3)
    }
    calls = {n: (tmp_path / "out" / f"{n}.calls").read_text().splitlines() for n in (1, 2, 3)}
    version = logflume.__version__
    listed = "systemctl list-units --plain --no-legend --state=active logflume-agent@*.service"
    config = "/etc/logflume/pipelines.yaml"

    # 1. A first install: the template's settings are unset, so the running agent
    #    (there is none on a new host, but the stub says so) is not restarted on it.
    assert out[1].endswith("[status 0]"), out[1]
    assert f"install-agent: installed logflume {version} into /opt/logflume\n" in out[1]
    assert (
        f"install-agent: NOT restarting logflume-agent@web.service: {config} does not "
        f"validate with logflume {version}"
    ) in out[1]
    assert f"install-agent: logflume-agent@web is NOT enabled: {config} does not" in out[1]
    sysctl = "/etc/sysctl.d/60-logflume-agent.conf"
    assert f"install-agent: wrote {sysctl} (net.core.rmem_max" in out[1]
    applied = f"install-agent: applied {sysctl}: net.core.rmem_max=67108864"
    assert f"install-agent: could not apply {sysctl} here" in out[1] or applied in out[1]
    assert f"install-agent: keeping existing {sysctl}" in out[2]
    assert calls[1] == [
        "systemctl daemon-reload",
        listed,
        "systemctl is-enabled --quiet logflume-agent@web.service",
    ]

    # 2. The demo's pipelines (kept, as the operator's): validate, so the agent is
    #    restarted; never enabled.
    assert out[2].endswith("[status 0]"), out[2]
    assert f"install-agent: keeping existing {config}\n" in out[2]
    assert f"reinstalled logflume {version} in /opt/logflume (the same version" in out[2]
    assert (
        f"install-agent: restarted logflume-agent@web.service on logflume {version} "
        "(systemctl try-restart)\n"
    ) in out[2]
    assert f"install-agent: logflume-agent@web is NOT enabled: {config} is the demo's" in out[2]
    assert calls[2] == [
        "systemctl daemon-reload",
        listed,
        "systemctl try-restart logflume-agent@web.service",
        "systemctl is-enabled --quiet logflume-agent@web.service",
    ]

    # 3. A newer version, and pipelines of the operator's that validate: restarted on
    #    the new code, and enabled.
    assert out[3].endswith("[status 0]"), out[3]
    assert f"install-agent: upgraded logflume {version} -> 99.0 in /opt/logflume\n" in out[3]
    assert "restarted logflume-agent@web.service on logflume 99.0" in out[3]
    assert "install-agent: enabled logflume-agent@web" in out[3]
    assert calls[3] == [
        "systemctl daemon-reload",
        listed,
        "systemctl try-restart logflume-agent@web.service",
        "systemctl is-enabled --quiet logflume-agent@web.service",
        "systemctl enable logflume-agent@web.service",
    ]
