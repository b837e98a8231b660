import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Spark for all spark_etl tests (starting a JVM costs seconds). Its
    shuffle partitions come from spark_session's local default (2 x 2 cores)."""
    from spark_etl.session import spark_session

    session = spark_session(
        "local[2]",
        app="logflume-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.streaming.stopTimeout": "20s",
        },
        log_level="ERROR",
    )
    yield session
    session.stop()
