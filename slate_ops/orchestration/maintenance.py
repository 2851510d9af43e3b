"""Maintenance in Dagster: ``maintenance_job`` runs checkpoint expiry, compaction, tag policy and GC
of one database, in that order, as four ops, each a thin adapter over the same step helpers as the
single-step jobs; ``maintenance_schedule`` runs it daily.

The job is partitioned like the single-step jobs (dynamic partitions ``slate_ops_databases``): a
run's partition key is the database it maintains. Dagster refuses a :class:`dagster.ConfigMapping` on
a partitioned job, so each of the four ops takes the same op config, :class:`MaintenanceConfig`
(:func:`maintenance_run_config` writes it for all four)::

    ops:
      maintenance_expire_checkpoints: {config: {dry_run: false}}
      maintenance_compact: {config: {dry_run: false, executor: local, full: true}}
      maintenance_tag_policy: {config: {dry_run: false}}
      maintenance_gc: {config: {dry_run: false}}

    database: demo     # optional: the partition key, else the run's slate_ops/db tag (set: they must agree)
    dry_run: true      # the default: the step only reports (compaction: what it would pick)
    executor: database # compaction only: local / spark override the database's compaction.executor
    full: null         # compaction only: true / false override the database's compaction.full

With ``dry_run: false`` each step runs for real unless the database's policy keeps it a dry run
(``checkpoints.expiry_dry_run``, ``gc.dry_run``). Every op's output metadata is its step's report
(the single-step jobs' tables and counts) plus ``step_summary``, one line, and ``duration_s``;
:func:`run_summary` joins the lines into the text the demo prints.

Every run maintains exactly one database (its partition; the schedule's runs also carry the
``slate_ops/db`` tag); a failed step stops the run. After the last step, a run that was not entirely
a dry run records the database's asset checks (the same :func:`~slate_ops.orchestration.checks.verify_results`
as its ``multi_asset_check``) and an observation of its state again, so the UI shows the database
as maintenance left it. Runs come from two places:

- ``maintenance_schedule``, daily at 03:00 UTC, one run per existing database, for real except the
  steps its policy keeps dry (``checkpoints.expiry_dry_run``, ``gc.dry_run``);
- an operator (UI launchpad, ``dagster job execute``, ``.ci/demo``): a partition (or the tag
  ``slate_ops/db=<name>``), a dry run for every step whose op config does not say ``dry_run: false``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from slate_ops.admin import read_manifest
from slate_ops.compaction import Proposal, propose
from slate_ops.manifest.model import Manifest
from slate_ops.orchestration import runs
from slate_ops.orchestration.checkpoints import expire_step
from slate_ops.orchestration.checks import record_state
from slate_ops.orchestration.compaction import SPARK_POOL, ExecutorChoice, compact_step, executor_of
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import database_exists, database_schedule
from slate_ops.orchestration.gc import gc_step
from slate_ops.orchestration.metadata import metadata_of
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG
from slate_ops.orchestration.tags import tag_policy_step

MAINTENANCE_JOB = "maintenance_job"
"""Name of the job that runs the four steps below."""

SCHEDULE_NAME = "maintenance_schedule"

STEPS = (
    "maintenance_expire_checkpoints",
    "maintenance_compact",
    "maintenance_tag_policy",
    "maintenance_gc",
)
"""The ops of the maintenance job, in the order they run."""

STEP_LABELS = dict(
    zip(STEPS, ("checkpoint expiry", "compaction", "tag policy", "garbage collection"), strict=True)
)


class MaintenanceConfig(runs.DatabaseOpConfig):
    """Op config of each maintenance step (the same for all four; ``executor`` and ``full`` matter
    only to compaction)."""

    dry_run: bool = Field(
        default=True,
        description="Only report (the default). false: run for real unless the database's policy keeps "
        "the step a dry run (checkpoints.expiry_dry_run, gc.dry_run).",
    )
    executor: ExecutorChoice = Field(
        default="database", description="Compaction executor; database: its compaction.executor."
    )
    full: bool | None = Field(
        default=None, description="Full compaction (one sorted run); unset: the database's compaction.full."
    )


def maintenance_run_config(
    *,
    dry_run: bool = True,
    executor: ExecutorChoice = "database",
    full: bool | None = None,
    database: str | None = None,
) -> dict[str, Any]:
    """The run config that gives every step of the job the same :class:`MaintenanceConfig`."""
    config: dict[str, Any] = {"dry_run": dry_run, "executor": executor, "full": full}
    if database is not None:
        config["database"] = database
    return {"ops": {step: {"config": dict(config)} for step in STEPS}}


def real_run(run_config: object) -> bool:
    """Whether a run with ``run_config`` runs any step for real (some op config says ``dry_run: false``)."""
    ops = run_config.get("ops") if isinstance(run_config, dict) else None
    if not isinstance(ops, dict):
        return False
    for step in STEPS:
        op = ops.get(step)
        config = op.get("config") if isinstance(op, dict) else None
        if isinstance(config, dict) and config.get("dry_run", True) is False:
            return True
    return False


StepFn = Callable[
    [dg.OpExecutionContext, MaintenanceConfig, SlateDatabasesResource, str], runs.StepResult[Any]
]
"""One maintenance step on the named database (the steps that need only the ``slate`` resource)."""


def _step_op(
    name: str,
    description: str,
    step: StepFn,
    *,
    first: bool = False,
    retry_policy: dg.RetryPolicy | None = None,
) -> dg.OpDefinition:
    """The op ``name`` that runs ``step`` on the run's database, timed (:func:`runs.run_step`), after
    the previous step unless it is the ``first``."""

    @dg.op(
        name=name,
        ins=None if first else {"after": dg.In(dg.Nothing)},
        description=description,
        retry_policy=retry_policy,
    )
    def _op(
        context: dg.OpExecutionContext, config: MaintenanceConfig, slate: SlateDatabasesResource
    ) -> dg.Output[Any]:
        return runs.run_step(
            context, config.database, lambda db: step(context, config, slate, db), timed=True
        )

    return _op


def _expire_checkpoints(
    context: dg.OpExecutionContext, config: MaintenanceConfig, slate: SlateDatabasesResource, name: str
) -> runs.StepResult[Any]:
    dry_run = config.dry_run or slate.database(name).checkpoints.expiry_dry_run
    return expire_step(context, slate, name, dry_run=dry_run)


maintenance_expire_checkpoints = _step_op(
    "maintenance_expire_checkpoints",
    "Step 1: remove the database's expired checkpoints (or report them).",
    _expire_checkpoints,
    first=True,
    retry_policy=runs.IDEMPOTENT_RETRY,
)


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    description="Step 2: one compaction of the database (a dry run reports what it would pick).",
    pool=SPARK_POOL,
)
def maintenance_compact(
    context: dg.OpExecutionContext,
    config: MaintenanceConfig,
    slate: SlateDatabasesResource,
    pyspark: LazyPySparkResource,
) -> dg.Output[Any]:
    def step(name: str) -> runs.StepResult[Any]:
        db = slate.database(name)
        full = db.compaction.full if config.full is None else config.full
        if config.dry_run:
            proposal = _proposal(slate, db, full=full)
            context.log.info(f"{name}: {proposal.summary}")
            return proposal
        executor = executor_of(db, config.executor)
        return compact_step(context, slate, pyspark, name, executor=executor, full=full)

    return runs.run_step(context, config.database, step, timed=True)


def _tag_policy(
    context: dg.OpExecutionContext, config: MaintenanceConfig, slate: SlateDatabasesResource, name: str
) -> runs.StepResult[Any]:
    if slate.database(name).tag_policy is None:
        summary = "skipped: the database has no tag_policy"
        context.log.info(f"{name}: {summary}")
        return runs.StepResult(None, metadata_of(database=name), summary)
    return tag_policy_step(context, slate, name, dry_run=config.dry_run)


maintenance_tag_policy = _step_op(
    "maintenance_tag_policy",
    "Step 3: apply the database's tag policy (skipped without one).",
    _tag_policy,
    retry_policy=runs.IDEMPOTENT_RETRY,
)


def _gc(
    context: dg.OpExecutionContext, config: MaintenanceConfig, slate: SlateDatabasesResource, name: str
) -> runs.StepResult[Any]:
    db = slate.database(name)
    result = gc_step(context, slate, name, db.gc.options(), dry_run=config.dry_run or db.gc.dry_run)
    if real_run(context.run_config):
        record_state(context, slate, name)
    return result


maintenance_gc = _step_op(
    "maintenance_gc",
    "Step 4: garbage-collect the database with its gc policy (a failure carries the report); after a "
    "run that was not all dry, record the database's checks and an observation of its state again.",
    _gc,
)


def _proposal(slate: SlateDatabasesResource, db: DatabaseConfig, *, full: bool) -> runs.StepResult[None]:
    """What the compactor would pick now (reads the manifest; fences and writes nothing)."""
    current = read_manifest(db.path, slate.open_store(db.name))
    proposal = propose(current.value, db.compactor_options(), full=full)
    metadata = metadata_of(
        database=db.name,
        dry_run=True,
        full=full,
        manifest_id=current.id,
        compacted=False,
    )
    if proposal is None:
        return runs.StepResult(None, metadata, f"would compact nothing at manifest {current.id}")
    ssts, size = _inputs(current.value, proposal)
    metadata.update(
        metadata_of(
            kind=proposal.kind,
            sources=len(proposal.l0_views) + len(proposal.run_ids),
            input_ssts=len(ssts),
            bytes_to_read=size,
        )
    )
    summary = (
        f"would run a {proposal.kind} compaction of {len(ssts)} SST(s) ({size} bytes) "
        f"at manifest {current.id}"
    )
    return runs.StepResult(None, metadata, summary)


def _inputs(manifest: Manifest, proposal: Proposal) -> tuple[list[str], int]:
    sizes = {str(s.id): s.info.size_bytes for s in manifest.ssts}
    chosen = set(proposal.run_ids)
    ids = [str(v.sst_id) for v in proposal.l0_views]
    ids += [str(v.sst_id) for run in manifest.compacted if run.id in chosen for v in run.views]
    return ids, sum(sizes.get(i, 0) for i in ids)


def maintenance_run_request(db: DatabaseConfig, tick: datetime) -> dg.RunRequest:
    """A maintenance run of the partition ``db.name`` (real, within its policy's dry runs), tagged
    for the concurrency limit, with run key ``maintenance-<name>-<YYYYmmddTHHMMZ>``."""
    return runs.database_run_request(
        db, runs.run_key("maintenance", db.name, tick), maintenance_run_config(dry_run=False)
    )


def run_summary(events: Iterable[dg.DagsterEvent]) -> list[tuple[str, str, float]]:
    """``(step, summary, duration_s)`` of every maintenance step that succeeded, in order."""
    found: dict[str, tuple[str, float]] = {}
    for event in events:
        if not event.is_successful_output or event.step_key not in STEPS:
            continue
        metadata = event.step_output_data.metadata
        summary, duration = metadata.get("step_summary"), metadata.get("duration_s")
        seconds = duration.value if duration is not None else None
        if summary is not None:
            found[event.step_key] = (
                str(summary.value),
                float(seconds) if isinstance(seconds, float) else 0.0,
            )
    return [(step, *found[step]) for step in STEPS if step in found]


@dg.job(
    name=MAINTENANCE_JOB,
    partitions_def=runs.DATABASES,
    # Four short steps in the run's process (seconds saved per step); a Spark compaction starts
    # Spark in that process, which is the run's own (the run launcher starts one per run).
    executor_def=runs.IN_PROCESS,
    description=f"Maintain one database (the partition, or run tag {DB_TAG}=<name>; dry run by default): "
    "expire checkpoints, compact, apply the tag policy, garbage-collect; each step's report is run metadata.",
)
def maintenance_job() -> None:
    expired = maintenance_expire_checkpoints()
    compacted = maintenance_compact(after=expired)
    tagged = maintenance_tag_policy(after=compacted)
    maintenance_gc(after=tagged)


maintenance_schedule = database_schedule(
    SCHEDULE_NAME,
    maintenance_job,
    "0 3 * * *",
    "Daily at 03:00 UTC: one maintenance run per existing database.",
    wants_run=database_exists,
    run_request=maintenance_run_request,
    nothing_to_do="no database could be read",
)


defs = dg.Definitions(jobs=[maintenance_job], schedules=[maintenance_schedule])
"""The maintenance domain of the code location."""
