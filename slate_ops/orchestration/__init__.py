"""Dagster definitions of slate_ops: adapters over :mod:`slate_ops.admin`, no engine logic.

The jobs live in the top-level ``jobs/`` package, which builds them from the ops here; this package
never imports it. ``definitions.py`` at the repo root joins the two::

    defs = build_definitions(jobs=jobs.ALL_JOBS, schedules=jobs.ALL_SCHEDULES)

See ``docs/orchestration.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from slate_ops.orchestration.assets import (
    GROUP_NAME,
    ORIGIN_TAG,
    RESCALE_ORIGIN,
    build_database_assets,
    database_asset_key,
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

DATABASES_JOB = "slate_ops_databases_job"
"""Materializes every database asset: creates missing databases and records their state."""


def build_definitions(
    config: SlateOpsConfig | None = None,
    *,
    jobs: Sequence[dg.JobDefinition] = (),
    schedules: Sequence[dg.ScheduleDefinition] = (),
) -> dg.Definitions:
    """Assets, sensors and resources for ``config`` (default: :func:`load_config`), plus ``jobs``.

    ``jobs`` must include the checkpoint expiry and compaction jobs, which the sensors target.
    """
    config = config if config is not None else load_config()
    missing = [name for name in (CHECKPOINT_EXPIRY_JOB, COMPACTION_JOB) if name not in {j.name for j in jobs}]
    if missing:
        raise ValueError(
            f"build_definitions needs the job(s) {', '.join(map(repr, missing))} (the sensors target them); "
            "pass jobs=jobs.ALL_JOBS from the repository root"
        )
    databases_job = dg.define_asset_job(
        DATABASES_JOB,
        # Shards and merges are created together by rescale_job, never one asset at a time.
        selection=dg.AssetSelection.groups(GROUP_NAME) - dg.AssetSelection.tag(ORIGIN_TAG, RESCALE_ORIGIN),
        description="Create every configured database that is missing (clones included; shards and "
        "merges come from rescale_job) and record its state.",
    )
    return dg.Definitions(
        assets=build_database_assets(config),
        asset_checks=build_database_checks(config),
        jobs=[databases_job, *jobs],
        schedules=list(schedules),
        sensors=[slate_ops_manifest_sensor, slate_ops_compaction_sensor],
        resources={
            RESOURCE_KEY: SlateDatabasesResource.from_environment(config),
            PYSPARK_RESOURCE_KEY: local_pyspark_resource(),
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
    "build_definitions",
    "clone_op",
    "compact_op",
    "database_asset_key",
    "expire_checkpoints_op",
    "gc_op",
    "load_config",
    "local_pyspark_resource",
    "slate_ops_compaction_sensor",
    "slate_ops_manifest_sensor",
]
