"""SparkSession for the logflume jobs and tests, with the `logflume` data source registered."""

from __future__ import annotations

import logging
import os
import re
import sys

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
LOOPBACK = "127.0.0.1"


def spark_session(
    master: str = "local[*]",
    app: str = "logflume-etl",
    conf: dict[str, str] | None = None,
    log_level: str = "WARN",
    ui: tuple[str, int] | None = None,
):
    """Get or create the session: UTC session time zone, dynamic partition
    overwrite, Python workers on this interpreter (so they see the same packages),
    the `logflume` format registered. `conf` holds extra Spark settings, which win
    over every default here.

    On a local master nothing listens beyond this host (`local_listeners`): the
    driver and block manager bind to 127.0.0.1 and the UI is off unless `ui` (host,
    port) asks for it. Other masters keep Spark's and the user's settings.

    On a local master, `spark.sql.shuffle.partitions` defaults to twice the cores
    instead of Spark's 200 (200 tiny tasks per shuffle cost a minute per micro-batch
    on two cores), unless `conf`, spark-defaults.conf or spark-submit set it. A
    streaming query keeps the value its checkpoint was created with.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.ui.showConsoleProgress", "false")
    )
    settings = local_listeners(ui) if local_cores(master) else {}
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    # py4j logs every callback at INFO ("Received command c on object id p0"), once
    # per micro-batch and query under a root logger at INFO such as the CLI's.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    cores = local_cores(spark.sparkContext.master)
    if cores and not spark.sparkContext.getConf().contains(SHUFFLE_PARTITIONS):
        spark.conf.set(SHUFFLE_PARTITIONS, str(2 * cores))
    register(spark)
    return spark


def local_listeners(ui: tuple[str, int] | None) -> dict[str, str]:
    """Settings that keep a local-mode Spark on loopback.

    The driver's RPC and block manager bind to `spark.driver.bindAddress`; the UI
    binds to SPARK_LOCAL_IP (there is no setting for it), which also spares the JVM
    its "hostname resolves to a loopback address ... using <external address>
    instead" search, so it is set for the JVM this process is about to start.
    """
    host, port = ui if ui else (LOOPBACK, 0)
    os.environ["SPARK_LOCAL_IP"] = host
    settings = {
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
        "spark.ui.enabled": "true" if ui else "false",
    }
    if ui:
        settings["spark.ui.port"] = str(port)
    return settings


def local_cores(master: str) -> int | None:
    """The cores of a local master (`local`, `local[4]`, `local[*]`, `local[4,3]`),
    None for anything else (a cluster, `local-cluster[...]`)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    if m.group(1) is None:
        return 1
    return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))


def register(spark) -> None:
    """Register the `logflume` data source on `spark` (idempotent)."""
    from spark_etl.source import LogflumeDataSource

    spark.dataSource.register(LogflumeDataSource)
