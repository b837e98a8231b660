"""`logflume etl offline|realtime`: the Spark jobs over the broker's nginx topic.

The jobs' options and runs are spark_etl/command.py's, which spark-submit's
spark_etl/submit.py uses as well.
"""

from spark_etl.command import add_job_parsers


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "etl",
        help="Spark jobs: hourly offline aggregates, near-real-time minute windows",
        description="Spark ETL over the broker's nginx access-log topic.",
    )
    add_job_parsers(p)
