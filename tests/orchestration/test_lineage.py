"""Lineage as data versions (slate_ops.orchestration.lineage): a clone or shard is not "Unsynced"
when the database it came from is written, maintained or materialized again, and is when that
database becomes another database (here: its path moves). Dagster's own staleness resolver (what
the UI's "Unsynced" badge shows) on a real instance, after real runs of the database assets,
rescale_job and maintenance_job."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleCauseCategory, StaleStatus
from dagster._core.loader import LoadingContextForTest

from slate_ops import Db
from slate_ops.objstore import open_store
from slate_ops.orchestration import DatabaseConfig, SlateOpsConfig, build_definitions
from slate_ops.orchestration.assets import DATABASES_JOB, database_asset_key
from slate_ops.orchestration.lineage import lineage_version
from slate_ops.orchestration.maintenance import MAINTENANCE_JOB, maintenance_run_config

CHILDREN = ("demo_clone", "demo_low", "demo_high")


def fleet(store_url: str, demo_path: str = "demo") -> SlateOpsConfig:
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name="demo", store_url=store_url, path=demo_path),
            DatabaseConfig(name="demo_clone", store_url=store_url, path="demo_clone", parent="demo"),
            DatabaseConfig(name="demo_low", store_url=store_url, path="demo_low", rescaled_from=["demo"]),
            DatabaseConfig(name="demo_high", store_url=store_url, path="demo_high", rescaled_from=["demo"]),
        ]
    )


def write(store_url: str, path: str, round_: int) -> None:
    with Db.open(path, open_store(store_url)) as db:
        for i in range(100):
            db.put(b"user:%05d" % i, b"round %d" % round_)
        db.flush_memtable()


def statuses(instance: dg.DagsterInstance, defs: dg.Definitions) -> dict[str, StaleStatus]:
    resolver = stale_resolver(instance, defs)
    return {name: resolver.get_status(database_asset_key(name)) for name in ("demo", *CHILDREN)}


def stale_resolver(instance: dg.DagsterInstance, defs: dg.Definitions) -> CachingStaleStatusResolver:
    return CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))


def maintain(instance: dg.DagsterInstance, defs: dg.Definitions, database: str) -> None:
    instance.add_dynamic_partitions("slate_ops_databases", [database])
    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
        run_config=maintenance_run_config(dry_run=False), partition_key=database, instance=instance
    )
    assert result.success


@pytest.fixture
def demo_fleet(tmp_path: Path) -> tuple[str, dg.DagsterInstance, dg.Definitions]:
    """The demo's fleet after the demo's steps: demo written, its asset and its clone's
    materialized, split into demo_low and demo_high by rescale_job."""
    store_url = (tmp_path / "store").as_uri()
    write(store_url, "demo", 0)
    instance = dg.DagsterInstance.ephemeral()
    defs = build_definitions(fleet(store_url))
    assert defs.resolve_job_def(DATABASES_JOB).execute_in_process(instance=instance).success
    split = {
        "operation": "split",
        "database": "demo",
        "split_keys": ["user:00050"],
        "targets": [{"name": "demo_low"}, {"name": "demo_high"}],
    }
    rescale = defs.resolve_job_def("rescale_job").execute_in_process(
        run_config={"ops": {"rescale_op": {"config": split}}}, instance=instance
    )
    assert rescale.success
    return store_url, instance, defs


def test_children_stay_synced_when_their_origin_is_written_maintained_and_materialized(
    demo_fleet: tuple[str, dg.DagsterInstance, dg.Definitions],
) -> None:
    store_url, instance, defs = demo_fleet
    fresh = dict.fromkeys(("demo", *CHILDREN), StaleStatus.FRESH)
    assert statuses(instance, defs) == fresh
    for child in CHILDREN:
        maintain(instance, defs, child)
    write(store_url, "demo", 1)
    maintain(instance, defs, "demo")  # demo materialized after its children, with new data
    assert defs.resolve_job_def(DATABASES_JOB).execute_in_process(instance=instance).success
    assert statuses(instance, defs) == fresh
    # Every materialization of demo (the asset's own, rescale's, maintenance's) carries its lineage.
    versions = {
        record.event_log_entry.tags["dagster/data_version"]
        for record in instance.fetch_materializations(database_asset_key("demo"), limit=100).records
        if record.event_log_entry.tags
    }
    assert versions == {lineage_version(fleet(store_url), "demo").value}
    assert len(instance.fetch_materializations(database_asset_key("demo"), limit=100).records) >= 4


def test_children_are_unsynced_when_their_origin_becomes_another_database(
    demo_fleet: tuple[str, dg.DagsterInstance, dg.Definitions],
) -> None:
    store_url, instance, _ = demo_fleet
    moved = build_definitions(fleet(store_url, demo_path="demo_moved"))  # demo now names another database
    demo = database_asset_key("demo")
    assert moved.resolve_job_def(DATABASES_JOB).execute_in_process(instance=instance, asset_selection=[demo])
    resolver = stale_resolver(instance, moved)
    for child in CHILDREN:
        assert resolver.get_status(database_asset_key(child)) == StaleStatus.STALE, child
        (cause,) = resolver.get_stale_causes(database_asset_key(child))
        assert cause.category == StaleCauseCategory.DATA and cause.dependency_asset_key == demo
        assert cause.reason == "has a new dependency data version"  # as the UI words it
    # Maintaining a child does not remake it from demo: it stays unsynced.
    maintain(instance, moved, "demo_clone")
    assert stale_resolver(instance, moved).get_status(database_asset_key("demo_clone")) == StaleStatus.STALE
    # demo maintained after the move (a materialization an op logs) is the same story for demo_low.
    maintain(instance, moved, "demo")
    (cause,) = stale_resolver(instance, moved).get_stale_causes(database_asset_key("demo_low"))
    assert cause.reason == "has a new dependency data version"


def test_lineage_version_covers_store_path_and_origins_not_other_settings(tmp_path: Path) -> None:
    url = (tmp_path / "store").as_uri()
    base = fleet(url)
    version = lineage_version(base, "demo_clone")
    assert lineage_version(fleet(url), "demo_clone") == version
    assert lineage_version(fleet(url, demo_path="elsewhere"), "demo_clone") != version  # its parent moved
    assert lineage_version(base, "demo_low") != lineage_version(base, "demo_high")  # its own path
    tuned = SlateOpsConfig(
        databases=[
            DatabaseConfig.model_validate({**db.model_dump(), "compaction": {"l0_threshold": 8}})
            for db in base.databases
        ]
    )
    assert lineage_version(tuned, "demo_clone") == version  # a policy is not lineage
