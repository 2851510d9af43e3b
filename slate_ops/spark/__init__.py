"""The Spark side of slate_ops: compaction executed as Spark tasks (``docs/design/spark.md``).

This package imports pyspark; nothing below it in slate_ops does.
"""

from slate_ops.spark.executor import LOCAL_CONFIG, SparkExecutor, local_spark_session

__all__ = ["LOCAL_CONFIG", "SparkExecutor", "local_spark_session"]
