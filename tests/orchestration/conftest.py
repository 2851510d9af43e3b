"""Fixtures of the Dagster tests: two databases in a fresh memory store (``fleet_store``), their
config and the resource over them on the manual ``clock`` (tests/support/clock.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.objstore import ObjectStore, open_store
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's config file or writes under the working directory."""
    monkeypatch.delenv("SLATE_OPS_CONFIG", raising=False)
    monkeypatch.setenv("SLATE_OPS_STORE", tmp_path_factory.mktemp("store").as_uri())


@pytest.fixture
def store_url() -> str:
    return f"memory://orchestration-{uuid.uuid4().hex}"


@pytest.fixture
def fleet_store(store_url: str) -> ObjectStore:
    return open_store(store_url)


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
def created(fleet_store: ObjectStore) -> ObjectStore:
    """The store with both databases created (manifest 1 each)."""
    admin.create_db(ALPHA, fleet_store)
    admin.create_db(BETA, fleet_store)
    return fleet_store


@pytest.fixture
def slate(config: SlateOpsConfig, clock: ManualRuntime) -> SlateDatabasesResource:
    return SlateDatabasesResource(config=config).with_clock(clock)


@pytest.fixture
def defs(config: SlateOpsConfig) -> Iterator[dg.Definitions]:
    import definitions

    yield definitions.make_definitions(config)
