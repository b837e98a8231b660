"""What Spark's driver logs where: the console keeps to what a user can act on, the
log file (spark_session's `log_file`) gets the rest.

The log4j2 configuration only applies to a JVM that spark_session starts, and the
test session's JVM is already running: the real run is a fresh Python process.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

from spark_etl.session import LOG4J2_CONFIG

REPO = Path(__file__).resolve().parents[2]

# One event per rule of conf/log4j2.xml, sent through SLF4J as Spark's own code logs,
# then a batch job and a stateful streaming query of three micro-batches that ends by
# itself (Trigger.AvailableNow), so no stop cuts a batch. Prints a JSON report of the
# JVM's logging state.
PROGRAM = """
import json, sys
from spark_etl.session import spark_session

log_file, data, checkpoint, probes = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
spark = spark_session(
    "local[2]",
    app="logflume-logging-test",
    conf={"spark.driver.extraJavaOptions": "-Dlogflume.test=kept"},
    log_level="ERROR",
    log_file=log_file,
)
sc = spark.sparkContext
jvm = sc._jvm
for logger, level, message in probes:
    getattr(jvm.org.slf4j.LoggerFactory.getLogger(logger), level)(message)
spark.range(1000).selectExpr("sum(id)").collect()
query = (
    spark.readStream.option("maxFilesPerTrigger", 1).text(data)
    .groupBy("value").count()
    .writeStream.outputMode("complete").format("noop")
    .option("checkpointLocation", checkpoint)
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
config = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
rolling = config.getAppender("file").getManager()
report = {
    "batches": query.lastProgress["batchId"] + 1,
    "config": config.getConfigurationSource().getLocation(),
    "root_level": jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString(),
    "kept_option": jvm.java.lang.System.getProperty("logflume.test"),
    "max_file_size": rolling.getTriggeringPolicy().getMaxFileSize(),
    "max_index": rolling.getRolloverStrategy().getMaxIndex(),
}
spark.stop()
print(json.dumps(report))
"""

SPARK = "org.apache.spark.logflume.Probe"
HADOOP = "org.apache.hadoop.logflume.Probe"
STREAMING = "org.apache.spark.sql.execution.streaming.logflume.Probe"
# (logger, level, message, on the console, in the file)
PROBES = [
    (SPARK, "info", "probe 1: spark info", False, True),
    (SPARK, "warn", "probe 2: spark warn", False, True),
    (SPARK, "error", "probe 3: spark error", True, True),
    (HADOOP, "info", "probe 4: hadoop info", False, False),
    (HADOOP, "warn", "probe 5: hadoop warn", False, True),
    (STREAMING, "info", "probe 6: streaming info", False, True),
    (STREAMING, "warn", "probe 7: streaming warn", True, True),
    (
        STREAMING,
        "warn",
        "probe 8: Current batch is falling behind. The trigger interval is 1000 "
        "milliseconds, but spent 1500 milliseconds",
        False,
        True,
    ),
    (
        "org.apache.spark.broadcast.TorrentBroadcast",
        "error",
        "probe 9: Store broadcast broadcast_13 fail, remove all pieces of the broadcast",
        False,
        True,
    ),
]
# Warnings seen on the console of a realtime run before this configuration, and
# Spark's own notices about its logging set-up: none may reach the console.
NOISE = [
    "is not supported in streaming DataFrames",
    "Disabling AQE",
    "Truncated the string representation",
    "native-hadoop",
    "resolves to a loopback address",
    "Failed to cancel job group",
    "Using Spark's default log4j profile",
    "Setting default log level",
]
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ([A-Z]+) (\S+): (.*)$")


def test_console_gets_what_a_user_can_act_on_and_the_file_the_rest(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"{i}.txt").write_text("".join(f"line {n}\n" for n in range(i * 10, i * 10 + 10)))
    # A space and a quote in the path: Spark splits the Java options at blanks.
    log_file = tmp_path / "spark 'logs'" / "driver.log"
    probes = json.dumps([p[:3] for p in PROBES])
    args = [str(log_file), str(data), str(tmp_path / "checkpoint"), probes]
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(run.stdout.splitlines()[-1])
    console = run.stderr
    logged = log_file.read_text()

    assert report["batches"] == 3
    assert report["config"] == str(LOG4J2_CONFIG)
    assert report["kept_option"] == "kept"  # the caller's Java options stay
    # With a log file, log_level ("ERROR" here) is not applied: the root stays at WARN.
    assert report["root_level"] == "WARN"
    assert (report["max_file_size"], report["max_index"]) == (10 * 1024 * 1024, 3)

    for _, _, message, on_console, in_file in PROBES:
        assert (message in console) == on_console, message
        assert (message in logged) == in_file, message
    # Nothing else from log4j on the console: no INFO, no other warning.
    others = [line for line in console.splitlines() if LOG_LINE.match(line) and "probe" not in line]
    assert others == [], others
    for noise in NOISE:
        assert noise not in console, noise

    # The file has Spark's INFO lines (logger names in full) and the streaming
    # query's warnings.
    assert re.search(r"^\S+ \S+ INFO org\.apache\.spark\.SparkContext: ", logged, re.M)
    assert "spark.sql.adaptive.enabled is not supported in streaming" in logged


def test_without_a_log_file_log_level_sets_the_root_and_nothing_is_written(spark):
    """The test session's JVM, started by spark_session(..., log_level="ERROR")."""
    jvm = spark.sparkContext._jvm
    manager = jvm.org.apache.logging.log4j.LogManager
    config = manager.getContext(False).getConfiguration()
    assert config.getConfigurationSource().getLocation() == str(LOG4J2_CONFIG)
    assert set(config.getAppenders().keySet()) == {"console"}
    assert manager.getRootLogger().getLevel().toString() == "ERROR"
