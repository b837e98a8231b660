"""The ETL jobs on a Spark standalone cluster, started as a user starts them.

One cluster for the module (testkit.spark_cluster: a master and two workers of one
core each, on loopback) and one broker subprocess. Access-log lines of three hosts,
each record carrying its host in a `host` header, go into 3-partition topics; then
`logflume etl offline --master spark://...` runs as a subprocess, with relative
--output and --checkpoint as typed in a shell. The tables must equal the figures
computed from the generated lines (tests/spark_etl/expected.py), and the cluster's
own records must show that executors on both workers did the reading. The realtime
job runs on a standalone cluster in the fleet run (tests/fleet), to the end.
"""

import concurrent.futures
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pyarrow.dataset as ds
import pytest

from spark_etl import loggen
from testkit.kafka import create_topic, produce
from testkit.procs import BrokerProcess, wait_until
from testkit.spark_cluster import (
    JVM_OPTIONS,
    SparkStandalone,
    driver_env,
)
from tests.spark_etl import expected

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
HOSTS = ("web1", "web2", "web3")
PARTITIONS = 3
MINUTES = 3
# No driver UI (it would take port 4040 on every interface); executors smaller than
# Spark's 1g default; JVMs that start quickly (testkit.spark_cluster.JVM_OPTIONS).
SPARK_CONF = (
    "spark.ui.enabled=false",
    "spark.executor.memory=512m",
    f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
    f"spark.executor.extraJavaOptions={JVM_OPTIONS}",
)


def send(bootstrap: str, topic: str, items) -> None:
    """Raw nginx lines round-robin over the partitions, each with a `host` header
    naming its item's host (garbage: no header)."""
    groups = defaultdict(list)
    for i, item in enumerate(items):
        host = getattr(item, "host", None)
        groups[(i % PARTITIONS, host)].append(item.line().encode())
    for (partition, host), values in groups.items():
        headers = [("host", host.encode())] if host else None
        produce(bootstrap, topic, values, partition=partition, headers=headers)


def traffic():
    """The items of the offline job's topic, of the realtime job's, and its closing line."""
    offline = loggen.generate(
        T0, T0 + timedelta(hours=2), 3000, seed=31, hosts=HOSTS, bad_ratio=0.02
    )
    end = T0 + timedelta(minutes=MINUTES)
    live = loggen.generate(T0, end, 900, seed=32, hosts=HOSTS, bad_ratio=0.05)
    # One line three minutes on moves the watermark past every minute of `live`.
    later = end + timedelta(minutes=3)
    closing = loggen.generate(later, later, 1, seed=33, hosts=HOSTS)
    return list(offline), list(live), list(closing)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The cluster, started while the broker starts and the topics fill."""
    root = tmp_path_factory.mktemp("standalone")
    cluster = SparkStandalone(root / "spark")
    broker = BrokerProcess(root / "broker")
    offline, live, closing = traffic()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        starting = pool.submit(cluster.start)
        try:
            broker.start()
            create_topic(broker.bootstrap, "access", PARTITIONS)
            send(broker.bootstrap, "access", offline)
            create_topic(broker.bootstrap, "live", PARTITIONS)
            create_topic(broker.bootstrap, "live-stats", 1)
            send(broker.bootstrap, "live", live + closing)
            starting.result()
        except BaseException:
            concurrent.futures.wait([starting])
            cluster.stop()
            broker.stop()
            raise
    yield cluster, broker, offline, live
    cluster.stop()
    broker.stop()


def etl(job: str, cluster: SparkStandalone, broker, topic: str, *args: str) -> list[str]:
    cmd = [sys.executable, "-m", "logflume", "etl", job, "--master", cluster.master_url]
    cmd += ["--bootstrap-server", broker.bootstrap, "--topic", topic]
    cmd += ["--output", "out", "--checkpoint", "ckpt", *args]
    for setting in SPARK_CONF:
        cmd += ["--conf", setting]
    return cmd


def app_id(cluster: SparkStandalone, name: str) -> str:
    """The id of the finished application `name` (the master moves it to
    completedapps once its driver has gone)."""

    def finished():
        apps = (cluster.master_state() or {}).get("completedapps", [])
        return next((a["id"] for a in apps if a["name"] == name), None)

    return wait_until(finished, 30, what=f"{name} among the master's completed applications")


def executor_log(cluster: SparkStandalone, i: int, app: str, executor: int) -> str:
    path = cluster.worker_dir(i) / app / str(executor) / "stderr"
    return path.read_text(errors="replace") if path.exists() else ""


# The driver is on loopback like the master (spark_etl.session.cluster_listeners).
REACHED_DRIVER = "Connecting to driver: spark://CoarseGrainedScheduler@127.0.0.1:"


def test_offline_job_on_the_cluster_gives_each_hosts_hours(lab, tmp_path):
    cluster, broker, sent, _ = lab
    run = subprocess.run(
        etl("offline", cluster, broker, "access"),
        cwd=tmp_path, env=driver_env(), capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    garbage = sum(isinstance(i, loggen.Garbage) for i in sent)
    assert f"1 batches, 3000 records, {garbage} unparsable" in run.stdout, run.stdout

    hourly = ds.dataset(tmp_path / "out" / "hourly", format="parquet").to_table().to_pylist()
    got = {}
    for row in hourly:
        start = row["hour_start"].astimezone(UTC)
        got[(start.strftime("%Y-%m-%d"), start.hour, row["host"])] = row
    want = expected.hourly([(item, True) for item in sent])
    assert set(got) == set(want) and {host for _, _, host in want} == set(HOSTS)
    for key, figures in want.items():
        expected.assert_figures(got[key], figures, key)

    app = app_id(cluster, "logflume-etl-offline")
    logs = []
    for i in range(2):
        executors = wait_until(
            lambda i=i: [
                e
                for e in (cluster.worker_state(i) or {}).get("finishedexecutors", [])
                if e["appid"] == app
            ],
            30,
            what=f"worker {i}'s executor of {app} among its finished executors",
        )
        # One executor per worker ran the app. The executors exit when the driver stops,
        # before the driver has unregistered the app, so the master may launch a
        # replacement on the worker that is killed at once (seen under load): it never
        # reached the driver.
        ran = [e for e in executors if REACHED_DRIVER in executor_log(cluster, i, app, e["id"])]
        assert len(ran) == 1, executors
        logs.append(executor_log(cluster, i, app, ran[0]["id"]))
        # The tasks wrote under the driver's --output, none in their working directory.
        assert not list(cluster.worker_dir(i).glob(f"{app}/**/*.parquet"))
    # The executors ran the job's tasks, which read the topic (with no wait for both
    # executors before the first task, one may have had them all).
    assert any("Finished task" in log for log in logs), logs
