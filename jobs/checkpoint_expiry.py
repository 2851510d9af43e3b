"""Checkpoint expiry: one op, configured per run with the database, so every run maintains exactly
one database and carries its ``slate_ops/db`` tag.

Runs come from three places:

- the manifest sensor (``slate_ops_manifest_sensor``), when a new manifest has expired checkpoints;
- ``checkpoint_expiry_schedule``, hourly, for every database that has expired checkpoints by then
  (expiry is time-driven, so a database whose manifest does not change still gets cleaned);
- an operator (UI launchpad or ``dagster job execute``), with the tag ``slate_ops/db=<name>``.

Automated runs remove for real unless the database sets ``checkpoint_expiry_dry_run: true``; a
manually launched run is a dry run unless its op config says ``dry_run: false``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime

import dagster as dg

from slate_ops.orchestration import CHECKPOINT_EXPIRY_JOB, DB_TAG, SlateDatabasesResource
from slate_ops.orchestration.fleet import describe_databases
from slate_ops.orchestration.ops import expire_checkpoints_op, expiry_run_request


@dg.job(
    name=CHECKPOINT_EXPIRY_JOB,
    description=f"Remove one database's expired checkpoints (run tag {DB_TAG}=<name>; dry run by default).",
)
def checkpoint_expiry_job() -> None:
    expire_checkpoints_op()


@dg.schedule(
    name="checkpoint_expiry_schedule",
    job=checkpoint_expiry_job,
    cron_schedule="0 * * * *",
    execution_timezone="UTC",
    description="Hourly: expire checkpoints in every database that has expired ones.",
)
def checkpoint_expiry_schedule(
    context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tick = context.scheduled_execution_time or datetime.now(UTC)
    found = describe_databases(slate, context.log)
    requests = [
        expiry_run_request(db, f"expire-{db.name}-{tick.astimezone(UTC):%Y%m%dT%H%MZ}")
        for db, status in found.results
        if status.expired_checkpoints
    ]
    return found.requests_or_skip(requests, "no database has expired checkpoints")
