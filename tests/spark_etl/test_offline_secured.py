"""The offline job reading over SASL_SSL (SCRAM-SHA-512): the connection settings
come as Kafka Java client properties (what `logflume etl offline --command-config`
passes on as `kafka.*` options), and the password shows in no progress line."""

from datetime import UTC, datetime

import pytest

from logflume import client_config
from spark_etl import loggen
from spark_etl.jobs.offline import run_offline
from testkit.kafka import create_topic, produce
from testkit.secured import start_secured_broker

PASSWORD = "spark-secret"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    secured = start_secured_broker(tmp_path_factory.mktemp("sec"), {"spark": PASSWORD})
    yield secured
    secured.stop()


def test_offline_job_reads_over_sasl_ssl(spark, secured, tmp_path):
    create_topic(secured.plain, "access", 1)
    start = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    sent = list(loggen.generate(start, start.replace(hour=11), 200, seed=3, bad_ratio=0))
    produce(secured.plain, "access", [i.line().encode() for i in sent])
    props = tmp_path / "spark.properties"
    props.write_text(secured.java_properties("spark", PASSWORD))
    out, log = str(tmp_path / "out"), []
    report = run_offline(
        spark, bootstrap=secured.sasl_ssl, topic="access", output=out,
        checkpoint=str(tmp_path / "ckpt"), client=client_config.read(str(props)),
        say=log.append,
    )  # fmt: skip
    assert (report.rows, report.rejected) == (200, 0)
    assert spark.read.parquet(f"{out}/hourly").count() > 0
    assert not any(PASSWORD in line for line in log)


def test_the_password_is_not_in_the_query_plan(spark, secured, tmp_path):
    props = tmp_path / "spark.properties"
    props.write_text(secured.java_properties("spark", PASSWORD))
    reader = spark.readStream.format("logflume").option("subscribe", "access")
    reader = reader.option("kafka.bootstrap.servers", secured.sasl_ssl)
    for key, value in client_config.read(str(props)).items():
        reader = reader.option(f"kafka.{key}", value)
    plan = reader.load()._jdf.queryExecution().toString()
    assert "jaas" in plan and PASSWORD not in plan
