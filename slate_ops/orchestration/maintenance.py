"""Maintenance in Dagster: ``maintenance_job`` runs checkpoint expiry, compaction, tag policy and GC
of one database, in that order, as four ops, each a thin adapter over the same step helpers as the
single-step jobs; ``maintenance_schedule`` runs it daily.

The job is partitioned like the single-step jobs (dynamic partitions ``slate_ops_databases``): a
run's partition key is the database it maintains. Dagster refuses a :class:`dagster.ConfigMapping` on
a partitioned job, so each of the four ops takes its own op config with only the fields it uses
(:class:`MaintenanceConfig` subclasses; :func:`maintenance_run_config` writes all four)::

    ops:
      maintenance_expire_checkpoints: {config: {dry_run: false}}
      maintenance_compact: {config: {dry_run: false, executor: local, full: true}}
      maintenance_tag_policy: {config: {dry_run: false}}
      maintenance_gc: {config: {dry_run: false}}

    database: demo     # every op, optional: the partition key, else the run's slate_ops/db tag
    dry_run: true      # every op: the default; the step only reports (compaction: what it would pick)
    executor: database # maintenance_compact only: local / spark override the database's compaction.executor
    full: null         # maintenance_compact only: true / false override the database's compaction.full

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
- an operator (UI launchpad, ``dg launch --partition``, ``.ci/demo``): a partition (or the tag
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

from slate_ops.orchestration import runs
from slate_ops.orchestration.checkpoints import expire_step
from slate_ops.orchestration.checks import record_state
from slate_ops.orchestration.compaction import SPARK_POOL, ExecutorChoice, compact_step, executor_of
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import database_exists, database_schedule
from slate_ops.orchestration.gc import gc_step
from slate_ops.orchestration.metadata import metadata_of
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
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
    """Op config of a maintenance step: ``database`` and ``dry_run`` (compaction adds ``executor``
    and ``full``: :class:`MaintenanceCompactConfig`). Each op has its own subclass, so its launchpad
    shows only the fields it uses."""

    dry_run: bool = Field(default=True, description="Only report (the default). false: run for real.")


class MaintenanceExpiryConfig(MaintenanceConfig):
    """Op config of ``maintenance_expire_checkpoints``."""

    dry_run: bool = Field(
        default=True,
        description="Only report (the default). false: remove the expired checkpoints, unless the database's "
        "checkpoints.expiry_dry_run keeps it a dry run.",
    )


class MaintenanceCompactConfig(MaintenanceConfig):
    """Op config of ``maintenance_compact``."""

    dry_run: bool = Field(
        default=True, description="Only report what the compactor would pick (the default). false: compact."
    )
    executor: ExecutorChoice = Field(
        default="database", description="Compaction executor; database: its compaction.executor."
    )
    full: bool | None = Field(
        default=None, description="Full compaction (one sorted run); unset: the database's compaction.full."
    )


class MaintenanceTagPolicyConfig(MaintenanceConfig):
    """Op config of ``maintenance_tag_policy``."""

    dry_run: bool = Field(
        default=True,
        description="Only report what the tag policy would change (the default). false: apply it.",
    )


class MaintenanceGcConfig(MaintenanceConfig):
    """Op config of ``maintenance_gc``."""

    dry_run: bool = Field(
        default=True,
        description="Only report what GC would delete (the default). false: delete, unless the database's "
        "gc.dry_run keeps it a dry run.",
    )


def maintenance_run_config(
    *,
    dry_run: bool = True,
    executor: ExecutorChoice = "database",
    full: bool | None = None,
    database: str | None = None,
    naming: Naming = DEFAULT,
) -> dict[str, Any]:
    """The run config of the job: every step's ``dry_run`` (and ``database``, if given); compaction's
    ``executor`` and ``full`` (a prefixed fleet's op names: ``naming``)."""
    common: dict[str, Any] = {"dry_run": dry_run}
    if database is not None:
        common["database"] = database
    config = {step: dict(common) for step in STEPS}
    config["maintenance_compact"].update(executor=executor, full=full)
    return {"ops": {naming.name(step): {"config": config[step]} for step in STEPS}}


def real_run(run_config: object, naming: Naming = DEFAULT) -> bool:
    """Whether a run with ``run_config`` runs any step for real (some op config says ``dry_run: false``)."""
    ops = run_config.get("ops") if isinstance(run_config, dict) else None
    if not isinstance(ops, dict):
        return False
    for step in STEPS:
        op = ops.get(naming.name(step))
        config = op.get("config") if isinstance(op, dict) else None
        if isinstance(config, dict) and config.get("dry_run", True) is False:
            return True
    return False


def _expire_checkpoints(
    context: dg.OpExecutionContext, config: MaintenanceConfig, slate: SlateDatabasesResource, name: str
) -> runs.StepResult[Any]:
    dry_run = config.dry_run or slate.database(name).checkpoints.expiry_dry_run
    return expire_step(context, slate, name, dry_run=dry_run)


def _compact(
    context: dg.OpExecutionContext,
    config: MaintenanceCompactConfig,
    slate: SlateDatabasesResource,
    pyspark: LazyPySparkResource,
    name: str,
    naming: Naming,
) -> runs.StepResult[Any]:
    db = slate.database(name)
    full = db.compaction.full if config.full is None else config.full
    if config.dry_run:
        proposal = _proposal(slate, db, full=full)
        context.log.info(f"{name}: {proposal.summary}")
        return proposal
    executor = executor_of(db, config.executor)
    return compact_step(context, slate, pyspark, name, executor=executor, full=full, naming=naming)


def _tag_policy(
    context: dg.OpExecutionContext,
    config: MaintenanceConfig,
    slate: SlateDatabasesResource,
    name: str,
    naming: Naming,
) -> runs.StepResult[Any]:
    if slate.database(name).tag_policy is None:
        summary = "skipped: the database has no tag_policy"
        context.log.info(f"{name}: {summary}")
        return runs.StepResult(None, metadata_of(database=name), summary)
    return tag_policy_step(context, slate, name, dry_run=config.dry_run, naming=naming)


def _gc(
    context: dg.OpExecutionContext,
    config: MaintenanceConfig,
    slate: SlateDatabasesResource,
    name: str,
    naming: Naming,
) -> runs.StepResult[Any]:
    db = slate.database(name)
    result = gc_step(context, slate, name, db.gc.options(), dry_run=config.dry_run or db.gc.dry_run)
    if real_run(context.run_config, naming):
        record_state(context, slate, name, naming=naming)
    return result


def _step_op(
    naming: Naming,
    step: str,
    description: str,
    config_type: type[runs.DatabaseOpConfig],
    run: Callable[[dg.OpExecutionContext, Any, str], runs.StepResult[Any]],
    *,
    first: bool = False,
    retry_policy: dg.RetryPolicy | None = None,
    pool: str | None = None,
    spark: bool = False,
) -> dg.OpDefinition:
    """The op ``step`` (prefixed by ``naming``): a timed :func:`runs.run_step` of ``run(context,
    config, database)`` on the run's database, after the previous step unless it is the ``first``;
    its op config is ``config_type`` (only the fields that step uses)."""

    @dg.op(
        name=naming.name(step),
        ins=None if first else {"after": dg.In(dg.Nothing)},
        description=description,
        retry_policy=retry_policy,
        pool=pool,
        required_resource_keys=naming.all_keys if spark else naming.slate_keys,
    )
    def _op(context: dg.OpExecutionContext, config: config_type) -> dg.Output[Any]:  # type: ignore[valid-type]
        database = config.database  # type: ignore[attr-defined]
        return runs.run_step(
            context, database, lambda name: run(context, config, name), timed=True, naming=naming
        )

    return _op


def build_step_ops(naming: Naming = DEFAULT) -> dict[str, dg.OpDefinition]:
    """The four ops of ``maintenance_job`` (by name, in :data:`STEPS` order), each a timed
    :func:`runs.run_step` of its step on the run's database, after the previous step."""
    ops = (
        _step_op(
            naming,
            "maintenance_expire_checkpoints",
            "Step 1: remove the database's expired checkpoints (or report them).",
            MaintenanceExpiryConfig,
            lambda context, config, name: _expire_checkpoints(context, config, naming.slate(context), name),
            first=True,
            retry_policy=runs.IDEMPOTENT_RETRY,
        ),
        _step_op(
            naming,
            "maintenance_compact",
            "Step 2: one compaction of the database (a dry run reports what it would pick).",
            MaintenanceCompactConfig,
            lambda context, config, name: _compact(
                context, config, naming.slate(context), naming.pyspark(context), name, naming
            ),
            pool=SPARK_POOL,
            spark=True,
        ),
        _step_op(
            naming,
            "maintenance_tag_policy",
            "Step 3: apply the database's tag policy (skipped without one).",
            MaintenanceTagPolicyConfig,
            lambda context, config, name: _tag_policy(context, config, naming.slate(context), name, naming),
            retry_policy=runs.IDEMPOTENT_RETRY,
        ),
        _step_op(
            naming,
            "maintenance_gc",
            "Step 4: garbage-collect the database with its gc policy (a failure carries the report); "
            "after a run that was not all dry, record the database's checks and an observation of its state "
            "again.",
            MaintenanceGcConfig,
            lambda context, config, name: _gc(context, config, naming.slate(context), name, naming),
        ),
    )
    return dict(zip(STEPS, ops, strict=True))


def _proposal(slate: SlateDatabasesResource, db: DatabaseConfig, *, full: bool) -> runs.StepResult[None]:
    """What the compactor would pick now (the handle's ``plan_compaction``: reads the manifest;
    fences and writes nothing)."""
    handle = slate.handle_for(db)
    plan = handle.plan_compaction(db.compactor_options(), full=full)
    manifest_id = plan.manifest_id if plan is not None else handle.describe().manifest_id
    metadata = metadata_of(
        database=db.name, dry_run=True, full=full, manifest_id=manifest_id, compacted=False
    )
    if plan is None:
        return runs.StepResult(None, metadata, f"would compact nothing at manifest {manifest_id}")
    metadata.update(
        metadata_of(
            kind=plan.kind,
            sources=plan.sources,
            input_ssts=len(plan.input_ssts),
            bytes_to_read=plan.bytes_to_read,
        )
    )
    summary = (
        f"would run a {plan.kind} compaction of {len(plan.input_ssts)} SST(s) ({plan.bytes_to_read} bytes) "
        f"at manifest {manifest_id}"
    )
    return runs.StepResult(None, metadata, summary)


def maintenance_run_request(db: DatabaseConfig, tick: datetime, naming: Naming = DEFAULT) -> dg.RunRequest:
    """A maintenance run of the partition ``db.name`` (real, within its policy's dry runs), tagged
    for the concurrency limit, with run key ``maintenance-<name>-<YYYYmmddTHHMMZ>``."""
    return runs.database_run_request(
        db,
        runs.run_key("maintenance", db.name, tick),
        maintenance_run_config(dry_run=False, naming=naming),
        naming=naming,
    )


def run_summary(events: Iterable[dg.DagsterEvent], naming: Naming = DEFAULT) -> list[tuple[str, str, float]]:
    """``(step, summary, duration_s)`` of every maintenance step that succeeded, in order (``step``
    unprefixed, of :data:`STEPS`)."""
    steps = {naming.name(step): step for step in STEPS}
    found: dict[str, tuple[str, float]] = {}
    for event in events:
        if not event.is_successful_output or event.step_key not in steps:
            continue
        metadata = event.step_output_data.metadata
        summary, duration = metadata.get("step_summary"), metadata.get("duration_s")
        seconds = duration.value if duration is not None else None
        if summary is not None:
            found[steps[event.step_key]] = (
                str(summary.value),
                float(seconds) if isinstance(seconds, float) else 0.0,
            )
    return [(step, *found[step]) for step in STEPS if step in found]


def build(naming: Naming = DEFAULT) -> Domain:
    """The maintenance domain of the fleet ``naming`` names: ``maintenance_job`` and its schedule."""
    ops = build_step_ops(naming)
    expire, compact, tag_policy, gc = (ops[step] for step in STEPS)

    @dg.job(
        name=naming.name(MAINTENANCE_JOB),
        partitions_def=naming.partitions,
        # Four short steps in the run's process (seconds saved per step); a Spark compaction starts
        # Spark in that process, which is the run's own (the run launcher starts one per run).
        executor_def=runs.IN_PROCESS,
        description=f"Maintain one database (the partition, or run tag {DB_TAG}=<name>; dry run by default): "
        "expire checkpoints, compact, apply the tag policy, garbage-collect; each step's report is run "
        "metadata.",
    )
    def job() -> None:
        expired = expire()
        compacted = compact(after=expired)
        tagged = tag_policy(after=compacted)
        gc(after=tagged)

    schedule = database_schedule(
        naming.name(SCHEDULE_NAME),
        job,
        "0 3 * * *",
        "Daily at 03:00 UTC: one maintenance run per existing database.",
        wants_run=database_exists,
        run_request=lambda db, tick: maintenance_run_request(db, tick, naming),
        nothing_to_do="no database could be read",
        naming=naming,
    )
    return Domain(jobs={MAINTENANCE_JOB: job}, schedules={SCHEDULE_NAME: schedule}, ops=ops)


_DEFAULT = build()
maintenance_expire_checkpoints = _DEFAULT.ops["maintenance_expire_checkpoints"]
maintenance_compact = _DEFAULT.ops["maintenance_compact"]
maintenance_tag_policy = _DEFAULT.ops["maintenance_tag_policy"]
maintenance_gc = _DEFAULT.ops["maintenance_gc"]
maintenance_job = _DEFAULT.jobs[MAINTENANCE_JOB]
maintenance_schedule = _DEFAULT.schedules[SCHEDULE_NAME]
