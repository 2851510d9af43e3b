"""Compaction: one op, configured per run with the database, so every run compacts exactly one
database and carries its ``slate_ops/db`` tag.

Runs come from three places:

- ``slate_ops_compaction_sensor``, when a database's L0 reaches its threshold of SSTs;
- ``compaction_schedule``, every 30 minutes, for every database where the compactor has work (an
  L0 compaction, or adjacent sorted runs of similar size to merge), which also catches what the
  sensor left (sensor off, a failed run);
- an operator (UI launchpad or ``dagster job execute``), with the tag ``slate_ops/db=<name>``,
  optionally ``executor: spark`` or ``full: true`` in the op config.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime

import dagster as dg

from slate_ops.orchestration import COMPACTION_JOB, DB_TAG, SlateDatabasesResource, compact_op
from slate_ops.orchestration.compaction import compaction_run_request, has_compaction_work
from slate_ops.orchestration.fleet import each_database

SCHEDULE_NAME = "compaction_schedule"


@dg.job(
    name=COMPACTION_JOB,
    description=f"Run one compaction of one database (run tag {DB_TAG}=<name>) and report it.",
)
def compaction_job() -> None:
    compact_op()


@dg.schedule(
    name=SCHEDULE_NAME,
    job=compaction_job,
    cron_schedule="*/30 * * * *",
    execution_timezone="UTC",
    description="Every 30 minutes: compact every database where the compactor has work.",
)
def compaction_schedule(
    context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tick = (context.scheduled_execution_time or datetime.now(UTC)).astimezone(UTC)
    found = each_database(slate.config.databases, context.log, lambda db: has_compaction_work(slate, db))
    requests = [
        compaction_run_request(db, f"compact-{db.name}-{tick:%Y%m%dT%H%MZ}")
        for db, has_work in found.results
        if has_work
    ]
    return found.requests_or_skip(requests, "no database has anything to compact")
