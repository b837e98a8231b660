"""spark_session's defaults, and the settings that give its JVM logflume's logging
(what they do to a real run: test_spark_logging.py)."""

import logging
import os

import pytest

from spark_etl.session import (
    DRIVER_HOST,
    DRIVER_JAVA_OPTIONS,
    LOG4J2_CONFIG,
    SHUFFLE_PARTITIONS,
    cluster_listeners,
    driver_settings,
    java_property,
    local_cores,
    spark_defaults,
)


@pytest.mark.parametrize(
    ("master", "cores"),
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[*]", os.cpu_count()),
        ("local[2,4]", 2),
        ("local[*, 3]", os.cpu_count()),
        ("local-cluster[2,1,1024]", None),
        ("spark://host:7077", None),
        ("yarn", None),
    ],
)
def test_local_cores(master, cores):
    assert local_cores(master) == cores


def test_local_master_gets_few_shuffle_partitions(spark):
    # The test session (local[2]) sets no shuffle partitions of its own.
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "4"


def test_py4j_callbacks_do_not_log_at_info(spark):
    # One INFO line per micro-batch and query would drown the job's progress lines.
    assert logging.getLogger("py4j").getEffectiveLevel() == logging.WARNING


def test_driver_settings_add_the_log4j_configuration_and_keep_the_callers_options():
    assert driver_settings({}, None) == {
        DRIVER_JAVA_OPTIONS: f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}"
    }
    mine = {DRIVER_JAVA_OPTIONS: " -Xss4m -Dmy.option=1 "}
    options = driver_settings(mine, "/var/log/spark.log")[DRIVER_JAVA_OPTIONS]
    assert options == (
        f"-Xss4m -Dmy.option=1 -Dlog4j2.configurationFile={LOG4J2_CONFIG} "
        "-Dlogflume.spark.log=/var/log/spark.log"
    )


def test_a_log4j_configuration_of_the_callers_own_wins():
    for option in ("-Dlog4j2.configurationFile=/etc/mine.xml", "-Dlog4j.configurationFile=x"):
        assert driver_settings({DRIVER_JAVA_OPTIONS: option}, None) == {}
        with_file = driver_settings({DRIVER_JAVA_OPTIONS: option}, "/l/spark.log")
        assert with_file == {DRIVER_JAVA_OPTIONS: f"{option} -Dlogflume.spark.log=/l/spark.log"}


def test_java_properties_are_quoted_for_sparks_option_splitting():
    assert java_property("a.b", "/plain/path") == "-Da.b=/plain/path"
    assert java_property("a.b", "/my logs/x") == '"-Da.b=/my logs/x"'
    assert java_property("a", 'it\'s "q"\\') == '"-Da=it\'s \\"q\\"\\\\"'


def test_spark_defaults_come_from_the_conf_dir(tmp_path, monkeypatch):
    """spark_session overlays its settings on these: without reading them, its Java
    options would replace those of spark-defaults.conf."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# site settings\n"
        "spark.driver.extraJavaOptions   -Dsite.option=1 \n"
        "spark.sql.shuffle.partitions=8\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    defaults = spark_defaults()
    assert defaults == {DRIVER_JAVA_OPTIONS: "-Dsite.option=1", SHUFFLE_PARTITIONS: "8"}
    settings = driver_settings(defaults, None)
    assert settings == {
        DRIVER_JAVA_OPTIONS: f"-Dsite.option=1 -Dlog4j2.configurationFile={LOG4J2_CONFIG}"
    }
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    assert spark_defaults() == {}


@pytest.mark.parametrize(
    "master",
    [
        "spark://127.0.0.1:7077",
        "spark://127.0.0.1:7077,127.0.0.2:7077",  # standby masters
        "spark://127.0.0.1",  # the default port
    ],
)
def test_on_a_standalone_master_the_driver_takes_the_address_that_reaches_it(master, monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)
    assert cluster_listeners(master, {}) == {DRIVER_HOST: "127.0.0.1"}


def test_the_users_driver_address_and_other_masters_keep_sparks_choice(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)
    master = "spark://127.0.0.1:7077"
    assert cluster_listeners(master, {DRIVER_HOST: "10.0.0.5"}) == {}
    for other in ("yarn", "k8s://https://127.0.0.1:6443", "local-cluster[2,1,1024]"):
        assert cluster_listeners(other, {}) == {}
    for variable in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME"):
        with monkeypatch.context() as m:
            m.setenv(variable, "127.0.0.1")
            assert cluster_listeners(master, {}) == {}
