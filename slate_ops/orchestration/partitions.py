"""The fleet as Dagster partitions: ``slate_ops_partitions_sensor`` keeps the dynamic partitions
``slate_ops_databases`` (:data:`~slate_ops.orchestration.runs.DATABASES`, the partitions of the
per-database jobs) equal to the fleet's database names: the configured databases and those the
config's ``discover`` store and prefix hold. A new database becomes a partition on the next tick; a
database that is gone (removed from the config, or no longer listed) stops being one. If the
discovery listing fails, the tick adds the configured databases and removes nothing.
"""

# No `from __future__ import annotations` here: Dagster reads the resource annotations of the
# sensor below at runtime.

from collections.abc import Sequence

import dagster as dg

from slate_ops.orchestration.config import load_config
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DATABASES, PARTITIONS_NAME

SENSOR_NAME = "slate_ops_partitions_sensor"


def partition_requests(
    wanted: list[str], existing: Sequence[str], *, remove: bool = True
) -> list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]:
    """The requests that make the partitions ``existing`` equal to ``wanted`` (without ``remove``:
    only the additions)."""
    present = set(existing)
    added = [name for name in wanted if name not in present]
    removed = sorted(present - set(wanted)) if remove else []
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if added:
        requests.append(DATABASES.build_add_request(added))
    if removed:
        requests.append(DATABASES.build_delete_request(removed))
    return requests


@dg.sensor(
    name=SENSOR_NAME,
    minimum_interval_seconds=60,
    description=f"Keeps the partitions {PARTITIONS_NAME} equal to the fleet: the configured databases "
    "and those discovered under the config's discover store and prefix.",
)
def slate_ops_partitions_sensor(
    context: dg.SensorEvaluationContext, slate: SlateDatabasesResource
) -> dg.SensorResult | dg.SkipReason:
    existing = context.instance.get_dynamic_partitions(PARTITIONS_NAME)
    try:
        wanted, complete = slate.database_names(), True
    except Exception as exc:  # the listing failed: add the configured ones, remove nothing
        context.log.warning(f"discovery failed: {type(exc).__name__}: {exc}")
        wanted, complete = [db.name for db in slate.config.databases], False
    requests = partition_requests(wanted, existing, remove=complete)
    if not requests:
        return dg.SkipReason(f"the {len(existing)} partition(s) already match the fleet")
    return dg.SensorResult(dynamic_partitions_requests=requests)


defs = dg.Definitions(sensors=[slate_ops_partitions_sensor])
"""The fleet-partitions domain of the code location."""


def sync_partitions(
    instance: dg.DagsterInstance, slate: SlateDatabasesResource
) -> tuple[list[str], list[str]]:
    """Make the instance's partitions equal to the fleet now, as one tick of the sensor would (with
    a complete listing); the names (added, removed)."""
    existing = instance.get_dynamic_partitions(PARTITIONS_NAME)
    added: list[str] = []
    removed: list[str] = []
    for request in partition_requests(slate.database_names(), existing):
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(PARTITIONS_NAME, list(request.partition_keys))
            added += request.partition_keys
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(PARTITIONS_NAME, key)
            removed += request.partition_keys
    return added, removed


def main() -> int:
    """``python -m slate_ops.orchestration.partitions``: sync the partitions of the instance in
    ``$DAGSTER_HOME`` with the fleet of ``$SLATE_OPS_CONFIG`` (else the embedded default) at once,
    without waiting for the sensor (e.g. before the first partitioned launch)."""
    slate = SlateDatabasesResource.from_environment(load_config())
    with dg.DagsterInstance.get() as instance:
        added, removed = sync_partitions(instance, slate)
        total = len(instance.get_dynamic_partitions(PARTITIONS_NAME))
    print(
        f"{PARTITIONS_NAME}: {total} partition(s); added {', '.join(added) or 'none'}; "
        f"removed {', '.join(removed) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
