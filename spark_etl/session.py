"""SparkSession for the logflume jobs and tests, with the `logflume` data source registered."""

from __future__ import annotations

import os
import sys


def spark_session(
    master: str = "local[*]",
    app: str = "logflume-etl",
    conf: dict[str, str] | None = None,
    log_level: str = "WARN",
):
    """Get or create the session: UTC session time zone, dynamic partition
    overwrite, Python workers on this interpreter (so they see the same packages),
    the `logflume` format registered. `conf` holds extra Spark settings.
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
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


def register(spark) -> None:
    """Register the `logflume` data source on `spark` (idempotent)."""
    from spark_etl.source import LogflumeDataSource

    spark.dataSource.register(LogflumeDataSource)
