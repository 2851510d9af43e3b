"""Print the summary of databases' latest maintenance runs from the Dagster instance
(``$DAGSTER_HOME``): per database, one line per step with what it did and how long it took.
Name the databases, or pass ``--all`` for every database with a ``maintenance_job`` run (its
partition or its ``slate_ops/db`` tag), in the order of the instance's partitions. ``.ci/demo`` ends
with it::

    python -m slate_ops.orchestration summary --all
    python -m slate_ops.orchestration summary demo demo_clone

Without ``$DAGSTER_HOME`` it reads ``./.dagster`` (the instance ``.ci/demo`` creates).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import dagster as dg

from slate_ops.orchestration.maintenance import MAINTENANCE_JOB, STEP_LABELS, real_run, run_summary
from slate_ops.orchestration.runs import DB_TAG, PARTITIONS_NAME

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


def maintained_databases(instance: dg.DagsterInstance) -> list[str]:
    """Every database with a ``maintenance_job`` run in ``instance`` (its partition, or tagged
    ``slate_ops/db=<database>``): the partitions' order first, then the others by name."""
    names: set[str] = set()
    for record in instance.get_run_records(filters=dg.RunsFilter(job_name=MAINTENANCE_JOB)):
        tags = record.dagster_run.tags
        name = tags.get(PARTITION_TAG) or tags.get(DB_TAG)
        if name:
            names.add(name)
    ordered = [name for name in instance.get_dynamic_partitions(PARTITIONS_NAME) if name in names]
    return ordered + sorted(names - set(ordered))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slate_ops.orchestration summary",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument(
        "databases",
        nargs="*",
        metavar="database",
        help="a configured database (its partition or slate_ops/db tag)",
    )
    parser.add_argument(
        "--all", action="store_true", help=f"every database with a {MAINTENANCE_JOB} run in the instance"
    )
    args = parser.parse_args(argv)
    if bool(args.databases) == args.all:
        parser.error("name one or more databases, or pass --all")
    if not os.environ.get("DAGSTER_HOME"):
        # The instance .ci/demo creates: ./.dagster, as in a fresh shell after the demo.
        home = Path.cwd() / ".dagster"
        if not home.is_dir():
            print("no Dagster instance: set DAGSTER_HOME (.ci/demo uses ./.dagster)", file=sys.stderr)
            return 1
        os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        databases = maintained_databases(instance) if args.all else args.databases
        if not databases:
            print(f"no {MAINTENANCE_JOB} run in this Dagster instance", file=sys.stderr)
            return 1
        print("\n\n".join(latest_run_summary(instance, database) for database in databases))
    return 0
