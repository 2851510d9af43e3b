"""Fixtures of the Dagster tests: two databases in a fresh memory store and a manual clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import ObjectStore, open_store
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime

ALPHA = "dbs/alpha"
BETA = "dbs/beta"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's config file or writes under the working directory."""
    monkeypatch.delenv("SLATE_OPS_CONFIG", raising=False)
    monkeypatch.setenv("SLATE_OPS_STORE", tmp_path_factory.mktemp("store").as_uri())


@pytest.fixture
def store_url() -> str:
    return f"memory://orchestration-{uuid.uuid4().hex}"


@pytest.fixture
def store(store_url: str) -> ObjectStore:
    return open_store(store_url)


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_700_000_000.0)


@pytest.fixture
def config(store_url: str) -> SlateOpsConfig:
    """alpha expires for real when automated; beta only dry-runs."""
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA),
            DatabaseConfig(name="beta", store_url=store_url, path=BETA, checkpoint_expiry_dry_run=True),
        ]
    )


@pytest.fixture
def created(store: ObjectStore) -> ObjectStore:
    """The store with both databases created (manifest 1 each)."""
    admin.create_db(ALPHA, store)
    admin.create_db(BETA, store)
    return store


@pytest.fixture
def slate(config: SlateOpsConfig, clock: ManualRuntime) -> SlateDatabasesResource:
    return SlateDatabasesResource(config=config).with_clock(clock)


@pytest.fixture
def defs(config: SlateOpsConfig) -> Iterator[dg.Definitions]:
    import definitions

    yield definitions.make_definitions(config)


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
