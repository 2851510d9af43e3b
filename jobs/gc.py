"""Garbage collection: one op, configured per run with the database, so every run collects exactly
one database and carries its ``slate_ops/db`` tag (which serialises it with that database's other
maintenance runs).

Runs come from two places:

- ``gc_schedule``, every 6 hours, one real (not dry) run per configured database that exists;
- an operator (UI launchpad or ``dagster job execute``), with the tag ``slate_ops/db=<name>``: a dry
  run unless the op config says ``dry_run: false``; the config also takes the min ages and the
  resources to run.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime

import dagster as dg

from slate_ops.orchestration import DB_TAG, SlateDatabasesResource
from slate_ops.orchestration.gc import GC_JOB, gc_op, gc_run_request
from slate_ops.orchestration.sensors import describe_databases

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
    cron_schedule="0 */6 * * *",
    execution_timezone="UTC",
    description="Every 6 hours: garbage-collect every configured database (real runs, one per database).",
)
def gc_schedule(
    context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tick = context.scheduled_execution_time or datetime.now(UTC)
    described, failed = describe_databases(slate, context.log)
    if described:
        return [gc_run_request(db, tick) for db, _ in described]
    return dg.SkipReason(f"no database could be read; skipped: {'; '.join(failed)}")
