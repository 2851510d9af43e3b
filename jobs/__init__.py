"""The Dagster jobs and schedules of slate_ops, by their public names; ``definitions.py`` registers
them.

Each lives with its op, schedule and sensor in its domain's module of :mod:`slate_ops.orchestration`
(``checkpoints``, ``compaction``, ...); this package only names them. That package never imports
this one.
"""

from __future__ import annotations

import dagster as dg

from slate_ops.orchestration.checkpoints import checkpoint_expiry_job, checkpoint_expiry_schedule
from slate_ops.orchestration.clones import clone_job
from slate_ops.orchestration.compaction import compaction_job, compaction_schedule
from slate_ops.orchestration.gc import gc_job, gc_schedule
from slate_ops.orchestration.maintenance import maintenance_job, maintenance_schedule
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

__all__ = [
    "ALL_JOBS",
    "ALL_SCHEDULES",
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
    "tag_policy_job",
    "tag_policy_schedule",
]
