"""deploy/etl: the hourly schedule of the offline job (systemd units and a cron line)."""

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from logflume.cli import build_parser

ETL = Path(__file__).resolve().parents[2] / "deploy" / "etl"
BIN = "/opt/logflume/bin/logflume"


def _unit(name: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    cp.optionxform = str
    cp.read_string((ETL / name).read_text())
    return cp


def _cli_args(command: str, env: dict[str, str]) -> list[str]:
    for key, value in env.items():
        command = command.replace("${" + key + "}", value)
    argv = shlex.split(command)
    assert argv[0] == BIN
    return argv[1:]


def test_units_verify_and_run_the_offline_job_hourly(tmp_path):
    service, timer = _unit("logflume-etl-offline.service"), _unit("logflume-etl-offline.timer")
    assert service["Service"]["Type"] == "oneshot"
    assert timer["Timer"]["OnCalendar"] == "*-*-* *:05:00"
    assert timer["Timer"]["Unit"] == "logflume-etl-offline.service"
    assert timer["Install"]["WantedBy"] == "timers.target"
    prefix = "Environment="
    env = dict(
        line[len(prefix) :].split("=", 1)
        for line in (ETL / "logflume-etl-offline.service").read_text().splitlines()
        if line.startswith(prefix)
    )
    args = build_parser().parse_args(_cli_args(service["Service"]["ExecStart"], env))
    assert (args.command, args.job, args.topic) == ("etl", "offline", "nginx-access")
    assert args.output.startswith("/var/lib/logflume/etl/offline/")
    # systemd's own check, with ExecStart pointing at an executable that exists here.
    exe = shutil.which("logflume") or str(Path(sys.executable).with_name("logflume"))
    for name in ("logflume-etl-offline.service", "logflume-etl-offline.timer"):
        (tmp_path / name).write_text((ETL / name).read_text().replace(BIN, exe))
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is installed by deploy/system-deps.sh"
    result = subprocess.run(
        [analyze, "verify", "--man=no", *sorted(str(p) for p in tmp_path.iterdir())],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_cron_line_runs_the_same_job_hourly_under_a_lock():
    lines = [
        line
        for line in (ETL / "logflume-etl-offline.cron").read_text().splitlines()
        if line.strip() and not line.startswith("#") and "=" not in line.split()[0]
    ]
    assert len(lines) == 1
    fields = lines[0].split(None, 6)
    assert fields[:5] == ["5", "*", "*", "*", "*"] and fields[5] == "logflume"
    command = fields[6].split(">>")[0]
    assert command.startswith("flock -n ")
    argv = shlex.split(command)[3:]
    args = build_parser().parse_args(_cli_args(shlex.join(argv), {}))
    assert (args.command, args.job) == ("etl", "offline")
