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

from slate_ops.errors import (
    ConfigError,
    ObjectNotFoundError,
    ObjectStoreCredentialsError,
    ObjectStoreError,
    SequenceConflictError,
)
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.cost import source_of_op
from slate_ops.orchestration.naming import DEFAULT, Naming
from slate_ops.orchestration.naming import PARTITIONS_NAME as PARTITIONS_NAME
from slate_ops.orchestration.request_meter import metered_step

DB_TAG = "slate_ops/db"
"""Run tag naming the database of a run that is not a partition (``clone_job``, ``rescale_job``, and
the requests of the schedules and sensors, to serialise them with those); a concurrency limit keys
on it."""

DATABASES = DEFAULT.partitions
"""The partitions of the per-database jobs (compaction, GC, checkpoint expiry, tag policy): one
key per database name, kept in sync with the fleet (configured and discovered) by
``slate_ops_partitions_sensor``. A run's partition key is the database it maintains; the
per-database concurrency limit keys on the ``dagster/partition`` tag. (A prefixed fleet's are
``<prefix>slate_ops_databases``: :attr:`Naming.partitions`.)"""

IDEMPOTENT_RETRY = dg.RetryPolicy(max_retries=2, delay=1, backoff=dg.Backoff.EXPONENTIAL)
"""Retries of the idempotent steps only: checkpoint expiry and tag policies converge on the same
state however often they run (each commit is create-if-absent on the manifest). Compaction (each
attempt fences and picks afresh) and GC (deletes; a failure carries the report) never retry. Even
there only a :func:`transient` error is retried: :func:`run_step` turns any other into a
:class:`dagster.Failure` that does not retry."""


def transient(error: BaseException) -> bool:
    """Whether a retry of the step can succeed: a network or object-store error (not a missing
    object or refused credentials) or a lost commit race. A config error, a missing database and
    every other error fail the same way again."""
    if isinstance(error, ObjectNotFoundError | ObjectStoreCredentialsError):
        return False
    return isinstance(error, ConnectionError | TimeoutError | ObjectStoreError | SequenceConflictError)


R = TypeVar("R")
T = TypeVar("T")


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
    """The database a run maintains: the run's partition key (the partitioned jobs), else the op
    config's ``database``, else the run tag ``slate_ops/db``; those that are set must agree. None
    set: a :class:`dagster.Failure` that is never retried."""
    partition = context.partition_key if context.has_partition_key else None
    tagged = context.run_tags.get(DB_TAG)
    given = {
        source: value
        for source, value in (
            ("partition key", partition),
            ("op config 'database'", configured),
            (f"run tag {DB_TAG}", tagged),
        )
        if value
    }
    if len(set(given.values())) > 1:
        raise _no_retry(
            ConfigError(
                "the run names different databases: "
                + ", ".join(f"{source} {value!r}" for source, value in given.items())
                + "; they must agree, or the per-database concurrency limit serialises the wrong database"
            )
        )
    if not given:
        raise _no_retry(
            ConfigError(
                "no database given: launch a partition of the job (the partition key is the database), "
                f"or set the run tag {DB_TAG}=<name> or the op config 'database'"
            )
        )
    return next(iter(given.values()))


def _no_retry(error: Exception) -> dg.Failure:
    """``error`` as a step failure that Dagster does not retry, with its message as the description."""
    failure = dg.Failure(description=f"{type(error).__name__}: {error}", allow_retries=False)
    failure.__cause__ = error
    return failure


def run_step(
    context: dg.OpExecutionContext,
    database: str | None,
    step: Callable[[str], StepResult[R]],
    *,
    timed: bool = False,
    naming: Naming = DEFAULT,
) -> dg.Output[R]:
    """``step`` on the run's database (:func:`target_database` of the op config's ``database``), as
    the op's output: its report, with its metadata; ``timed`` adds ``step_summary`` and
    ``duration_s`` (the maintenance job's steps). An error a retry cannot fix (not :func:`transient`)
    fails the step at once, without retries. The step runs through ``naming``'s ``run_step`` hook,
    metered (:func:`metered_run`: ``requests`` and ``request_cost_usd`` join the metadata)."""
    name = target_database(context, database)
    started = time.perf_counter()  # how long the step took, for a person: real time
    try:
        result: StepResult[R]
        result, requests = metered_run(context, naming, name, lambda: step(name))
    except dg.Failure:
        raise
    except Exception as error:
        if transient(error):
            raise  # the op's retry policy, if any, applies
        raise _no_retry(error) from error
    metadata = {**result.metadata, **requests}
    if timed:
        metadata = {
            **metadata,
            "step_summary": dg.MetadataValue.text(result.summary),
            "duration_s": dg.MetadataValue.float(round(time.perf_counter() - started, 3)),
        }
    return dg.Output(result.report, metadata=metadata)


def metered_run(
    context: dg.OpExecutionContext, naming: Naming, database: str, run: Callable[[], T]
) -> tuple[T, dict[str, dg.MetadataValue]]:
    """``run()`` through ``naming``'s ``run_step`` hook with the step's object-store requests metered
    (:func:`~slate_ops.orchestration.request_meter.metered_step`): its result and the requests'
    metadata. The requests are recorded on ``database``'s asset, under the op's source
    (:func:`~slate_ops.orchestration.cost.source_of_op`), priced by the config's ``prices``."""
    slate = naming.slate(context)
    return metered_step(
        context,
        naming.asset_key(slate, database),
        source_of_op(context.op_def.name, naming.prefix),
        slate.config.prices.table(),
        lambda: naming.run_step(context, database, run),
    )


IN_PROCESS = dg.in_process_executor
"""The executor of every job whose steps are short object-store calls: one process per run, instead
of one per step (each of which imports Dagster and slate_ops anew, seconds per step)."""


def one_op_job(
    op: dg.OpDefinition,
    *,
    name: str,
    description: str,
    executor_def: dg.ExecutorDefinition = IN_PROCESS,
    partitions_def: dg.PartitionsDefinition[str] | None = None,
) -> dg.JobDefinition:
    """The job ``name`` that runs ``op`` alone (the single-step jobs), in process unless
    ``executor_def`` says otherwise, partitioned by ``partitions_def`` if given."""

    @dg.job(name=name, description=description, executor_def=executor_def, partitions_def=partitions_def)
    def _job() -> None:
        op()

    return _job


def run_key(prefix: str, database: str, tick: datetime) -> str:
    """``<prefix>-<database>-<YYYYmmddTHHMMZ>``: one run per database and schedule tick."""
    return f"{prefix}-{database}-{tick.astimezone(UTC):%Y%m%dT%H%MZ}"


def database_run_request(
    db: DatabaseConfig,
    run_key: str,
    run_config: dict[str, Any],
    *,
    partitioned: bool = True,
    naming: Naming = DEFAULT,
) -> dg.RunRequest:
    """A run of the partition ``db.name`` (unless not ``partitioned``), tagged ``slate_ops/db=<name>``:
    the per-database concurrency limits key on both, so it is also serialised with that database's
    unpartitioned runs (maintenance, clone, rescale). A prefixed fleet's runs also carry
    ``slate_ops/fleet=<prefix>``."""
    return dg.RunRequest(
        run_key=run_key,
        run_config=run_config,
        partition_key=db.name if partitioned else None,
        tags={DB_TAG: db.name, **naming.tags()},
    )


def op_run_config(op: str, **config: Any) -> dict[str, Any]:
    """The run config of a job whose op ``op`` takes ``config``."""
    return {"ops": {op: {"config": config}}}
