"""Tag policies: one op, configured per run with the database, so every run applies exactly one
database's ``tag_policy`` and carries its ``slate_ops/db`` tag.

Runs come from two places:

- ``tag_policy_schedule``, every 15 minutes (UTC), one real run per database with a ``tag_policy``
  that has something to do: its due tag is missing (so each period's tag is created within 15
  minutes of that database's ``create_time``), or policy tags expired or exceed
  ``num_retained_max``. Databases with nothing to do get no run;
- an operator (UI launchpad or ``dagster job execute``), with the tag ``slate_ops/db=<name>``: a dry
  run unless the op config says ``dry_run: false``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime

import dagster as dg

from slate_ops.orchestration import DB_TAG, SlateDatabasesResource
from slate_ops.orchestration.tags import TAG_POLICY_JOB, tag_policy_op, tag_policy_run_requests

SCHEDULE_NAME = "tag_policy_schedule"


@dg.job(
    name=TAG_POLICY_JOB,
    description=f"Apply one database's tag policy (run tag {DB_TAG}=<name>; dry run by default); report it.",
)
def tag_policy_job() -> None:
    tag_policy_op()


@dg.schedule(
    name=SCHEDULE_NAME,
    job=tag_policy_job,
    cron_schedule="*/15 * * * *",
    execution_timezone="UTC",
    description="Every 15 minutes: apply the tag policy of every database whose policy has work "
    "(each period's tag once a period, at its create_time; expiry and retention).",
)
def tag_policy_schedule(
    context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tick = context.scheduled_execution_time or datetime.now(UTC)
    requests, found = tag_policy_run_requests(slate, tick, context.log)
    return found.requests_or_skip(requests, "no database's tag policy has anything to do")
