"""Database assets: materializing creates a missing database and records describe_db as metadata."""

from __future__ import annotations

import dagster as dg

from slate_ops import admin
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.assets import build_database_assets
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA, add_checkpoint


def metadata_of(result: dg.ExecuteInProcessResult, name: str) -> dict[str, object]:
    (event,) = [
        m
        for m in result.get_asset_materialization_events()
        if m.asset_key == dg.AssetKey(["slate_ops", name])
    ]
    materialization = event.materialization
    return {key: value.value for key, value in materialization.metadata.items()}


def test_assets_are_keyed_and_grouped_per_database(config: SlateOpsConfig) -> None:
    assets = build_database_assets(config)
    assert [a.key for a in assets] == [
        dg.AssetKey(["slate_ops", "alpha"]),
        dg.AssetKey(["slate_ops", "beta"]),
    ]
    assert {a.group_names_by_key[a.key] for a in assets} == {"slate_ops"}


def test_materialize_creates_missing_databases(
    config: SlateOpsConfig, fleet_store: ObjectStore, slate: SlateDatabasesResource
) -> None:
    result = dg.materialize(build_database_assets(config), resources={RESOURCE_KEY: slate})
    assert result.success
    assert admin.read_manifest(ALPHA, fleet_store).id == 1
    assert admin.read_manifest(BETA, fleet_store).id == 1
    alpha = metadata_of(result, "alpha")
    assert alpha["manifest_id"] == 1
    assert alpha["initialized"] is True
    assert (alpha["checkpoints"], alpha["expired_checkpoints"], alpha["l0_ssts"], alpha["sorted_runs"]) == (
        0,
        0,
        0,
        0,
    )
    assert (alpha["writer_epoch"], alpha["compactor_epoch"], alpha["sst_bytes"]) == (0, 0, 0)


def test_materialize_keeps_an_existing_database_and_reports_its_state(
    config: SlateOpsConfig, created: ObjectStore, slate: SlateDatabasesResource, clock: ManualRuntime
) -> None:
    add_checkpoint(created, ALPHA, clock, "10s", "short")
    add_checkpoint(created, ALPHA, clock, None, "forever")
    clock.advance(60)  # "short" has expired by the resource's clock
    result = dg.materialize(build_database_assets(config), resources={RESOURCE_KEY: slate})
    alpha = metadata_of(result, "alpha")
    assert alpha["manifest_id"] == 3  # not recreated: the two checkpoint commits are still there
    assert (alpha["checkpoints"], alpha["expired_checkpoints"]) == (2, 1)
    assert metadata_of(result, "beta")["manifest_id"] == 1
    assert len(admin.list_checkpoints(ALPHA, created)) == 2
