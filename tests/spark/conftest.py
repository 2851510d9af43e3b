"""One local Spark session for every test in this folder; all of them carry the ``spark`` marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from slate_ops.spark import local_spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2]`` session (the JVM starts once, ~5-15 s), stopped at the end of the session."""
    session = local_spark_session("local[2]", "slate_ops-tests")
    try:
        yield session
    finally:
        session.stop()
