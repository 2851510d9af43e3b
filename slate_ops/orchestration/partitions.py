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
