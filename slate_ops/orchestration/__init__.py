"""Dagster definitions of slate_ops: adapters over :mod:`slate_ops.admin`, no engine logic.

Code by domain: each of ``checkpoints``, ``compaction``, ``gc``, ``tags``, ``clones``, ``rescale`` and
``maintenance`` holds its ops, job, schedule and sensor, and a ``defs`` (:class:`dagster.Definitions`)
of them. What depends on the databases config (one asset per database with its checks,
``slate_ops_databases_job`` and the resources) is :func:`database_definitions`. ``definitions.py``
at the repo root merges the two::

    defs = dg.Definitions.merge(database_definitions(config), *jobs.DOMAINS)

See ``docs/orchestration.md`` ("Code layout").
"""

from __future__ import annotations

import dagster as dg

from slate_ops.orchestration.assets import (
    DATABASES_JOB,
    build_database_assets,
    database_asset_key,
    databases_job,
)
from slate_ops.orchestration.checkpoints import (
    CHECKPOINT_EXPIRY_JOB,
    expire_checkpoints_op,
    slate_ops_manifest_sensor,
)
from slate_ops.orchestration.checks import build_database_checks
from slate_ops.orchestration.clones import CLONE_JOB, clone_op
from slate_ops.orchestration.compaction import COMPACTION_JOB, compact_op, slate_ops_compaction_sensor
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig, load_config
from slate_ops.orchestration.gc import GC_JOB, gc_op
from slate_ops.orchestration.resources import (
    PYSPARK_RESOURCE_KEY,
    RESOURCE_KEY,
    SlateDatabasesResource,
    local_pyspark_resource,
)
from slate_ops.orchestration.runs import DB_TAG


def database_definitions(config: SlateOpsConfig | None = None) -> dg.Definitions:
    """What depends on ``config`` (default: :func:`load_config`): one asset per database with its
    checks, ``slate_ops_databases_job``, and the ``slate`` and ``pyspark`` resources every domain's
    ops, schedules and sensors use."""
    config = config if config is not None else load_config()
    slate = SlateDatabasesResource.from_environment(config)
    return dg.Definitions(
        assets=build_database_assets(config),
        asset_checks=build_database_checks(config),
        jobs=[databases_job],
        resources={
            RESOURCE_KEY: slate,
            PYSPARK_RESOURCE_KEY: local_pyspark_resource(slate),  # Spark tasks get slate's S3 credentials
        },
    )


__all__ = [
    "CHECKPOINT_EXPIRY_JOB",
    "CLONE_JOB",
    "COMPACTION_JOB",
    "DATABASES_JOB",
    "DB_TAG",
    "GC_JOB",
    "PYSPARK_RESOURCE_KEY",
    "DatabaseConfig",
    "SlateDatabasesResource",
    "SlateOpsConfig",
    "clone_op",
    "compact_op",
    "database_asset_key",
    "database_definitions",
    "expire_checkpoints_op",
    "gc_op",
    "load_config",
    "local_pyspark_resource",
    "slate_ops_compaction_sensor",
    "slate_ops_manifest_sensor",
]
