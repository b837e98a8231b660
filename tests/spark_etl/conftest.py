import os

import pytest

# py4j's callback server (the Python side of every foreachBatch call) waits for
# connections with select(), which cannot watch a descriptor numbered 1024 or more:
# started in a process with that many files open, it dies at once and the first
# foreachBatch batch waits for it forever.
SELECT_FD_LIMIT = 1024


@pytest.fixture(scope="session")
def spark():
    """One local Spark for all spark_etl tests (starting a JVM costs seconds). Its
    shuffle partitions come from spark_session's local default (2 x 2 cores).

    The callback server starts here, with the session, so that a descriptor leaked
    by an earlier test fails this fixture with a clear message instead of hanging
    the first streaming test."""
    from pyspark.java_gateway import ensure_callback_server_started

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
    gateway = session.sparkContext._gateway
    ensure_callback_server_started(gateway)
    fd = gateway._callback_server.server_socket.fileno()
    open_fds = len(os.listdir("/proc/self/fd"))
    assert fd < SELECT_FD_LIMIT, (
        f"py4j's callback server got descriptor {fd} ({open_fds} open): an earlier "
        "test leaks file descriptors"
    )
    yield session
    session.stop()
