"""How long a task Spark killed may still write, and the sweep of a failed load's SSTs after it.

When one task of a job fails, Spark fails the job at once and kills the others without waiting for
them; the caller (``bulk_load``, the data source's ``abort``) runs while they may still be writing
SSTs. A killed task's Python worker is not told: Spark's Python runner notices the kill on its
next check (``BasePythonRunner.MonitorThread`` checks every 2 s, a fixed interval), then gives the
worker ``spark.python.task.killTimeout`` (2 s by default) to finish before it kills the process.
Until then the task goes on writing, 4 s after the kill at worst on an idle machine. A sweep for a
failed load's SSTs is therefore repeated once that bound has passed (:func:`sweep_after_kills`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from slate_ops.errors import InvalidArgumentError
from slate_ops.runtime import SYSTEM_RUNTIME

KILL_CHECK_SECONDS = 2.0
"""How often Spark's Python runner checks whether its task was killed (fixed in Spark 3 and 4)."""
KILL_TIMEOUT_CONF = "spark.python.task.killTimeout"
DEFAULT_KILL_TIMEOUT_SECONDS = 2.0
"""``spark.python.task.killTimeout``'s default: how long a killed task's worker may still run."""
MARGIN_SECONDS = 1.0
"""For the kill to reach the task and the worker to die on a loaded machine."""

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_TIME = re.compile(r"(\d+)\s*([a-z]*)")


def kill_grace_seconds(kill_timeout_s: float = DEFAULT_KILL_TIMEOUT_SECONDS) -> float:
    """Seconds after a job failed by which every task Spark killed has stopped writing."""
    return KILL_CHECK_SECONDS + kill_timeout_s + MARGIN_SECONDS


def session_kill_grace(spark: SparkSession) -> float:
    """:func:`kill_grace_seconds` for ``spark``'s ``spark.python.task.killTimeout``."""
    given = spark.conf.get(KILL_TIMEOUT_CONF, None)
    return kill_grace_seconds(DEFAULT_KILL_TIMEOUT_SECONDS if given is None else spark_seconds(given))


def spark_seconds(value: str) -> float:
    """A Spark time setting in seconds (a bare number is in milliseconds, as Spark reads this one)."""
    match = _TIME.fullmatch(value.strip().lower())
    if match is None or match.group(2) not in {"", *_UNITS}:
        raise InvalidArgumentError(f"{KILL_TIMEOUT_CONF} is {value!r}, not a time such as '2s' or '2000ms'")
    return int(match.group(1)) * _UNITS[match.group(2) or "ms"]


def sweep_after_kills(sweep: Callable[[], int], *, grace_s: float, failed_at: float) -> int:
    """Run ``sweep`` (a failed load's :func:`~slate_ops.spark.bulk_load.delete_load_orphans`) now,
    and again once ``grace_s`` has passed since ``failed_at`` (``SYSTEM_RUNTIME.monotonic()`` when
    the job failed): the tasks Spark killed may write until then. Returns the files deleted."""
    deleted = sweep()
    time.sleep(max(0.0, failed_at + grace_s - SYSTEM_RUNTIME.monotonic()))
    return deleted + sweep()


__all__ = [
    "DEFAULT_KILL_TIMEOUT_SECONDS",
    "KILL_CHECK_SECONDS",
    "KILL_TIMEOUT_CONF",
    "MARGIN_SECONDS",
    "kill_grace_seconds",
    "session_kill_grace",
    "spark_seconds",
    "sweep_after_kills",
]
