"""Garbage collection: one op, configured per run with the database, so every run collects exactly
one database and carries its ``slate_ops/db`` tag (which serialises it with that database's other
maintenance runs).

Runs come from two places:

- ``gc_schedule``, hourly, one run per existing database whose ``gc.interval_hours`` divides the
  tick's hour (counted from the epoch, UTC; the default 6 means 00, 06, 12 and 18 UTC), real unless
  the database's ``gc.dry_run``;
- an operator (UI launchpad or ``dagster job execute``), with the tag ``slate_ops/db=<name>``: a dry
  run unless the op config says ``dry_run: false``; the config also takes the resources to run and
  min ages (by default the database's ``gc`` policy).
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime

import dagster as dg

from slate_ops.orchestration import DB_TAG, SlateDatabasesResource
from slate_ops.orchestration.fleet import describe_databases
from slate_ops.orchestration.gc import GC_JOB, gc_op, gc_run_request

SCHEDULE_NAME = "gc_schedule"


@dg.job(
    name=GC_JOB,
    description=f"Garbage-collect one database (run tag {DB_TAG}=<name>; dry run by default) and report it.",
)
def gc_job() -> None:
    gc_op()


@dg.schedule(
    name=SCHEDULE_NAME,
    job=gc_job,
    cron_schedule="0 * * * *",
    execution_timezone="UTC",
    description="Hourly: garbage-collect every database whose gc.interval_hours is due (one run each).",
)
def gc_schedule(
    context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tick = context.scheduled_execution_time or datetime.now(UTC)
    due = [db for db in slate.config.databases if db.gc.due(tick)]
    if not due:
        return dg.SkipReason(f"no database's gc.interval_hours is due at {tick.astimezone(UTC):%H:%M} UTC")
    found = describe_databases(slate, context.log, due)  # the ones that exist
    return found.requests_or_skip(
        [gc_run_request(db, tick) for db, _ in found.results], "no database could be read"
    )
