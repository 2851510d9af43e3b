"""The Spark side of slate_ops (``docs/design/spark.md``): compaction executed as Spark tasks,
databases read as DataFrames (:func:`read_db`, :func:`tags_table`) and DataFrames bulk-loaded
into databases (:func:`bulk_load`); the same as a Spark data source, ``format("slate_ops")``
(:func:`register`). S3 credentials reach the tasks through the session's
``spark.slate_ops.s3.*`` settings (:class:`S3Credentials`).

This package imports pyspark; nothing below it in slate_ops does.
"""

from slate_ops.spark.bulk_load import BulkLoadReport, bulk_load
from slate_ops.spark.credentials import S3Credentials
from slate_ops.spark.datasource import FORMAT, SlateOpsDataSource, register
from slate_ops.spark.executor import LOCAL_CONFIG, SparkExecutor, local_spark_session
from slate_ops.spark.read import read_db, tags_table

__all__ = [
    "FORMAT",
    "LOCAL_CONFIG",
    "BulkLoadReport",
    "S3Credentials",
    "SlateOpsDataSource",
    "SparkExecutor",
    "bulk_load",
    "local_spark_session",
    "read_db",
    "register",
    "tags_table",
]
