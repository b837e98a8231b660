"""spark_session's defaults."""

import logging
import os

import pytest

from spark_etl.session import SHUFFLE_PARTITIONS, local_cores


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
