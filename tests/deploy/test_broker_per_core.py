"""deploy/systemd/broker-per-core.sh: one broker per core of a host, each a
logflume-broker@<id> instance pinned by a CPUAffinity= drop-in. Run under --root into
a temporary directory: the properties it writes load as the unit's broker loads them,
every broker of the host registers the same host (replica placement keeps their
replicas apart), and systemd reads the unit with each drop-in."""

import shutil
import subprocess
from pathlib import Path

from broker.cluster.assignment import broker_hosts
from broker.cluster.zk import BrokerInfo
from broker.config import BrokerConfig

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "systemd" / "broker-per-core.sh"
UNIT = REPO / "deploy" / "systemd" / "logflume-broker@.service"


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, **kwargs
    )


def lay_out(root: Path, *extra: str) -> subprocess.CompletedProcess:
    done = run(
        *("--first-id", "30", "--host", "broker3.example.net", "--rack", "rack-a"),
        *("--zookeeper", "zk1:2181,zk2:2181/logflume", "--cores", "0-1,5"),
        *("--root", str(root), *extra),
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_script_is_valid_bash_and_shellcheck_clean():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    checked = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_one_broker_per_core_each_with_its_id_port_and_core(tmp_path):
    common = tmp_path / "common.properties"
    common.write_text("log.retention.hours=168\n")
    done = lay_out(tmp_path / "root", "--common", str(common))
    assert done.stdout.splitlines() == [
        f"broker 30: core 0, port 9092, {tmp_path}/root/etc/logflume/broker-30.properties",
        f"broker 31: core 1, port 9093, {tmp_path}/root/etc/logflume/broker-31.properties",
        f"broker 32: core 5, port 9094, {tmp_path}/root/etc/logflume/broker-32.properties",
        "then: systemctl daemon-reload && systemctl enable --now logflume-broker@30 "
        "logflume-broker@31 logflume-broker@32",
    ]
    infos = {}
    for broker_id, core, port in [(30, 0, 9092), (31, 1, 9093), (32, 5, 9094)]:
        dropin = tmp_path / f"root/etc/systemd/system/logflume-broker@{broker_id}.service.d"
        assert (dropin / "cpu.conf").read_text().splitlines()[1:] == [
            "[Service]",
            f"CPUAffinity={core}",
        ]
        # as the unit starts it: --config, --data-dir, --set broker.id=%i
        config = BrokerConfig.load(
            tmp_path / f"root/etc/logflume/broker-{broker_id}.properties",
            [f"broker.id={broker_id}"],
            data_dir=tmp_path / f"data-{broker_id}",
        )
        assert config["broker.id"] == broker_id and config["broker.rack"] == "rack-a"
        assert config["zookeeper.connect"] == "zk1:2181,zk2:2181/logflume"
        assert config["log.retention.hours"] == 168
        name = config.listeners.inter_broker
        address = config.listeners.advertised_address(name)
        assert address == ("broker3.example.net", port)
        infos[broker_id] = BrokerInfo(broker_id, {name: address}, "rack-a")
    assert set(broker_hosts(infos, "PLAINTEXT").values()) == {"broker3.example.net"}


def test_a_properties_file_that_exists_is_left_alone(tmp_path):
    root = tmp_path / "root"
    mine = root / "etc/logflume/broker-31.properties"
    mine.parent.mkdir(parents=True)
    mine.write_text("# the operator's\n")
    done = lay_out(root)
    assert mine.read_text() == "# the operator's\n"
    assert done.stderr == f"broker-per-core: {mine} exists: left as it is\n"
    assert (root / "etc/systemd/system/logflume-broker@31.service.d/cpu.conf").exists()


def test_bad_options_are_refused_with_a_message(tmp_path):
    base = ["--first-id", "1", "--host", "h", "--zookeeper", "z", "--root", str(tmp_path)]
    refused = [
        (["--host", "h", "--zookeeper", "z"], "--first-id is required"),
        (["--first-id", "one", "--host", "h", "--zookeeper", "z"], "--first-id one: a broker id"),
        ([*base, "--cores", "3-1"], "--cores 3-1: 3-1 goes backwards"),
        ([*base, "--cores", "a"], "--cores a: a list of cores such as 0-3,8"),
        ([*base, "--base-port", "65535", "--cores", "0-1"], "the last broker's port 65536"),
        ([*base, "--common", str(tmp_path / "none")], "no such readable file"),
        ([*base, "--speed"], "unknown option --speed"),
    ]
    for args, message in refused:
        done = run(*args)
        assert done.returncode == 2, args
        assert done.stderr.startswith("broker-per-core: ") and message in done.stderr, done.stderr
    assert not (tmp_path / "etc").exists()


def test_systemd_reads_the_unit_with_its_drop_in(tmp_path):
    """`systemd-analyze verify` of an instance, the unit and the script's drop-in on
    the unit path (the unit's program replaced by one that exists here); a drop-in
    that systemd cannot parse is reported, so a clean run means it read ours."""
    root = tmp_path / "root"
    lay_out(root)
    units = root / "etc/systemd/system"
    unit = UNIT.read_text().replace("/opt/logflume/bin/logflume", shutil.which("true"))
    (units / UNIT.name).write_text(unit)

    def verify() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["systemd-analyze", "verify", "--man=no", "logflume-broker@32.service"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"SYSTEMD_UNIT_PATH": f"{units}:", "PATH": "/usr/bin:/bin"},
        )

    done = verify()
    assert done.returncode == 0 and "cpu.conf" not in done.stderr, done.stderr
    (units / "logflume-broker@32.service.d/cpu.conf").write_text("[Service]\nCPUAffinity=x\n")
    assert "Failed to parse CPU affinity" in verify().stderr
