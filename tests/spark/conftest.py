"""One local Spark session for the tests in this folder (all of them carry the ``spark`` marker);
they read and write ``local_dir_store`` (tests/support/stores.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from slate_ops.spark import local_spark_session


@pytest.fixture(scope="session")
def _spark_jvm() -> Iterator[None]:
    """Stops the active session at the end of the test session."""
    yield
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@pytest.fixture
def spark(_spark_jvm: None) -> SparkSession:
    """The active ``local[2]`` session: started once (the JVM, ~5-15 s) and reused, or started again
    if a test stopped it (the standalone-cluster test stops it to connect to its master)."""
    active = SparkSession.getActiveSession()
    if active is not None and (active.sparkContext.master or "").startswith("local"):
        return active
    if active is not None:
        active.stop()
    return local_spark_session("local[2]", "slate_ops-tests")
