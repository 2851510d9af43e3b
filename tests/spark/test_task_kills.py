"""After a failed Spark job, the tasks Spark killed may write for a few more seconds: the sweeps of
a failed load wait them out (slate_ops/spark/task_kills.py)."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import StructType

from slate_ops.errors import InvalidArgumentError
from slate_ops.objstore import LocalStore
from slate_ops.runtime import SYSTEM_RUNTIME
from slate_ops.spark import register
from slate_ops.spark.datasource import SlateOpsDataSource
from slate_ops.spark.task_kills import (
    DEFAULT_KILL_TIMEOUT_SECONDS,
    KILL_CHECK_SECONDS,
    kill_grace_seconds,
    spark_seconds,
    sweep_after_kills,
)
from tests.spark.test_datasource import PATH, SCHEMA, contents, no_new_data, populate
from tests.support.stores import snapshot


def test_the_grace_outlasts_sparks_own_bound_on_a_killed_python_task(spark: SparkSession) -> None:
    """Spark notices a kill on its 2 s check, then lets the worker run for killTimeout (2 s): the
    3 s once waited here let a killed task write an SST after abort's last sweep."""
    worst = KILL_CHECK_SECONDS + DEFAULT_KILL_TIMEOUT_SECONDS
    assert worst == 4.0
    assert kill_grace_seconds() > worst
    assert kill_grace_seconds(30.0) > 30.0 + KILL_CHECK_SECONDS
    assert register(spark).kill_grace_s == kill_grace_seconds()  # the session's default killTimeout


@pytest.mark.parametrize(
    ("given", "seconds"), [("2s", 2.0), ("2000ms", 2.0), ("2000", 2.0), ("1min", 60.0), (" 3 S ", 3.0)]
)
def test_spark_time_settings_are_read_as_spark_reads_them(given: str, seconds: float) -> None:
    assert spark_seconds(given) == seconds


@pytest.mark.parametrize("given", ["", "two seconds", "2 fortnights", "-1s", "1.5s"])
def test_a_time_setting_spark_would_refuse_is_refused(given: str) -> None:
    with pytest.raises(InvalidArgumentError, match="killTimeout"):
        spark_seconds(given)


def test_the_second_sweep_runs_once_the_grace_has_passed_since_the_failure() -> None:
    calls: list[float] = []

    def sweep() -> int:
        calls.append(SYSTEM_RUNTIME.monotonic())
        return 1

    failed_at = SYSTEM_RUNTIME.monotonic() - 0.2  # the job failed a moment before
    assert sweep_after_kills(sweep, grace_s=0.5, failed_at=failed_at) == 2
    first, second = calls
    assert first < failed_at + 0.5 <= second


def test_abort_deletes_an_sst_a_killed_task_wrote_after_it_started(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    """The writer's own steps, run in this process as Spark runs them: one task finished (its
    message reaches abort), another was killed and writes its SST while abort already runs."""
    populate(local_dir_store, 20)
    source = SlateOpsDataSource(CaseInsensitiveDict(store=local_dir_store.url, path=PATH))
    schema = StructType.fromDDL(SCHEMA)
    assert isinstance(schema, StructType)
    writer = source.writer(schema, overwrite=False)  # the running writer's data goes to L0
    data, before = contents(local_dir_store), snapshot(local_dir_store)
    assert writer.kill_grace_s == kill_grace_seconds()
    writer.kill_grace_s = 2.0  # the mechanism, not Spark's bound: the late task is done long before
    finished = writer.write(iter([pa.RecordBatch.from_pydict({"key": [b"a1"], "value": [b"1"]})]))
    late = pa.RecordBatch.from_pydict({"key": [b"x1", b"x2"], "value": [b"1", b"2"]})
    killed = threading.Timer(0.5, lambda: writer.write(iter([late])))  # after abort's first sweep
    started = SYSTEM_RUNTIME.monotonic()
    killed.start()
    writer.abort([finished, None])
    killed.join()
    assert SYSTEM_RUNTIME.monotonic() - started >= 2.0
    no_new_data(local_dir_store, before, data)
