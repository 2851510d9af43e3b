"""Maintenance in Dagster: ``maintenance_job`` runs checkpoint expiry, compaction, tag policy and GC
of one database, in that order, as four ops, each a thin adapter over the same step helpers as the
single-step jobs; ``maintenance_schedule`` runs it daily.

The job's run config is one small schema (a :class:`dagster.ConfigMapping` onto the four ops)::

    database: demo     # optional: defaults to the run's slate_ops/db tag (both set: they must agree)
    dry_run: true      # the default: every step only reports (compaction: what it would pick)
    executor: database # or local / spark: overrides the database's compaction.executor
    full: null         # true / false: overrides the database's compaction.full

With ``dry_run: false`` each step runs for real unless the database's policy keeps it a dry run
(``checkpoints.expiry_dry_run``, ``gc.dry_run``). Every op's output metadata is its step's report
(the single-step jobs' tables and counts) plus ``step_summary``, one line, and ``duration_s``;
:func:`run_summary` joins the lines into the text the demo prints.

Every run maintains exactly one database and carries its ``slate_ops/db`` tag; a failed step stops
the run. Runs come from two places:

- ``maintenance_schedule``, daily at 03:00 UTC, one run per existing database, for real except the
  steps its policy keeps dry (``checkpoints.expiry_dry_run``, ``gc.dry_run``);
- an operator (UI launchpad, ``dagster job execute``, ``.ci/demo``), with the tag
  ``slate_ops/db=<name>``: a dry run unless the run config says ``dry_run: false``.
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
    """Run config of the maintenance job (mapped onto its four ops)."""

    dry_run: bool = Field(
        default=True,
        description="Every step only reports (the default). false: each step runs for real unless the "
        "database's policy keeps it a dry run (checkpoints.expiry_dry_run, gc.dry_run).",
    )
    executor: ExecutorChoice = Field(
        default="database", description="Compaction executor; database: its compaction.executor."
    )
    full: bool | None = Field(
        default=None, description="Full compaction (one sorted run); unset: the database's compaction.full."
    )


class MaintenanceStepConfig(dg.Config):
    """Op config of one maintenance step (set by the job's config mapping)."""

    database: str | None = None
    dry_run: bool = True


class MaintenanceCompactConfig(MaintenanceStepConfig):
    """Op config of the compaction step."""

    executor: ExecutorChoice = "database"
    full: bool | None = None


@dg.config_mapping
def maintenance_config(config: MaintenanceConfig) -> dg.RunConfig:
    """The job's config onto its ops."""
    step = MaintenanceStepConfig(database=config.database, dry_run=config.dry_run)
    compact = MaintenanceCompactConfig(
        database=config.database, dry_run=config.dry_run, executor=config.executor, full=config.full
    )
    return dg.RunConfig(ops={name: compact if name == "maintenance_compact" else step for name in STEPS})


StepFn = Callable[
    [dg.OpExecutionContext, MaintenanceStepConfig, SlateDatabasesResource, str], runs.StepResult[Any]
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
        context: dg.OpExecutionContext, config: MaintenanceStepConfig, slate: SlateDatabasesResource
    ) -> dg.Output[Any]:
        return runs.run_step(
            context, config.database, lambda db: step(context, config, slate, db), timed=True
        )

    return _op


def _expire_checkpoints(
    context: dg.OpExecutionContext, config: MaintenanceStepConfig, slate: SlateDatabasesResource, name: str
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
    config: MaintenanceCompactConfig,
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
    context: dg.OpExecutionContext, config: MaintenanceStepConfig, slate: SlateDatabasesResource, name: str
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
    context: dg.OpExecutionContext, config: MaintenanceStepConfig, slate: SlateDatabasesResource, name: str
) -> runs.StepResult[Any]:
    db = slate.database(name)
    return gc_step(context, slate, name, db.gc.options(), dry_run=config.dry_run or db.gc.dry_run)


maintenance_gc = _step_op(
    "maintenance_gc",
    "Step 4: garbage-collect the database with its gc policy (a failure carries the report).",
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
    """A maintenance run of ``db`` (real, within its policy's dry runs), tagged for the concurrency
    limit, with run key ``maintenance-<name>-<YYYYmmddTHHMMZ>``."""
    return runs.database_run_request(
        db,
        runs.run_key("maintenance", db.name, tick),
        {"database": db.name, "dry_run": False},
        partitioned=False,
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
    config=maintenance_config,
    # Four short steps in the run's process (seconds saved per step); a Spark compaction starts
    # Spark in that process, which is the run's own (the run launcher starts one per run).
    executor_def=runs.IN_PROCESS,
    # Not partitioned: Dagster refuses a ConfigMapping (the one-schema run config above) on a
    # partitioned job. Runs name their database with the slate_ops/db tag.
    description=f"Maintain one database (run tag {DB_TAG}=<name>; dry run by default): expire checkpoints, "
    "compact, apply the tag policy, garbage-collect; each step's report is run metadata.",
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
