"""SparkSession for the logflume jobs and tests, with the `logflume` data source registered."""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from pathlib import Path

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
DRIVER_HOST = "spark.driver.host"
LOOPBACK = "127.0.0.1"

CONF_DIR = Path(__file__).resolve().parent / "conf"
LOG4J2_CONFIG = CONF_DIR / "log4j2.xml"
# The system property conf/log4j2.xml takes the log file's path from.
LOG_FILE_PROPERTY = "logflume.spark.log"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# log4j2 also accepts the property's 1.x-era name.
_LOG4J_CONFIG_OPTION = re.compile(r"-Dlog4j2?\.configurationFile=")


def spark_session(
    master: str = "local[*]",
    app: str = "logflume-etl",
    conf: dict[str, str] | None = None,
    log_level: str = "WARN",
    ui: tuple[str, int] | None = None,
    log_file: str | None = None,
):
    """Get or create the session: UTC session time zone, dynamic partition
    overwrite, Python workers on this interpreter (so they see the same packages),
    the `logflume` format registered. `conf` holds extra Spark settings, which win
    over every default here.

    On a local master nothing listens beyond this host (`local_listeners`): the
    driver and block manager bind to 127.0.0.1 and the UI is off unless `ui` (host,
    port) asks for it. On a standalone master (`spark://`) the driver listens on, and
    tells the executors, the address of this host that reaches the master
    (`cluster_listeners`). Other masters keep Spark's and the user's settings.

    On a local master, `spark.sql.shuffle.partitions` defaults to twice the cores
    instead of Spark's 200 (200 tiny tasks per shuffle cost a minute per micro-batch
    on two cores), unless `conf`, spark-defaults.conf or spark-submit set it. A
    streaming query keeps the value its checkpoint was created with.

    Logging (`driver_settings`): the driver JVM this call starts logs with
    conf/log4j2.xml, which keeps the console to errors and the few warnings a user
    can act on. With `log_file`, everything else worth keeping (Spark's INFO lines,
    every other WARN) goes to that file, rolled over at 10 MiB with three older
    files kept; `log_level` is then not applied, because SparkContext.setLogLevel
    sets the root level, which the file's share of the log depends on. Without
    `log_file` there is no file, and `log_level` sets the root level as before,
    within the console's limits: "ERROR" also silences the few warnings shown,
    "INFO" shows nothing more (a log file has it).

    None of this logging set-up applies when this process already runs a JVM
    (spark-submit, a second call): its logging stays as it was set up when it started.
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
    defaults = spark_defaults()
    if local_cores(master):
        settings = local_listeners(ui)
    else:
        settings = cluster_listeners(master, {**defaults, **(conf or {})})
    settings.update(conf or {})
    if log_file is not None:
        log_file = os.path.abspath(log_file)
        os.makedirs(os.path.dirname(log_file), exist_ok=True)
    settings.update(driver_settings({**defaults, **settings}, log_file))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_file is None:
        spark.sparkContext.setLogLevel(log_level)
    # py4j logs every callback at INFO ("Received command c on object id p0"), once
    # per micro-batch and query under a root logger at INFO such as the CLI's.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    running = spark.sparkContext.master
    assert running is not None  # a running context has one
    cores = local_cores(running)
    if cores and not spark.sparkContext.getConf().contains(SHUFFLE_PARTITIONS):
        spark.conf.set(SHUFFLE_PARTITIONS, str(2 * cores))
    register(spark)
    return spark


def driver_settings(effective: dict[str, str], log_file: str | None) -> dict[str, str]:
    """The settings that give the driver JVM logflume's logging, given the
    `effective` settings (spark-defaults.conf overlaid with the caller's).

    PySpark hands the builder's settings to the spark-submit that starts the JVM, so
    `spark.driver.extraJavaOptions` reaches the JVM's command line. The options
    already in effect are kept, the log4j2 configuration file and the log file's
    property appended; a configuration file named there wins over conf/log4j2.xml
    (and then `log_file` is written only if that configuration refers to
    LOG_FILE_PROPERTY).
    """
    options = effective.get(DRIVER_JAVA_OPTIONS, "").strip()
    added = []
    if not _LOG4J_CONFIG_OPTION.search(options):
        added.append(java_property("log4j2.configurationFile", str(LOG4J2_CONFIG)))
    if log_file is not None:
        added.append(java_property(LOG_FILE_PROPERTY, log_file))
    return {DRIVER_JAVA_OPTIONS: " ".join([options, *added]).strip()} if added else {}


def java_property(name: str, value: str) -> str:
    """`-Dname=value` as one option of a Spark Java options string, which Spark
    splits at blanks outside quotes, a backslash escaping the next character."""
    option = f"-D{name}={value}"
    if re.search(r"[\s\"'\\]", option):
        return '"' + re.sub(r'(["\\])', r"\\\1", option) + '"'
    return option


def spark_defaults() -> dict[str, str]:
    """The settings in the spark-defaults.conf that spark-submit will read
    ($SPARK_CONF_DIR, else the conf directory of the Spark PySpark runs), empty if
    there is none. The builder's settings replace these, so a value to add to
    (the driver's Java options) has to be read from here first."""
    import javaproperties
    from pyspark.find_spark_home import _find_spark_home

    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(_find_spark_home(), "conf")
    try:
        with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as f:
            return {k: v.strip() for k, v in javaproperties.load(f).items()}
    except FileNotFoundError:
        return {}


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


def cluster_listeners(master: str, effective: dict[str, str]) -> dict[str, str]:
    """The driver's address on a standalone master, given the `effective` settings
    (spark-defaults.conf overlaid with the caller's); empty for other masters.

    Executors connect back to the driver at `spark.driver.host`, which is also where
    the driver's RPC and block manager bind (`spark.driver.bindAddress` defaults to
    it). Spark's default is the address the host name resolves to or, when that is a
    loopback address (Debian's 127.0.1.1), the first other interface: on a machine
    with several networks that may be one the workers cannot reach (they then wait
    for a driver that never answers), and with a master on loopback it opens the
    driver on an outside interface for nothing. The address this host sends from to
    the master (`route_to`) is one the cluster reaches. A driver host set in the
    settings, or SPARK_LOCAL_IP or SPARK_LOCAL_HOSTNAME in the environment, is the
    user's choice and stays.
    """
    if not master.startswith("spark://") or DRIVER_HOST in effective:
        return {}
    if os.environ.get("SPARK_LOCAL_IP") or os.environ.get("SPARK_LOCAL_HOSTNAME"):
        return {}
    first = master[len("spark://") :].split(",")[0]  # spark://m1:7077,m2:7077 with standbys
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        host, port = first, "7077"  # the standalone master's default port
    address = route_to(host.strip("[]"), int(port))
    return {DRIVER_HOST: address} if address else {}


def route_to(host: str, port: int) -> str | None:
    """The local address this host sends from to reach `host` (None if `host` does
    not resolve or has no route). A UDP socket's connect only looks the route up:
    nothing is sent."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.connect(address)
            return s.getsockname()[0]
    except OSError:
        return None


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
