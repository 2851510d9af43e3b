"""The manifest-polling sensor.

Every tick reads each configured database's current manifest (``describe_db``). The cursor is JSON
``{"<db name>": <last observed manifest id>}``. A database whose manifest id differs from the cursor
gets an ``AssetObservation`` on ``slate_ops/<name>`` (the manifest summary, LSM shape, checkpoints
and tags: :func:`~slate_ops.orchestration.metadata.database_metadata`); if it also has expired
checkpoints, a run of the checkpoint expiry job is requested with run key
``expire-<name>-<manifest id>`` (so one manifest version never triggers two runs) and the run tag
``slate_ops/db=<name>``. With no change the tick is skipped. A database that is missing or fails to
read is skipped with a warning and retried on the next tick; it never hides the others.

Checkpoints that expire while the manifest stays the same are left to the hourly
``checkpoint_expiry_schedule``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import logging

import dagster as dg

from slate_ops.admin import DbStatus, read_manifest
from slate_ops.orchestration.assets import database_asset_key
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import describe_databases, dump_cursor, parse_cursor
from slate_ops.orchestration.metadata import database_metadata, status_metadata
from slate_ops.orchestration.ops import CHECKPOINT_EXPIRY_JOB, expiry_run_request
from slate_ops.orchestration.resources import SlateDatabasesResource

SENSOR_NAME = "slate_ops_manifest_sensor"


def observed_metadata(
    slate: SlateDatabasesResource, db: DatabaseConfig, status: DbStatus, log: logging.Logger
) -> dict[str, dg.MetadataValue]:
    """:func:`database_metadata` of the manifest ``status`` described (one more GET); if that read
    fails, the status alone."""
    try:
        current = read_manifest(db.path, slate.open_store(db.name), status.manifest_id)
    except Exception as exc:  # the status is still worth recording
        log.warning(f"observing {db.name} without its LSM shape: {type(exc).__name__}: {exc}")
        return status_metadata(status)
    return database_metadata(db.path, current, slate.clock().now())


@dg.sensor(
    name=SENSOR_NAME,
    job_name=CHECKPOINT_EXPIRY_JOB,
    minimum_interval_seconds=30,
    description="Observes each database's manifest; requests checkpoint expiry when checkpoints expired.",
)
def slate_ops_manifest_sensor(
    context: dg.SensorEvaluationContext, slate: SlateDatabasesResource
) -> dg.SensorResult | dg.SkipReason:
    cursor = parse_cursor(context.cursor, context.log, slate.database_names())
    found = describe_databases(slate, context.log)
    observations: list[dg.AssetObservation] = []
    run_requests: list[dg.RunRequest] = []
    for db, status in found.results:
        if cursor.get(db.name) == status.manifest_id:
            continue
        cursor[db.name] = status.manifest_id
        observations.append(
            dg.AssetObservation(
                asset_key=database_asset_key(db.name),
                metadata=observed_metadata(slate, db, status, context.log),
            )
        )
        if status.expired_checkpoints:
            run_requests.append(expiry_run_request(db, f"expire-{db.name}-{status.manifest_id}"))
    if not observations:
        return found.skip_all_or(f"no manifest changed in {len(found.results)} database(s)")
    return dg.SensorResult(run_requests=run_requests, asset_events=observations, cursor=dump_cursor(cursor))
