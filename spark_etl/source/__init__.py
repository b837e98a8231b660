"""The `logflume` PySpark data source (format "logflume"); see datasource.py."""

from spark_etl.source.datasource import SCHEMA, LogflumeDataSource
from spark_etl.source.options import DataLossError

__all__ = ["SCHEMA", "DataLossError", "LogflumeDataSource"]
