"""The fleet as Dagster partitions: ``slate_ops_partitions_sensor`` keeps the dynamic partitions
``slate_ops_databases`` (:data:`~slate_ops.orchestration.runs.DATABASES`, the partitions of the
per-database jobs) equal to the fleet's database names: the configured databases and those the
config's ``discover`` store and prefix hold. A new database becomes a partition on the next tick; a
database that is gone (removed from the config, or no longer listed) stops being one. If the
discovery listing fails, the tick adds the configured databases and removes nothing. The sensor's
cursor keeps its last discovery listing (:mod:`~slate_ops.orchestration.discovery`), so it lists the
prefix once per ``discover.interval_minutes``, not every tick.
"""

# No `from __future__ import annotations` here: Dagster reads the resource annotations of the
# sensor below at runtime.

import argparse
import json
import os
from collections.abc import Sequence

import dagster as dg

from slate_ops.orchestration.config import CONFIG_ENV, load_config
from slate_ops.orchestration.discovery import CURSOR_KEY, DiscoveryListing, fleet_with_listing
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import PARTITIONS_NAME

SENSOR_NAME = "slate_ops_partitions_sensor"


def partition_requests(
    wanted: list[str], existing: Sequence[str], *, remove: bool = True, naming: Naming = DEFAULT
) -> list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]:
    """The requests that make the partitions ``existing`` (``naming``'s) equal to ``wanted``
    (without ``remove``: only the additions)."""
    partitions = naming.partitions
    present = set(existing)
    added = [name for name in wanted if name not in present]
    removed = sorted(present - set(wanted)) if remove else []
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if added:
        requests.append(partitions.build_add_request(added))
    if removed:
        requests.append(partitions.build_delete_request(removed))
    return requests


def build(naming: Naming = DEFAULT) -> Domain:
    """The fleet-partitions domain of the fleet ``naming`` names: ``slate_ops_partitions_sensor``,
    which keeps ``naming``'s partitions (``<prefix>slate_ops_databases``) equal to the fleet."""
    partitions_name = naming.partitions_name

    @dg.sensor(
        name=naming.name(SENSOR_NAME),
        minimum_interval_seconds=60,
        description=f"Keeps the partitions {partitions_name} equal to the fleet: the configured databases "
        "and those discovered under the config's discover store and prefix.",
        required_resource_keys=naming.slate_keys,
    )
    def sensor(context: dg.SensorEvaluationContext, **_resources: object) -> dg.SensorResult | dg.SkipReason:
        slate = naming.slate(context)
        existing = context.instance.get_dynamic_partitions(partitions_name)
        fleet, listing = fleet_with_listing(slate, context.log, DiscoveryListing.in_cursor(context.cursor))
        # The listing failed: add the configured ones, remove nothing.
        complete = listing is not None or slate.config.discover is None
        requests = partition_requests([db.name for db in fleet], existing, remove=complete, naming=naming)
        cursor = None if listing is None else json.dumps({CURSOR_KEY: listing.to_json()}, sort_keys=True)
        if not requests:
            skip = dg.SkipReason(f"the {len(existing)} partition(s) already match the fleet")
            return (
                skip
                if cursor is None or cursor == context.cursor
                else dg.SensorResult(skip_reason=skip, cursor=cursor)
            )
        return dg.SensorResult(dynamic_partitions_requests=requests, cursor=cursor)

    return Domain(sensors={SENSOR_NAME: sensor})


_DEFAULT = build()
slate_ops_partitions_sensor = _DEFAULT.sensors[SENSOR_NAME]


def sync_partitions(
    instance: dg.DagsterInstance, slate: SlateDatabasesResource, naming: Naming = DEFAULT
) -> tuple[list[str], list[str]]:
    """Make the instance's partitions (``naming``'s) equal to the fleet now, as one tick of the
    sensor would (with a complete listing); the names (added, removed)."""
    name = naming.partitions_name
    existing = instance.get_dynamic_partitions(name)
    added: list[str] = []
    removed: list[str] = []
    for request in partition_requests(slate.database_names(), existing, naming=naming):
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(name, list(request.partition_keys))
            added += request.partition_keys
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(name, key)
            removed += request.partition_keys
    return added, removed


REPOSITORY_NAME = "__repository__"
"""The repository name Dagster gives a code location's ``Definitions``."""

PARTITION_TAG = "dagster/partition"
PARTITION_SET_TAG = "dagster/partition_set"
REPOSITORY_LABEL_TAG = ".dagster/repository"
"""The run tag (``<repository>@<code location>``) that Dagster's UI selects a job's partition runs by."""

DEMO_FLEET = "the embedded demo fleet (slate_ops/orchestration/default_databases.yaml)"


def label_command_line_runs(instance: dg.DagsterInstance, location: str, partitions: Sequence[str]) -> int:
    """Give the partition runs of ``partitions`` that were launched from the command line (``dg
    launch --partition``: they carry the partition and partition-set tags but no code location) the
    code location ``location``, as a run launched from the UI of that location has: a job's
    Partitions tab counts only runs with its location's label. Runs that have a location keep it.
    The number of runs labelled."""
    label = f"{REPOSITORY_NAME}@{location}"
    wanted = set(partitions)
    if not wanted:
        return 0
    labelled = 0
    for record in instance.get_run_records(filters=dg.RunsFilter(tags={PARTITION_TAG: list(wanted)})):
        tags = record.dagster_run.tags
        if PARTITION_SET_TAG in tags and REPOSITORY_LABEL_TAG not in tags:
            instance.add_run_tags(record.dagster_run.run_id, {REPOSITORY_LABEL_TAG: label})
            labelled += 1
    return labelled


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slate_ops.orchestration partitions``: sync the partitions of the instance in
    ``$DAGSTER_HOME`` with a fleet at once, without waiting for the sensor (e.g. before the first
    partitioned launch). The fleet is ``--config``, else ``$SLATE_OPS_CONFIG``; the embedded demo
    fleet only with ``--demo``: without a fleet config it refuses (exit 2) rather than write the
    demo's partitions into an unrelated instance."""
    parser = argparse.ArgumentParser(
        prog="python -m slate_ops.orchestration partitions",
        description="Make the Dagster instance's database partitions equal to the fleet's databases now.",
    )
    parser.add_argument("--config", metavar="FILE", help=f"the fleet config (default: ${CONFIG_ENV})")
    parser.add_argument("--demo", action="store_true", help=f"the fleet is {DEMO_FLEET} (what .ci/demo uses)")
    parser.add_argument(
        "--label-runs",
        metavar="LOCATION",
        help="also give the partition runs launched from the command line (dg launch --partition) the "
        "code location LOCATION, so that location's Partitions tabs in the UI count them",
    )
    args = parser.parse_args(argv)
    path = args.config or os.environ.get(CONFIG_ENV) or None
    if path is not None and args.demo:
        parser.exit(2, f"{parser.prog}: --demo uses {DEMO_FLEET}; drop it or the fleet config {path}\n")
    if path is None and not args.demo:
        parser.exit(
            2,
            f"{parser.prog}: no fleet config: pass --config FILE or set ${CONFIG_ENV} to the fleet whose "
            f"databases become this instance's partitions, or pass --demo for {DEMO_FLEET}\n",
        )
    slate = SlateDatabasesResource.from_environment(load_config(path))
    with dg.DagsterInstance.get() as instance:
        added, removed = sync_partitions(instance, slate)
        partitions = instance.get_dynamic_partitions(PARTITIONS_NAME)
        labelled = label_command_line_runs(instance, args.label_runs, partitions) if args.label_runs else 0
    print(
        f"{PARTITIONS_NAME}: {len(partitions)} partition(s); added {', '.join(added) or 'none'}; "
        f"removed {', '.join(removed) or 'none'}"
        + (
            f"; {labelled} command-line run(s) labelled with code location {args.label_runs}"
            if args.label_runs
            else ""
        )
    )
    return 0
