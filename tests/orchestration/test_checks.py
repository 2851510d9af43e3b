"""Asset checks (verify_db per database) and the observations' LSM shape, checkpoints and tags."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import dagster as dg
import pytest

from slate_ops import Db, admin
from slate_ops.config import CheckpointOptions
from slate_ops.layout import sst_key
from slate_ops.objstore import CountingStore, ObjectStore
from slate_ops.orchestration import (
    DatabaseConfig,
    SlateDatabasesResource,
    SlateOpsConfig,
    database_asset_key,
    database_definitions,
    fleet,
)
from slate_ops.orchestration.assets import build_database_assets
from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor
from slate_ops.orchestration.checks import ALL_CHECKS as CHECKS  # verify's checks and gc_health
from slate_ops.orchestration.checks import PROBLEMS_SHOWN, build_database_checks, problems_markdown
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.orchestration import ALPHA, BETA, add_checkpoint

Evaluations = dict[tuple[str, str], dg.AssetCheckEvaluation]


def run_checks(config: SlateOpsConfig, slate: SlateDatabasesResource) -> Evaluations:
    """Only the checks of every configured database (no materialization), keyed by (database, check)."""
    result = dg.materialize(
        [*build_database_assets(config), *build_database_checks(config)],
        resources={RESOURCE_KEY: slate},
        selection=dg.AssetSelection.all_asset_checks(),
    )
    assert result.success
    assert not result.get_asset_materialization_events()
    return {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}


def meta(evaluation: dg.AssetCheckEvaluation) -> dict[str, object]:
    return {k: v.value for k, v in evaluation.metadata.items()}


def write_l0(store: ObjectStore, path: str, clock: ManualRuntime, ssts: int) -> None:
    with Db.open(path, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for i in range(ssts):
            db.put(b"k%03d" % i, b"v%d" % i)
            db.flush_memtable()


def test_every_database_gets_every_check_non_blocking(config: SlateOpsConfig) -> None:
    checks = build_database_checks(config)
    assert len(checks) == len(config.databases)
    keys = {(key.asset_key, key.name) for checks_def in checks for key in checks_def.check_keys}
    assert keys == {(database_asset_key(db.name), name) for db in config.databases for name in CHECKS}
    for checks_def in checks:
        assert all(not spec.blocking and spec.description for spec in checks_def.check_specs)
    defs = database_definitions(config)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert {(k.asset_key.path[-1], k.name) for k in graph.asset_check_keys} == {
        (db.name, name) for db in config.databases for name in CHECKS
    }


def test_the_embedded_demo_database_has_its_checks() -> None:
    import definitions

    defs = definitions.make_definitions()
    keys = defs.resolve_asset_graph().asset_check_keys
    assert {k.name for k in keys if k.asset_key == database_asset_key("demo")} == set(CHECKS)


def test_materializing_runs_the_checks_and_healthy_databases_pass(
    config: SlateOpsConfig, slate: SlateDatabasesResource, fleet_store: ObjectStore, clock: ManualRuntime
) -> None:
    defs = database_definitions(config)
    job = defs.resolve_job_def("slate_ops_databases_job")
    result = job.execute_in_process(resources={RESOURCE_KEY: slate})
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == len(CHECKS) * len(config.databases)
    assert all(e.passed for e in evaluations), [e.description for e in evaluations if not e.passed]

    write_l0(fleet_store, ALPHA, clock, 2)
    add_checkpoint(fleet_store, ALPHA, clock, "1h", "backup")
    admin.create_tag(ALPHA, fleet_store, "v1", clock=clock)
    evaluations_by_key = run_checks(config, slate)
    assert all(e.passed for e in evaluations_by_key.values())
    # The latest manifest and the one the checkpoint pins (the tag pins the latest).
    assert evaluations_by_key[("alpha", "ssts_exist")].description == (
        "2 SST object(s) referenced by 2 manifest(s) exist"
    )
    assert meta(evaluations_by_key[("alpha", "ssts_exist")]) == {"problem_count": 0, "problems": "none"}


def test_failing_checks_name_the_object_and_why_with_their_severity(
    config: SlateOpsConfig, slate: SlateDatabasesResource, created: ObjectStore, clock: ManualRuntime
) -> None:
    store = created
    write_l0(store, ALPHA, clock, 4)  # the default threshold: compaction is behind (warn)
    l0 = admin.read_manifest(ALPHA, store).value.l0
    missing = sst_key(ALPHA, l0[-1].sst_id)
    store.delete(missing)
    expired = add_checkpoint(store, BETA, clock, "10s", "short")
    clock.advance(60)

    evaluations = run_checks(config, slate)
    failed = {key for key, e in evaluations.items() if not e.passed}
    assert failed == {
        ("alpha", "ssts_exist"),
        ("alpha", "l0_below_threshold"),
        ("beta", "no_expired_checkpoints"),
    }

    sst = evaluations[("alpha", "ssts_exist")]
    assert sst.severity == dg.AssetCheckSeverity.ERROR
    assert sst.description is not None and missing in sst.description and "latest manifest" in sst.description
    assert meta(sst)["problem_count"] == 1
    assert missing.replace("_", "\\_") in str(meta(sst)["problems"])

    level0 = evaluations[("alpha", "l0_below_threshold")]
    assert level0.severity == dg.AssetCheckSeverity.WARN
    assert level0.description is not None and "compaction threshold 4" in level0.description

    lingering = evaluations[("beta", "no_expired_checkpoints")]
    assert lingering.severity == dg.AssetCheckSeverity.WARN
    assert lingering.description is not None and expired in lingering.description
    assert "'short'" in lingering.description and "50 s ago" in lingering.description


def test_the_l0_check_uses_the_databases_compaction_threshold(
    store_url: str, fleet_store: ObjectStore, clock: ManualRuntime
) -> None:
    low = DatabaseConfig.model_validate(
        {"name": "low", "store_url": store_url, "path": ALPHA, "compaction_l0_threshold": 2}
    )
    config = SlateOpsConfig(databases=[low])
    slate = SlateDatabasesResource(config=config).with_clock(clock)
    write_l0(fleet_store, ALPHA, clock, 1)
    assert run_checks(config, slate)[("low", "l0_below_threshold")].passed
    write_l0(fleet_store, ALPHA, clock, 1)
    evaluation = run_checks(config, slate)[("low", "l0_below_threshold")]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.description is not None and "compaction threshold 2" in evaluation.description
    write_l0(fleet_store, ALPHA, clock, 6)  # 8: the writer's l0_max_ssts
    evaluation = run_checks(config, slate)[("low", "l0_below_threshold")]
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR


def test_a_database_that_does_not_exist_fails_every_check_with_the_error(
    config: SlateOpsConfig, slate: SlateDatabasesResource
) -> None:
    evaluations = run_checks(config, slate)
    assert len(evaluations) == len(CHECKS) * 2
    for evaluation in evaluations.values():
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
        assert evaluation.description is not None
        assert evaluation.description.startswith("cannot verify: DbNotFoundError: no database at")


def test_problems_markdown_escapes_and_caps() -> None:
    assert problems_markdown(()) == "none"
    text = problems_markdown(tuple(f"a_b|{i}" for i in range(PROBLEMS_SHOWN + 3)))
    lines = text.splitlines()
    assert lines[0] == "- a\\_b\\|0" and len(lines) == PROBLEMS_SHOWN + 1
    assert lines[-1] == "- … and 3 more"


# --- observations -------------------------------------------------------------------------------


def test_observations_and_materializations_carry_shape_checkpoints_and_tags(
    config: SlateOpsConfig, slate: SlateDatabasesResource, created: ObjectStore, clock: ManualRuntime
) -> None:
    store = created
    write_l0(store, ALPHA, clock, 2)
    add_checkpoint(store, ALPHA, clock, "1h", "backup")
    admin.create_checkpoint(ALPHA, store, CheckpointOptions(lifetime=timedelta(hours=1)), clock=clock)
    admin.create_tag(ALPHA, store, "v1", clock=clock)
    admin.create_tag(ALPHA, store, "v2", clock=clock)

    context = dg.build_sensor_context(cursor=None, resources={RESOURCE_KEY: slate})
    result = slate_ops_manifest_sensor(context)
    assert isinstance(result, dg.SensorResult)
    observed = {
        e.asset_key.path[-1]: {k: v.value for k, v in e.metadata.items()} for e in result.asset_events
    }
    alpha, beta = observed["alpha"], observed["beta"]
    assert (alpha["l0_ssts"], alpha["checkpoints"], alpha["tag_count"]) == (2, 4, 2)
    assert alpha["tag_names"] == "v1, v2"
    names = str(alpha["checkpoint_names"]).split(", ")
    assert names[0] == "backup" and len(names) == 2  # the unnamed one by its id; tags left out
    shape = str(alpha["lsm_shape"])
    assert shape.startswith(f"Manifest {alpha['manifest_id']}: 2 L0 SST(s), 0 sorted run(s)")
    assert shape.count("| L0 |") == 2
    assert (alpha["writer_epoch"], alpha["compactor_epoch"]) == (1, 0)  # one writer opened it
    assert (beta["tag_count"], beta["tag_names"], beta["checkpoint_names"]) == (0, "-", "-")
    assert str(beta["lsm_shape"]) == "Manifest 1: 0 L0 SST(s), 0 sorted run(s)."

    materialized = dg.materialize(build_database_assets(config), resources={RESOURCE_KEY: slate})
    (event, *_) = materialized.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert {"lsm_shape", "checkpoint_names", "tag_count", "tag_names", "manifest_id"} <= set(metadata)


def test_the_observation_comes_from_the_read_that_found_the_change(
    slate: SlateDatabasesResource, created: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full metadata (summary and LSM shape) of a changed database needs no second GET."""
    opened: list[CountingStore] = []
    store_of = fleet.store_of

    def counted(*args: Any) -> CountingStore:
        opened.append(CountingStore(store_of(*args)))
        return opened[-1]

    monkeypatch.setattr(fleet, "store_of", counted)
    result = slate_ops_manifest_sensor(dg.build_sensor_context(cursor=None, resources={RESOURCE_KEY: slate}))
    assert isinstance(result, dg.SensorResult) and len(result.asset_events) == 2
    for event in result.asset_events:
        assert "manifest_id" in event.metadata and "lsm_shape" in event.metadata
    assert [store.counts["get"] for store in opened] == [1, 1]
