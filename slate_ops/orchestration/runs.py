"""What every per-database run shares: the ``slate_ops/db`` run tag, the ``database`` op config,
the retry policy of the idempotent steps, :class:`StepResult` (a step's report as metadata) and
:func:`run_step`, which runs one on the run's database; the single-step jobs (:func:`one_op_job`)
and what the sensors and schedules request (:func:`database_run_request`, :func:`op_run_config`,
:func:`run_key`)."""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import dagster as dg
from pydantic import Field

from slate_ops.errors import ConfigError
from slate_ops.orchestration.config import DatabaseConfig

DB_TAG = "slate_ops/db"
"""Run tag naming the database a run maintains; the per-database concurrency limit keys on it."""

IDEMPOTENT_RETRY = dg.RetryPolicy(max_retries=2, delay=1, backoff=dg.Backoff.EXPONENTIAL)
"""Retries of the idempotent steps only: checkpoint expiry and tag policies converge on the same
state however often they run (each commit is create-if-absent on the manifest). Compaction (each
attempt fences and picks afresh) and GC (deletes; a failure carries the report) never retry."""


R = TypeVar("R")


@dataclass(frozen=True)
class StepResult(Generic[R]):
    """What one maintenance step did: its report, the report as run metadata, and one line."""

    report: R
    metadata: dict[str, dg.MetadataValue]
    summary: str


class DatabaseOpConfig(dg.Config):
    """Run config shared by the per-database ops: which database the run maintains."""

    database: str | None = Field(
        default=None,
        description=f"The database; defaults to the run's {DB_TAG} tag, which must agree if both are set.",
    )


def target_database(context: dg.OpExecutionContext, configured: str | None) -> str:
    """The database a run maintains: the op config's ``database``, else the run tag ``slate_ops/db``
    (both set: they must agree); a run without the tag gets a warning."""
    tagged = context.run_tags.get(DB_TAG)
    if configured and tagged and configured != tagged:
        raise ConfigError(
            f"op config names database {configured!r} but the run tag {DB_TAG} is {tagged!r}; "
            "they must agree, or the per-database concurrency limit serialises the wrong database"
        )
    name = configured or tagged
    if not name:
        raise ConfigError(f"no database given: set the run tag {DB_TAG}=<name> (or the op config 'database')")
    if not tagged:
        context.log.warning(f"run has no {DB_TAG} tag: the per-database concurrency limit does not apply")
    return name


def run_step(
    context: dg.OpExecutionContext,
    database: str | None,
    step: Callable[[str], StepResult[R]],
    *,
    timed: bool = False,
) -> dg.Output[R]:
    """``step`` on the run's database (:func:`target_database` of the op config's ``database``), as
    the op's output: its report, with its metadata; ``timed`` adds ``step_summary`` and
    ``duration_s`` (the maintenance job's steps)."""
    name = target_database(context, database)
    started = time.monotonic()
    result = step(name)
    metadata = result.metadata
    if timed:
        metadata = {
            **metadata,
            "step_summary": dg.MetadataValue.text(result.summary),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
        }
    return dg.Output(result.report, metadata=metadata)


def one_op_job(op: dg.OpDefinition, *, name: str, description: str) -> dg.JobDefinition:
    """The job ``name`` that runs ``op`` alone (the single-step jobs)."""

    @dg.job(name=name, description=description)
    def _job() -> None:
        op()

    return _job


def run_key(prefix: str, database: str, tick: datetime) -> str:
    """``<prefix>-<database>-<YYYYmmddTHHMMZ>``: one run per database and schedule tick."""
    return f"{prefix}-{database}-{tick.astimezone(UTC):%Y%m%dT%H%MZ}"


def database_run_request(db: DatabaseConfig, run_key: str, run_config: dict[str, Any]) -> dg.RunRequest:
    """A run of ``db``, tagged ``slate_ops/db=<name>`` for the per-database concurrency limit."""
    return dg.RunRequest(run_key=run_key, run_config=run_config, tags={DB_TAG: db.name})


def op_run_config(op: str, **config: Any) -> dict[str, Any]:
    """The run config of a job whose op ``op`` takes ``config``."""
    return {"ops": {op: {"config": config}}}
