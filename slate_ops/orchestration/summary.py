"""Print the summary of a database's latest maintenance run from the Dagster instance
(``$DAGSTER_HOME``): one line per step with what it did and how long it took. ``.ci/demo`` ends
with it::

    python -m slate_ops.orchestration.summary demo

Without ``$DAGSTER_HOME`` it reads ``./.dagster`` (the instance ``.ci/demo`` creates).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import dagster as dg

from slate_ops.orchestration.maintenance import MAINTENANCE_JOB, STEP_LABELS, real_run, run_summary
from slate_ops.orchestration.runs import DB_TAG

PARTITION_TAG = "dagster/partition"


def latest_run_summary(instance: dg.DagsterInstance, database: str) -> str:
    """The text summary of the newest ``maintenance_job`` run of ``database``: its partition, or
    tagged ``slate_ops/db=<database>``."""
    records = [
        record
        for tags in ({PARTITION_TAG: database}, {DB_TAG: database})
        for record in instance.get_run_records(
            filters=dg.RunsFilter(job_name=MAINTENANCE_JOB, tags=tags), limit=1
        )
    ]
    if not records:
        return f"no {MAINTENANCE_JOB} run of {database} in this Dagster instance"
    run = max(records, key=lambda record: record.create_timestamp).dagster_run
    events = [e.dagster_event for e in instance.all_logs(run.run_id) if e.dagster_event is not None]
    mode = "real run" if real_run(run.run_config) else "dry run"
    lines = [f"{MAINTENANCE_JOB} of {database} (run {run.run_id[:8]}, {mode}): {run.status.value}"]
    steps = run_summary(events)
    width = max(len(label) for label in STEP_LABELS.values())
    for i, (step, summary, seconds) in enumerate(steps, start=1):
        lines.append(f"  {i}. {STEP_LABELS[step]:<{width}}  {seconds:6.2f}s  {summary}")
    for step in list(STEP_LABELS)[len(steps) :]:
        lines.append(f"  -  {STEP_LABELS[step]:<{width}}  did not finish")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("database", help="the configured database (its slate_ops/db tag)")
    args = parser.parse_args(argv)
    if not os.environ.get("DAGSTER_HOME"):
        # The instance .ci/demo creates: ./.dagster, as in a fresh shell after the demo.
        home = Path.cwd() / ".dagster"
        if not home.is_dir():
            print("no Dagster instance: set DAGSTER_HOME (.ci/demo uses ./.dagster)", file=sys.stderr)
            return 1
        os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        print(latest_run_summary(instance, args.database))
    return 0


if __name__ == "__main__":
    sys.exit(main())
