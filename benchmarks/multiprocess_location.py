"""The code location plus ``maintenance_job_multiprocess``: ``maintenance_job`` with Dagster's
multiprocess executor (one process per step), the reference of benchmarks/bench_orchestration.py."""

from __future__ import annotations

import dagster as dg

import definitions
from jobs import maintenance_job

maintenance_job_multiprocess = maintenance_job.graph.to_job(
    name="maintenance_job_multiprocess",
    executor_def=dg.multiprocess_executor,
    partitions_def=maintenance_job.partitions_def,
)

defs = dg.Definitions.merge(definitions.defs, dg.Definitions(jobs=[maintenance_job_multiprocess]))
