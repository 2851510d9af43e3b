"""Orchestration helpers: the two databases of the Dagster tests, checkpoints on a manual clock, and
one op run in process with its output's metadata."""

from __future__ import annotations

import json
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


def is_cost_observation(event: dg.AssetObservation) -> bool:
    """Whether ``event`` records request counts (a step's or a window of sensor polls) rather than
    a database's state."""
    return "cost_source" in event.metadata


def state_observation_events(result: dg.ExecuteInProcessResult) -> list[dg.DagsterEvent]:
    """The run's observation events of databases' state (its cost observations left out)."""
    return [
        e
        for e in result.get_asset_observation_events()
        if not is_cost_observation(e.asset_observation_data.asset_observation)
    ]


def cost_observation_events(result: dg.ExecuteInProcessResult) -> list[dg.DagsterEvent]:
    """The run's cost observations (one per metered step)."""
    return [
        e
        for e in result.get_asset_observation_events()
        if is_cost_observation(e.asset_observation_data.asset_observation)
    ]


def manifests_of(cursor: str | None) -> dict[str, int]:
    """The manifest ids of a manifest sensor's cursor (its poll windows left out)."""
    assert cursor is not None
    raw = json.loads(cursor)
    assert isinstance(raw, dict)
    manifests = raw["manifests"]
    assert isinstance(manifests, dict)
    return manifests


def skip_message(result: dg.SensorResult | dg.SkipReason) -> str | None:
    """The skip reason of a sensor tick that requested no run and recorded no event (a skip that
    also moves the cursor, e.g. to count polls, is a ``SensorResult`` with a skip reason); None when
    the tick did something."""
    if isinstance(result, dg.SkipReason):
        return result.skip_message
    if result.run_requests or result.asset_events or result.skip_reason is None:
        return None
    return result.skip_reason.skip_message
