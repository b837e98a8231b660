"""What the offline and near-real-time jobs share: the source stream and progress output."""

from __future__ import annotations

import sys
from collections.abc import Callable


def source_stream(
    spark,
    bootstrap: str,
    topic: str,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    client: dict[str, str] | None = None,
):
    """The broker topic(s) as a streaming DataFrame of the `logflume` format.
    `client`: Kafka client properties (security.protocol, sasl.*, ssl.*, Java or
    librdkafka names), passed as Spark's Kafka source takes them: `kafka.<name>`."""
    reader = (
        spark.readStream.format("logflume")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
    )
    for key, value in (client or {}).items():
        reader = reader.option(f"kafka.{key}", value)
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()


def printer(out=None) -> Callable[[str], None]:
    """A progress printer that flushes each line (people follow it live)."""
    stream = out or sys.stdout

    def emit(line: str) -> None:
        print(line, file=stream, flush=True)

    return emit


def hadoop_path_exists(spark, path: str) -> bool:
    """Whether `path` exists on its file system (local, HDFS, S3...), via Hadoop."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(conf).exists(p)
