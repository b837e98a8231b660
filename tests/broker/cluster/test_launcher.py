"""The launcher's command lines and config, as pure code: nothing is started."""

import sys
from pathlib import Path

import pytest

from broker.cluster import launcher
from broker.cluster.launcher import ZooKeeperProcess, broker_command
from logflume.cli import build_parser


def test_a_single_broker_command_line_is_what_a_user_would_type():
    argv = broker_command(Path("/d"), "127.0.0.1:9092")
    assert argv == [sys.executable, "-m", "logflume", "broker", "--data-dir", "/d"] + [
        "--listen",
        "127.0.0.1:9092",
    ]


def test_a_cluster_broker_command_line_parses_as_the_cli_expects():
    argv = broker_command(
        Path("/d"),
        zookeeper="10.0.0.1:2181/c",
        broker_id=2,
        settings={"listeners": "PLAINTEXT://10.0.0.12:9092", "min.insync.replicas": 2},
        log_flags=["--log-format", "json"],
        extra_args=["--event-loop", "asyncio"],
    )
    args = build_parser().parse_args(argv[3:])
    assert (args.command, args.log_format, args.listen) == ("broker", "json", None)
    assert (args.zookeeper, args.broker_id) == ("10.0.0.1:2181/c", 2)
    assert args.set == ["listeners=PLAINTEXT://10.0.0.12:9092", "min.insync.replicas=2"]
    assert argv[-2:] == ["--event-loop", "asyncio"]


def test_zookeeper_config_serves_on_the_given_address(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "zookeeper_classpath", lambda: "zk.jar")
    zk = ZooKeeperProcess(tmp_path / "zk", port=2181, tick_ms=200, host="10.213.7.10")
    argv = zk.command()
    assert argv[-2:] == [launcher.ZK_MAIN, str(tmp_path / "zk" / "zoo.cfg")]
    config = dict(
        line.split("=", 1) for line in (tmp_path / "zk" / "zoo.cfg").read_text().splitlines()
    )
    assert config["clientPort"] == "2181" and config["clientPortAddress"] == "10.213.7.10"
    assert (config["tickTime"], config["minSessionTimeout"]) == ("200", "400")
    assert config["dataDir"] == str(tmp_path / "zk" / "data")
    assert zk.connect == "10.213.7.10:2181"
    assert config["forceSync"] == "yes"  # durable unless a test machine asks otherwise


def test_test_zookeepers_do_not_wait_on_the_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "zookeeper_classpath", lambda: "zk.jar")
    ZooKeeperProcess(tmp_path / "zk", force_sync=False).command()
    assert "forceSync=no" in (tmp_path / "zk" / "zoo.cfg").read_text().splitlines()


def test_zookeeper_without_its_jars_says_what_to_install(monkeypatch):
    monkeypatch.setattr(launcher, "JAR_DIRS", (Path("/nonexistent"),))
    with pytest.raises(launcher.LauncherError, match="apt-get install zookeeper"):
        launcher.zookeeper_classpath()


def test_an_ensemble_member_names_every_member_and_its_own_id(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "zookeeper_classpath", lambda: "zk.jar")
    members = launcher.zookeeper_ensemble(tmp_path, 3, host="10.213.7.10")
    assert [zk.data_dir.name for zk in members] == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    for zk in members:
        zk.command()
    second = dict(
        line.split("=", 1)
        for line in (tmp_path / "zookeeper-2" / "zoo.cfg").read_text().splitlines()
    )
    servers = {k: v for k, v in second.items() if k.startswith("server.")}
    assert sorted(servers) == ["server.1", "server.2", "server.3"]
    assert all(v.startswith("10.213.7.10:") and v.count(":") == 2 for v in servers.values())
    assert (second["initLimit"], second["syncLimit"]) == ("10", "5")
    assert (tmp_path / "zookeeper-2" / "data" / "myid").read_text() == "2\n"
    assert launcher.ensemble_connect(members) == ",".join(zk.connect for zk in members)
    with pytest.raises(ValueError, match="server id 4"):
        ZooKeeperProcess(tmp_path / "x", peers=members[0].peers, server_id=4)


def test_a_standalone_zookeeper_has_no_ensemble(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "zookeeper_classpath", lambda: "zk.jar")
    ZooKeeperProcess(tmp_path / "zk").command()
    assert "server." not in (tmp_path / "zk" / "zoo.cfg").read_text()
    assert not (tmp_path / "zk" / "data" / "myid").exists()
