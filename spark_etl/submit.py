"""The ETL jobs as a `spark-submit` application.

    spark-submit [--master URL] [--conf k=v ...] spark_etl/submit.py offline|realtime [job options]

The job options are those of `logflume etl offline|realtime` (`--bootstrap-server`,
`--topic`, `--output`, `--checkpoint`, ...: spark_etl/command.py). spark-submit owns
the Spark settings: the session is created first from what spark-submit passed
(master, deploy settings, `--conf`), and the job then runs on that session, so its
own `--master` default never overrides the one given to spark-submit.

The driver and every executor need a Python with logflume installed (set
`PYSPARK_PYTHON`, or ship a packed virtualenv with `--archives`); see deploy/README.md.
"""

from __future__ import annotations

import argparse
import sys

from common.logformat import configure_logging
from spark_etl.command import JOBS, add_job_parsers


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in JOBS:
        print(f"usage: spark-submit [spark options] {__file__} {'|'.join(JOBS)} [job options]")
        return 2
    from pyspark.sql import SparkSession

    master = SparkSession.builder.getOrCreate().sparkContext.master
    assert master is not None  # a running context has one
    print(f"submit: {argv[0]} job on master {master}", flush=True)
    parser = argparse.ArgumentParser(prog="submit.py")
    add_job_parsers(parser)
    args = parser.parse_args([*argv, "--master", master])
    configure_logging("INFO", "text")
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
