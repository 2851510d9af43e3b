"""The Spark side of slate_ops (``docs/design/spark.md``): compaction executed as Spark tasks,
databases read as DataFrames (:func:`read_db`, :func:`tags_table`) and DataFrames bulk-loaded
into databases (:func:`bulk_load`).

This package imports pyspark; nothing below it in slate_ops does.
"""

from slate_ops.spark.bulk_load import BulkLoadReport, bulk_load
from slate_ops.spark.executor import LOCAL_CONFIG, SparkExecutor, local_spark_session
from slate_ops.spark.read import read_db, tags_table

__all__ = [
    "LOCAL_CONFIG",
    "BulkLoadReport",
    "SparkExecutor",
    "bulk_load",
    "local_spark_session",
    "read_db",
    "tags_table",
]
