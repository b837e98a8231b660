"""A local-mode Spark job listens only on loopback, and serves its UI only when asked."""

import re
import subprocess
import sys

import pytest

from common.ports import free_port
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess, wait_until

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1"}


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("listen") / "broker").start()
    create_topic(b.bootstrap, "nginx-access", 1)
    yield b
    b.stop()


def jvm_of(pid: int) -> int | None:
    """The java child of `pid` (pyspark starts the driver JVM as its child)."""
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True)
    for line in out.stdout.decode().splitlines():
        child, comm = line.split(None, 1)
        if comm.strip() == "java":
            return int(child)
    return None


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket `pid` listens on, read with `ss -ltnp`."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, check=True).stdout.decode()
    found = []
    for line in out.splitlines():
        if f"pid={pid}," not in line:
            continue
        local = line.split()[3]
        host, _, port = local.rpartition(":")
        found.append((host.strip("[]"), int(port)))
    return found


@pytest.mark.parametrize("ui", [False, True], ids=["no-ui", "ui-on-loopback"])
def test_realtime_job_in_local_mode_listens_only_on_loopback(bk, tmp_path, ui):
    ui_port = free_port()
    cmd = [sys.executable, "-m", "logflume", "etl", "realtime", "--master", "local[1]"]
    cmd += ["--bootstrap-server", bk.bootstrap, "--output", str(tmp_path / "out")]
    cmd += ["--checkpoint", str(tmp_path / "ckpt"), "--starting-offsets", "earliest"]
    if ui:
        cmd += ["--spark-ui", str(ui_port)]
    log = (tmp_path / "etl.log").open("wb")
    job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        # The query has started once its checkpoint exists: every listener is open.
        wait_until(
            lambda: (tmp_path / "ckpt" / "stream").exists() and jvm_of(job.pid), 120, "the job"
        )
        jvm = jvm_of(job.pid)
        sockets = listening(jvm)
        text = (tmp_path / "etl.log").read_text(errors="replace")
        assert len(sockets) >= 2, (sockets, text)  # driver RPC and block manager at least
        assert {host for host, _ in sockets} <= LOOPBACK, (sockets, text)
        assert (ui_port in {port for _, port in sockets}) is ui, sockets
        assert not re.search(r"resolves to a loopback address", text), text
    finally:
        job.terminate()
        job.wait(60)
        log.close()
