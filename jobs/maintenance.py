"""Maintenance: checkpoint expiry, compaction, tag policy and GC of one database, in that order (a
failed step stops the run), so every run maintains exactly one database and carries its
``slate_ops/db`` tag.

Runs come from two places:

- ``maintenance_schedule``, daily at 03:00 UTC, one run per existing database, for real except the
  steps its policy keeps dry (``checkpoints.expiry_dry_run``, ``gc.dry_run``);
- an operator (UI launchpad, ``dagster job execute``, ``.ci/demo``), with the tag
  ``slate_ops/db=<name>``: a dry run unless the run config says ``dry_run: false``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime

import dagster as dg

from slate_ops.orchestration import DB_TAG, SlateDatabasesResource
from slate_ops.orchestration.fleet import describe_databases
from slate_ops.orchestration.maintenance import (
    MAINTENANCE_JOB,
    maintenance_compact,
    maintenance_config,
    maintenance_expire_checkpoints,
    maintenance_gc,
    maintenance_run_request,
    maintenance_tag_policy,
)

SCHEDULE_NAME = "maintenance_schedule"


@dg.job(
    name=MAINTENANCE_JOB,
    config=maintenance_config,
    description=f"Maintain one database (run tag {DB_TAG}=<name>; dry run by default): expire checkpoints, "
    "compact, apply the tag policy, garbage-collect; each step's report is run metadata.",
)
def maintenance_job() -> None:
    expired = maintenance_expire_checkpoints()
    compacted = maintenance_compact(after=expired)
    tagged = maintenance_tag_policy(after=compacted)
    maintenance_gc(after=tagged)


@dg.schedule(
    name=SCHEDULE_NAME,
    job=maintenance_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    description="Daily at 03:00 UTC: one maintenance run per existing database.",
)
def maintenance_schedule(
    context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tick = context.scheduled_execution_time or datetime.now(UTC)
    found = describe_databases(slate, context.log)  # the ones that exist
    requests = [maintenance_run_request(db, tick) for db, _ in found.results]
    return found.requests_or_skip(requests, "no database could be read")
