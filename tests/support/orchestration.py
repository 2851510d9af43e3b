"""Orchestration helpers: the two databases of the Dagster tests, checkpoints on a manual clock, and
one op run in process with its output's metadata."""

from __future__ import annotations

from typing import Any

import dagster as dg

from slate_ops import admin
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import SlateDatabasesResource
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime

ALPHA = "dbs/alpha"
BETA = "dbs/beta"


def add_checkpoint(
    store: ObjectStore, path: str, clock: ManualRuntime, lifetime: str | None, name: str
) -> str:
    """Create a checkpoint at ``clock``'s time; returns its id as text."""
    options = CheckpointOptions.model_validate({"lifetime": lifetime, "name": name})
    result = admin.create_checkpoint(path, store, options, clock=clock)
    return str(result.id)


def run_op(
    job: dg.JobDefinition,
    op: str,
    slate: SlateDatabasesResource,
    config: dict[str, Any] | None,
    tags: dict[str, str] | None,
) -> dg.ExecuteInProcessResult:
    """Run ``job`` in process with ``config`` as the op config of ``op`` (None: the defaults)."""
    run_config = {"ops": {op: {"config": config}}} if config is not None else None
    return job.execute_in_process(
        run_config=run_config, tags=tags, resources={RESOURCE_KEY: slate}, raise_on_error=False
    )


def op_metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    """The metadata of the run's (only) successful op output."""
    (event,) = [e for e in result.all_node_events if e.is_successful_output]
    return {key: value.value for key, value in event.step_output_data.metadata.items()}
