"""(Repository only, not in the wheel.) The Dagster jobs, schedules and sensors of slate_ops' default
build by their public names.

Each job lives with its ops, schedule and sensor in its domain's builder in
:mod:`slate_ops.orchestration` (``checkpoints``, ``compaction``, ``gc``, ``tags``, ``clones``,
``rescale``, ``maintenance``, ``partitions``); this package only names the default build's objects
(the code location is :func:`slate_ops.orchestration.build_definitions`). That package never
imports this one.
"""

from __future__ import annotations

import dagster as dg

from slate_ops.orchestration.checkpoints import (
    checkpoint_expiry_job,
    checkpoint_expiry_schedule,
    slate_ops_manifest_sensor,
)
from slate_ops.orchestration.clones import clone_job
from slate_ops.orchestration.compaction import (
    compaction_job,
    compaction_schedule,
    slate_ops_compaction_sensor,
)
from slate_ops.orchestration.gc import gc_job, gc_schedule
from slate_ops.orchestration.maintenance import maintenance_job, maintenance_schedule
from slate_ops.orchestration.partitions import slate_ops_partitions_sensor
from slate_ops.orchestration.rescale import rescale_job
from slate_ops.orchestration.tags import tag_policy_job, tag_policy_schedule

ALL_JOBS: list[dg.JobDefinition] = [
    maintenance_job,
    checkpoint_expiry_job,
    compaction_job,
    clone_job,
    gc_job,
    rescale_job,
    tag_policy_job,
]
ALL_SCHEDULES: list[dg.ScheduleDefinition] = [
    maintenance_schedule,
    checkpoint_expiry_schedule,
    compaction_schedule,
    gc_schedule,
    tag_policy_schedule,
]
ALL_SENSORS: list[dg.SensorDefinition] = [
    slate_ops_manifest_sensor,
    slate_ops_compaction_sensor,
    slate_ops_partitions_sensor,
]

__all__ = [
    "ALL_JOBS",
    "ALL_SCHEDULES",
    "ALL_SENSORS",
    "checkpoint_expiry_job",
    "checkpoint_expiry_schedule",
    "clone_job",
    "compaction_job",
    "compaction_schedule",
    "gc_job",
    "gc_schedule",
    "maintenance_job",
    "maintenance_schedule",
    "rescale_job",
    "slate_ops_compaction_sensor",
    "slate_ops_manifest_sensor",
    "slate_ops_partitions_sensor",
    "tag_policy_job",
    "tag_policy_schedule",
]
