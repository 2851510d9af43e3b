"""Dagster definitions of slate_ops: adapters over :mod:`slate_ops.admin`, no engine logic.

The entry point is :func:`build_definitions`: slate_ops' ``Definitions`` for a fleet config, with
resource keys of the caller's choosing (:class:`ResourceKeys`), a name prefix (two fleets in one
deployment), the jobs, schedules and sensors to include and override hooks (:class:`Hooks`), to
merge into any Dagster project. The code location ``slate_ops.orchestration.definitions`` is
``build_definitions()``.

Code by domain: each of ``checkpoints``, ``compaction``, ``gc``, ``tags``, ``clones``, ``rescale``,
``maintenance`` and ``partitions`` holds its ops, job, schedule and sensor as ``build(naming)``
(:mod:`~slate_ops.orchestration.naming`), and module-level objects (``maintenance_job``, ...) and
a ``defs`` that are the default build. See ``docs/orchestration.md`` ("Code layout").
"""

from __future__ import annotations

import dagster as dg

from slate_ops.orchestration.assets import (
    DATABASES_JOB,
    build_database_assets,
    database_asset_key,
    databases_job,
)
from slate_ops.orchestration.builder import JOB_NAMES, SCHEDULE_NAMES, SENSOR_NAMES, build_definitions
from slate_ops.orchestration.checkpoints import (
    CHECKPOINT_EXPIRY_JOB,
    expire_checkpoints_op,
    slate_ops_manifest_sensor,
)
from slate_ops.orchestration.clones import CLONE_JOB, clone_op
from slate_ops.orchestration.compaction import COMPACTION_JOB, compact_op, slate_ops_compaction_sensor
from slate_ops.orchestration.component import FleetComponent
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig, load_config
from slate_ops.orchestration.gc import GC_JOB, gc_op
from slate_ops.orchestration.naming import Hooks, Naming, ResourceKeys, StepCall
from slate_ops.orchestration.resources import (
    PYSPARK_RESOURCE_KEY,
    RESOURCE_KEY,
    SlateDatabasesResource,
    local_pyspark_resource,
)
from slate_ops.orchestration.runs import DB_TAG


def database_definitions(config: SlateOpsConfig | None = None) -> dg.Definitions:
    """What depends on ``config`` (default: :func:`load_config`) in the default fleet: one asset per
    database with its checks, ``slate_ops_databases_job``, and the two resources (keys
    :data:`RESOURCE_KEY` and :data:`PYSPARK_RESOURCE_KEY`) every domain's ops, schedules and sensors
    use. :func:`build_definitions` builds everything at once."""
    return build_definitions(config, jobs=[DATABASES_JOB], schedules=[], sensors=[])


__all__ = [
    "CHECKPOINT_EXPIRY_JOB",
    "CLONE_JOB",
    "COMPACTION_JOB",
    "DATABASES_JOB",
    "DB_TAG",
    "GC_JOB",
    "JOB_NAMES",
    "PYSPARK_RESOURCE_KEY",
    "RESOURCE_KEY",
    "SCHEDULE_NAMES",
    "SENSOR_NAMES",
    "DatabaseConfig",
    "FleetComponent",
    "Hooks",
    "Naming",
    "ResourceKeys",
    "SlateDatabasesResource",
    "SlateOpsConfig",
    "StepCall",
    "build_database_assets",
    "build_definitions",
    "clone_op",
    "compact_op",
    "database_asset_key",
    "database_definitions",
    "databases_job",
    "expire_checkpoints_op",
    "gc_op",
    "load_config",
    "local_pyspark_resource",
    "slate_ops_compaction_sensor",
    "slate_ops_manifest_sensor",
]
