"""Dagster ops: thin adapters over :mod:`slate_ops.admin` that return the admin report as metadata."""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from typing import Any

import dagster as dg
from pydantic import Field

from slate_ops.admin import CheckpointExpiryReport, expire_checkpoints
from slate_ops.manifest.model import Checkpoint
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.metadata import md_cell, utc_text
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import (
    DB_TAG,
    IDEMPOTENT_RETRY,
    DatabaseOpConfig,
    StepResult,
    target_database,
)

CHECKPOINT_EXPIRY_JOB = "checkpoint_expiry_job"
"""Name of the job (defined in ``jobs/checkpoint_expiry.py``) that runs :func:`expire_checkpoints_op`."""


class ExpireCheckpointsConfig(DatabaseOpConfig):
    """Run config of :func:`expire_checkpoints_op`."""

    dry_run: bool = Field(default=True, description="Only report what would be removed (the default).")


@dg.op(
    description="Remove the database's expired checkpoints (dry run by default) and report them.",
    retry_policy=IDEMPOTENT_RETRY,
)
def expire_checkpoints_op(
    context: dg.OpExecutionContext, config: ExpireCheckpointsConfig, slate: SlateDatabasesResource
) -> dg.Output[CheckpointExpiryReport]:
    name = target_database(context, config.database)
    step = expire_step(context, slate, name, dry_run=config.dry_run)
    return dg.Output(step.report, metadata=step.metadata)


def expire_step(
    context: dg.OpExecutionContext, slate: SlateDatabasesResource, name: str, *, dry_run: bool
) -> StepResult[CheckpointExpiryReport]:
    """Expire ``name``'s checkpoints (shared by the ops)."""
    db = slate.database(name)
    report = expire_checkpoints(db.path, slate.open_store(name), dry_run=dry_run, clock=slate.clock())
    verb = "would remove" if report.dry_run else "removed"
    summary = f"{verb} {len(report.expired)} expired checkpoint(s) at manifest {report.manifest_id}"
    context.log.info(f"{name}: {summary}")
    return StepResult(report, expiry_metadata(name, report), summary)


def expiry_metadata(database: str, report: CheckpointExpiryReport) -> dict[str, dg.MetadataValue]:
    """The report as run metadata: counts, flags and a Markdown table of the checkpoints."""
    return {
        "database": dg.MetadataValue.text(database),
        "dry_run": dg.MetadataValue.bool(report.dry_run),
        "manifest_id": dg.MetadataValue.int(report.manifest_id),
        "expired_count": dg.MetadataValue.int(len(report.expired)),
        "expired_checkpoints": dg.MetadataValue.md(checkpoints_markdown(report.expired, report.dry_run)),
    }


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


def expiry_run_config(database: str, dry_run: bool) -> dict[str, Any]:
    """Run config of the checkpoint expiry job for ``database``."""
    return {"ops": {"expire_checkpoints_op": {"config": {"database": database, "dry_run": dry_run}}}}


def expiry_run_request(db: DatabaseConfig, run_key: str) -> dg.RunRequest:
    """A checkpoint expiry run of ``db``, tagged for the per-database concurrency limit.

    Automated runs remove for real unless the database sets ``checkpoints.expiry_dry_run``.
    """
    return dg.RunRequest(
        run_key=run_key,
        run_config=expiry_run_config(db.name, db.checkpoints.expiry_dry_run),
        tags={DB_TAG: db.name},
    )
