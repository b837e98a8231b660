"""The offline job through `spark-submit`, as on a cluster: the master comes from
spark-submit (not the job's `--master` default) and the hourly table is written."""

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds

from spark_etl import loggen
from testkit.kafka import create_topic, produce
from testkit.procs import BrokerProcess

REPO = Path(__file__).resolve().parents[2]


def test_offline_job_runs_under_spark_submit(tmp_path):
    broker = BrokerProcess(tmp_path / "broker").start()
    try:
        create_topic(broker.bootstrap, "submitted", 1)
        start = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
        lines = list(loggen.lines(start, start.replace(hour=12), 400, seed=5))
        produce(broker.bootstrap, "submitted", [line.encode() for line in lines])
        out = tmp_path / "out"
        run = subprocess.run(
            [
                str(Path(sys.executable).parent / "spark-submit"),
                "--master", "local[1]",
                "--conf", "spark.ui.enabled=false",
                str(REPO / "spark_etl" / "submit.py"),
                "offline",
                "--bootstrap-server", broker.bootstrap,
                "--topic", "submitted",
                "--output", str(out),
                "--checkpoint", str(tmp_path / "ckpt"),
            ],
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
    finally:
        broker.stop()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    hourly = ds.dataset(out / "hourly", format="parquet", partitioning="hive").to_table()
    by_hour = dict(zip(hourly["hour"].to_pylist(), hourly["requests"].to_pylist(), strict=True))
    assert by_hour == {10: 200, 11: 200}
    assert "offline job on master local[1]" in run.stdout
