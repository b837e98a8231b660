"""Packaging: the wheel's extras keep Spark off web hosts, the agent runs without the
other parts' dependencies, and install-agent.sh installs from a wheel.

The wheel is built here from this tree (`pip wheel --no-deps --no-build-isolation`:
no network). The installs reuse this virtualenv's site-packages, as the trial install
of test_install_agent.py does, so they take seconds; what a web host really downloads
for `logflume[agent]` is measured by hand (deploy/README.md, "Install").
"""

import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

from common.ports import free_port
from tests.deploy import udp_agent
from tests.deploy.template import filled, relocated, settings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "install-agent.sh"
SPARK_AND_FRIENDS = ("pyspark", "pyarrow", "pandas")
BROKER_ONLY = ("kazoo", "cramjam", "zstandard", "cryptography", "logflume-recordscheck")

# Runs the logflume command with the given packages made unimportable, as on a web host
# that installed `logflume[agent]` only.
WITHOUT = """
import importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ImportError(f"{name} is not installed on this host")
sys.meta_path.insert(0, Absent())
from logflume.cli import main
sys.exit(main(sys.argv[2:]))
"""


def requirements(wheel: Path) -> dict[str, set[str]]:
    """Distribution names the wheel requires, by extra ("" for the base)."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(z.read(name).decode())
    out: dict[str, set[str]] = {}
    for req in meta.get_all("Requires-Dist"):
        spec, _, marker = req.partition(";")
        dist = spec.split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip().lower()
        extra = marker.split("extra ==")[1].strip().strip("'\"") if "extra ==" in marker else ""
        out.setdefault(extra, set()).add(dist)
    return out


def test_the_wheel_keeps_spark_and_zookeeper_out_of_the_agent(wheel):
    reqs = requirements(wheel)
    agent = reqs[""] | reqs["agent"]
    assert not agent & {*SPARK_AND_FRIENDS, *BROKER_ONLY}, agent
    assert {"aiohttp", "watchdog", "confluent-kafka", "orjson", "pyyaml"} <= agent
    assert set(SPARK_AND_FRIENDS) <= reqs["etl"]
    assert set(BROKER_ONLY) <= reqs["broker"]
    # the Spark source's record batches: checksums, codecs, the decoding in C
    assert {"crc32c", "lz4", "cramjam", "zstandard", "logflume-recordscheck"} <= reqs["etl"]
    # its Fetch requests: kafka-python's codec and SASL mechanisms
    assert "kafka-python" in reqs["etl"]
    assert reqs["all"] == {"logflume"}  # logflume[agent,broker,etl]


def test_the_wheel_is_pure_python(wheel):
    """Any CPython >= 3.11 on any architecture installs the agent: the broker's C
    records check is the logflume-recordscheck distribution, which only the broker
    extra requires."""
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        native = [n for n in z.namelist() if n.endswith((".so", ".pyd", ".c"))]
    assert native == []


def test_the_agent_runs_without_spark_and_the_broker_parts(tmp_path):
    blocked = ",".join(dist.replace("-", "_") for dist in (*SPARK_AND_FRIENDS, *BROKER_ONLY))
    cli = [sys.executable, "-c", WITHOUT, blocked]
    checked = subprocess.run(
        [*cli, "agent", "validate", "--config", str(REPO / "pipelines.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    port = free_port()
    config = tmp_path / "pipelines.yaml"
    config.write_text(udp_agent.config(port))
    run = [*cli, "agent", "run", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    output = udp_agent.echoes(run, port, "hello from a web host", cwd=REPO)
    assert output and output[-1].strip() == "hello from a web host", "".join(output)


def test_install_agent_installs_the_code_from_a_wheel(wheel, tmp_path):
    """With the demo's pipelines.yaml (--demo-config), which needs no settings: the
    installed agent validates it. No unit is enabled on it, and the script says why."""
    prefix = tmp_path / "logflume"
    cmd = ["bash", str(SCRIPT), "--prefix", str(prefix), "--python", sys.executable]
    cmd += ["--wheel", str(wheel), "--reuse-site-packages", sysconfig.get_path("purelib")]
    result = subprocess.run([*cmd, "--demo-config"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"installing logflume[agent] from {wheel}" in result.stdout
    assert "the demo's pipelines" in result.stdout and "does not validate" not in result.stdout
    assert "logflume-agent@web is NOT enabled: --demo-config was given" not in result.stdout
    config = prefix / "etc" / "logflume" / "pipelines.yaml"
    assert f"logflume-agent@web is NOT enabled: {config} is the demo's" in result.stdout
    python = prefix / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import agent, importlib.metadata as m; "
         "print(agent.__file__); print(m.distribution('logflume').read_text('WHEEL') is not None)"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    path, from_wheel = where.stdout.split()
    assert path.startswith(str(prefix)) and from_wheel == "True"
    config = prefix / "etc" / "logflume" / "pipelines.yaml"
    assert config.read_text() == (REPO / "pipelines.yaml").read_text()
    check = subprocess.run(
        [str(prefix / "bin" / "logflume"), "agent", "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_install_agent_from_an_index_into_a_fresh_virtualenv(wheel, tmp_path):
    """--from-index with pip pointed at a local index: the wheel and the dependency
    wheels `make test` downloads in set-up. Nothing is reused from this virtualenv, so
    what lands is what a web host gets: the agent's dependencies and no Spark."""
    wheelhouse = Path(sys.prefix) / "wheelhouse"
    assert wheelhouse.is_dir(), f"no {wheelhouse}: `make test` fills it in set-up"
    prefix = tmp_path / "logflume"
    pip_args = f"--no-index --find-links {wheel.parent} --find-links {wheelhouse}"
    cmd = ["bash", str(SCRIPT), "--prefix", str(prefix), "--python", sys.executable]
    result = subprocess.run(
        [*cmd, "--from-index", "--pip-args", pip_args], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "installing logflume[agent] from the package index" in result.stdout
    listed = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
    )
    installed = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert {"logflume", "aiohttp", "watchdog", "confluent-kafka"} <= installed
    assert not installed & {*SPARK_AND_FRIENDS, *BROKER_ONLY}, installed
    etc = prefix / "etc" / "logflume"
    config = relocated(etc / "pipelines.yaml", tmp_path)  # the template, filled in
    env_file = filled(etc / "agent.env", settings(tmp_path), tmp_path / "agent.env")
    check = subprocess.run(
        [str(prefix / "bin" / "logflume"), "agent", "validate", "--config", str(config),
         "--env-file", str(env_file)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_install_agent_refuses_unknown_extras_and_a_missing_wheel(tmp_path):
    base = ["bash", str(SCRIPT), "--prefix", str(tmp_path / "p")]
    bad = subprocess.run([*base, "--extras", "agent,spark"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--extras: expected" in bad.stderr
    gone = subprocess.run(
        [*base, "--wheel", str(tmp_path / "x.whl")], capture_output=True, text=True
    )
    assert gone.returncode != 0 and "no wheel file" in gone.stderr
