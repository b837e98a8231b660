"""What the offline and near-real-time jobs share: the source stream, a producer
for what they publish, and progress output."""

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
    """The broker topic(s) as a streaming DataFrame of the `logflume` format
    (options: `source_options`)."""
    options = source_options(
        bootstrap, topic, starting_offsets, max_offsets_per_trigger, fail_on_data_loss, client
    )
    return spark.readStream.format("logflume").options(**options).load()


def source_options(
    bootstrap: str,
    topic: str,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    client: dict[str, str] | None = None,
) -> dict[str, str]:
    """The `logflume` source's options for the jobs. `client`: Kafka client properties
    (security.protocol, sasl.*, ssl.*, Java or librdkafka names), passed as Spark's
    Kafka source takes them: `kafka.<name>`."""
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": starting_offsets,
        "failOnDataLoss": str(fail_on_data_loss).lower(),
    }
    options.update((f"kafka.{key}", value) for key, value in (client or {}).items())
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    return options


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


class Publisher:
    """One producer for a job (acks=all); `send` returns once every row is
    acknowledged and raises if any failed. Thread-safe (the realtime job's batch
    thread and its finalizer both publish)."""

    def __init__(self, bootstrap: str, client: dict[str, str] | None = None):
        from confluent_kafka import Producer

        from common.kafka_properties import translate

        conf = {"bootstrap.servers": bootstrap} | translate(client or {})
        self.producer = Producer(conf | {"acks": "all", "linger.ms": 0})

    def send(self, topic: str, rows: list[tuple[bytes, bytes]]) -> None:
        """Produce (key, value) `rows` to `topic` and wait for them."""
        from confluent_kafka import KafkaException

        errors = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(err)

        for key, value in rows:
            self.producer.produce(topic, value, key, on_delivery=delivered)
        if self.producer.flush(30) or errors:
            raise KafkaException(errors[0] if errors else "publish: flush timed out")

    def close(self) -> None:
        self.producer.close()


def ensure_audit_topic(bootstrap: str, topic: str, client: dict[str, str] | None = None) -> None:
    """Create the audit topic as the agents do (common/audit.py) unless it exists."""
    import logging

    from common.audit import AUDIT_PARTITIONS, AUDIT_TOPIC_CONFIG
    from common.kafka_admin import ensure_topic
    from common.kafka_properties import translate

    conf = {"bootstrap.servers": bootstrap} | translate(client or {})
    log = logging.getLogger("spark_etl.audit")
    ensure_topic(conf, topic, AUDIT_PARTITIONS, AUDIT_TOPIC_CONFIG, log)
