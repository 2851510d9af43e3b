"""Checkpoints in Dagster: ``expire_checkpoints_op``, ``checkpoint_expiry_job``, its hourly
schedule and the manifest sensor.

``expire_checkpoints_op`` calls :func:`slate_ops.admin.expire_checkpoints` on one database (its run
tag ``slate_ops/db``, or the op config's ``database``), so every run maintains exactly one database.
Its output metadata is the report. Runs come from three places:

- ``slate_ops_manifest_sensor``, when a new manifest has expired checkpoints;
- ``checkpoint_expiry_schedule``, hourly, for every database that has expired checkpoints by then
  (expiry is time-driven, so a database whose manifest does not change still gets cleaned);
- an operator (UI launchpad or ``dg launch``), with a partition or the tag ``slate_ops/db=<name>``.

Automated runs remove for real unless the database sets ``checkpoints.expiry_dry_run: true``; a
manually launched run is a dry run unless its op config says ``dry_run: false``.

The manifest sensor checks each database's latest manifest every tick, 32 databases at a time
(:class:`~slate_ops.orchestration.fleet.ManifestTick`): one LIST for a database still at its cursor's
manifest, a LIST and a GET for any other. Its cursor is JSON ``{"<db name>": <last observed manifest
id>}``. A database whose manifest id differs from the cursor gets an ``AssetObservation`` on
``slate_ops/<name>`` (the manifest summary, LSM shape, checkpoints and tags of the manifest read:
:func:`~slate_ops.orchestration.metadata.database_metadata`); if it also has expired checkpoints,
a run of the checkpoint expiry job is requested with run key
``expire-<name>-<manifest id>`` (so one manifest version never triggers two runs) and the run tag
``slate_ops/db=<name>``. With no change the tick is skipped. A database that is missing or fails to
read is skipped with a warning and retried on the next tick; it never hides the others. Checkpoints
that expire while the manifest stays the same are left to the hourly schedule.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import logging
from typing import Any

import dagster as dg
from pydantic import Field

from slate_ops.admin import CheckpointExpiryReport
from slate_ops.manifest.model import Checkpoint
from slate_ops.orchestration import runs
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import ManifestTick, database_schedule, describe, manifest_sensor
from slate_ops.orchestration.metadata import database_metadata, md_cell, metadata_of, utc_text
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG

CHECKPOINT_EXPIRY_JOB = "checkpoint_expiry_job"
"""Name of the job that runs :func:`expire_checkpoints_op`."""

SENSOR_NAME = "slate_ops_manifest_sensor"

SCHEDULE_NAME = "checkpoint_expiry_schedule"


class ExpireCheckpointsConfig(runs.DatabaseOpConfig):
    """Run config of :func:`expire_checkpoints_op`."""

    dry_run: bool = Field(default=True, description="Only report what would be removed (the default).")


def build_expire_checkpoints_op(naming: Naming = DEFAULT) -> dg.OpDefinition:
    """``expire_checkpoints_op`` of the fleet ``naming`` names."""

    @dg.op(
        name=naming.name("expire_checkpoints_op"),
        description="Remove the database's expired checkpoints (dry run by default) and report them.",
        retry_policy=runs.IDEMPOTENT_RETRY,
        required_resource_keys=naming.slate_keys,
    )
    def _op(
        context: dg.OpExecutionContext, config: ExpireCheckpointsConfig
    ) -> dg.Output[CheckpointExpiryReport]:
        slate = naming.slate(context)
        return runs.run_step(
            context,
            config.database,
            lambda name: expire_step(context, slate, name, dry_run=config.dry_run),
            naming=naming,
        )

    return _op


def expire_step(
    context: dg.OpExecutionContext, slate: SlateDatabasesResource, name: str, *, dry_run: bool
) -> runs.StepResult[CheckpointExpiryReport]:
    """Expire ``name``'s checkpoints (shared by the ops)."""
    report = slate.handle(name).expire_checkpoints(dry_run=dry_run)
    verb = "would remove" if report.dry_run else "removed"
    summary = f"{verb} {len(report.expired)} expired checkpoint(s) at manifest {report.manifest_id}"
    context.log.info(f"{name}: {summary}")
    return runs.StepResult(report, expiry_metadata(name, report), summary)


def expiry_metadata(database: str, report: CheckpointExpiryReport) -> dict[str, dg.MetadataValue]:
    """The report as run metadata: counts, flags and a Markdown table of the checkpoints."""
    return metadata_of(
        database=database,
        dry_run=report.dry_run,
        manifest_id=report.manifest_id,
        expired_count=len(report.expired),
        expired_checkpoints=dg.MetadataValue.md(checkpoints_markdown(report.expired, report.dry_run)),
    )


def checkpoints_markdown(checkpoints: tuple[Checkpoint, ...], dry_run: bool) -> str:
    """A Markdown table of ``checkpoints`` (id, name, manifest id, created and expired at, UTC)."""
    title = "Would remove (dry run)" if dry_run else "Removed"
    if not checkpoints:
        return f"{title}: no expired checkpoints."
    rows = [
        f"{title} {len(checkpoints)} checkpoint(s):",
        "",
        "| id | name | manifest_id | created at (UTC) | expired at (UTC) |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for c in checkpoints:
        rows.append(
            f"| {c.id} | {md_cell(c.name or '')} | {c.manifest_id} | {utc_text(c.create_time_s)} "
            f"| {utc_text(c.expire_time_s)} |"
        )
    return "\n".join(rows)


def expiry_run_config(database: str, dry_run: bool, naming: Naming = DEFAULT) -> dict[str, Any]:
    """Run config of the checkpoint expiry job for ``database``."""
    return runs.op_run_config(naming.name("expire_checkpoints_op"), database=database, dry_run=dry_run)


def expiry_run_request(db: DatabaseConfig, key: str, naming: Naming = DEFAULT) -> dg.RunRequest:
    """A checkpoint expiry run of ``db``, tagged for the per-database concurrency limit.

    Automated runs remove for real unless the database sets ``checkpoints.expiry_dry_run``.
    """
    return runs.database_run_request(
        db, key, expiry_run_config(db.name, db.checkpoints.expiry_dry_run, naming), naming=naming
    )


def build(naming: Naming = DEFAULT) -> Domain:
    """The checkpoints domain of the fleet ``naming`` names: ``checkpoint_expiry_job``, its schedule
    and ``slate_ops_manifest_sensor``."""
    op = build_expire_checkpoints_op(naming)
    job = runs.one_op_job(
        op,
        partitions_def=naming.partitions,
        name=naming.name(CHECKPOINT_EXPIRY_JOB),
        description=f"Remove one database's expired checkpoints (run tag {DB_TAG}=<name>; dry run by "
        "default).",
    )
    schedule = database_schedule(
        naming.name(SCHEDULE_NAME),
        job,
        "0 * * * *",
        "Hourly: expire checkpoints in every database that has expired ones.",
        wants_run=lambda slate, db: describe(slate, db).expired_checkpoints > 0,
        run_request=lambda db, tick: expiry_run_request(db, runs.run_key("expire", db.name, tick), naming),
        nothing_to_do="no database has expired checkpoints",
        naming=naming,
    )

    @manifest_sensor(
        name=naming.name(SENSOR_NAME),
        job_name=job.name,
        description="Observes each database's manifest; requests checkpoint expiry when checkpoints expired.",
        naming=naming,
    )
    def sensor(
        tick: ManifestTick, slate: SlateDatabasesResource, log: logging.Logger
    ) -> dg.SensorResult | dg.SkipReason:
        changed = list(tick.changed())
        configured = {db.name for db in slate.config.databases}  # a discovered database has no asset
        observations = [
            dg.AssetObservation(asset_key=naming.asset_key_of(db), metadata=database_metadata(read.state))
            for db, read in changed
            if db.name in configured
        ]
        run_requests = [
            expiry_run_request(db, f"expire-{db.name}-{read.manifest_id}", naming)
            for db, read in changed
            if read.status.expired_checkpoints
        ]
        return tick.result(
            f"no manifest changed in {len(tick.found.results)} database(s)", run_requests, observations
        )

    return Domain(
        jobs={CHECKPOINT_EXPIRY_JOB: job},
        schedules={SCHEDULE_NAME: schedule},
        sensors={SENSOR_NAME: sensor},
        ops={"expire_checkpoints_op": op},
    )


_DEFAULT = build()
expire_checkpoints_op = _DEFAULT.ops["expire_checkpoints_op"]
checkpoint_expiry_job = _DEFAULT.jobs[CHECKPOINT_EXPIRY_JOB]
checkpoint_expiry_schedule = _DEFAULT.schedules[SCHEDULE_NAME]
slate_ops_manifest_sensor = _DEFAULT.sensors[SENSOR_NAME]
