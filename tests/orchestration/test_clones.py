"""Clones in Dagster: configured clones are assets downstream of their parent; the clone job."""

from __future__ import annotations

import dagster as dg
import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.errors import ConfigError
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import DB_TAG, DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.assets import build_database_assets, database_asset_key
from slate_ops.orchestration.checks import ALL_CHECKS as CHECKS  # verify's checks and gc_health
from slate_ops.orchestration.clones import clone_run_config
from slate_ops.orchestration.config import parse_config
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.engine import QUIET_READER, quiet
from tests.support.orchestration import ALPHA, BETA

CLONE = "dbs/alpha_clone"


@pytest.fixture
def config(store_url: str) -> SlateOpsConfig:
    """alpha, beta, and alpha_clone: a clone of alpha."""
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA),
            DatabaseConfig(name="beta", store_url=store_url, path=BETA),
            DatabaseConfig(name="alpha_clone", store_url=store_url, path=CLONE, parent="alpha"),
        ]
    )


def seed_alpha(store: ObjectStore) -> None:
    with Db.open(ALPHA, store, quiet()) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        db.put(b"b", b"2")  # only in the WAL


def read_all(store: ObjectStore, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def materialized(result: dg.ExecuteInProcessResult, name: str) -> dict[str, object]:
    (event,) = [
        m for m in result.get_asset_materialization_events() if m.asset_key == database_asset_key(name)
    ]
    return {key: value.value for key, value in event.materialization.metadata.items()}


def test_a_clone_asset_is_downstream_of_its_parent(defs: dg.Definitions) -> None:
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    clone_key, alpha_key = database_asset_key("alpha_clone"), database_asset_key("alpha")
    assert graph.get(clone_key).parent_keys == {alpha_key}
    assert clone_key in graph.get(alpha_key).child_keys
    assert graph.get(database_asset_key("beta")).parent_keys == set()
    specs = {spec.key: spec for spec in defs.resolve_all_asset_specs()}
    assert [dep.asset_key for dep in specs[clone_key].deps] == [alpha_key]
    assert defs.resolve_job_def("clone_job").name == "clone_job"


def test_materializing_creates_the_parent_then_the_clone(
    config: SlateOpsConfig, fleet_store: ObjectStore, slate: SlateDatabasesResource
) -> None:
    admin.create_db(ALPHA, fleet_store)
    seed_alpha(fleet_store)
    result = dg.materialize(build_database_assets(config), resources={RESOURCE_KEY: slate})
    assert result.success
    order = [m.asset_key for m in result.get_asset_materialization_events()]
    assert order.index(database_asset_key("alpha")) < order.index(database_asset_key("alpha_clone"))
    clone = admin.read_manifest(CLONE, fleet_store).value
    assert clone.initialized and [ed.path for ed in clone.external_dbs] == [ALPHA]
    assert materialized(result, "alpha_clone")["external_dbs"] == 1
    assert read_all(fleet_store, CLONE) == {b"a": b"1", b"b": b"2"}

    # Materializing again keeps the clone as it is; its own writes stay its own.
    with Db.open(CLONE, fleet_store, quiet()) as db:
        db.put(b"c", b"3")
    before = admin.read_manifest(CLONE, fleet_store).id
    again = dg.materialize(
        build_database_assets(config),
        resources={RESOURCE_KEY: slate},
        selection=[database_asset_key("alpha_clone")],
    )
    assert again.success and materialized(again, "alpha_clone")["manifest_id"] == before
    assert read_all(fleet_store, CLONE) == {b"a": b"1", b"b": b"2", b"c": b"3"}
    assert read_all(fleet_store, ALPHA) == {b"a": b"1", b"b": b"2"}


def test_the_clone_job_clones_an_unconfigured_path(
    defs: dg.Definitions, created: ObjectStore, slate: SlateDatabasesResource, clock: ManualRuntime
) -> None:
    seed_alpha(created)
    checkpoint = admin.create_checkpoint(ALPHA, created, clock=clock).id
    job = defs.resolve_job_def("clone_job")
    result = job.execute_in_process(
        run_config=clone_run_config("alpha", "adhoc", "dbs/adhoc", str(checkpoint)),
        tags={DB_TAG: "alpha"},
        resources={RESOURCE_KEY: slate},
    )
    assert result.success
    output = result.output_for_node("clone_op")
    assert (output.parent, output.clone_path, output.source_checkpoint_id) == (
        "alpha",
        "dbs/adhoc",
        checkpoint,
    )
    (event,) = [e for e in result.all_node_events if e.is_successful_output]
    metadata = {k: v.value for k, v in event.step_output_data.metadata.items()}
    assert metadata["clone_path"] == "dbs/adhoc" and metadata["initialized"] is True
    assert metadata["final_checkpoint_id"] == str(output.final_checkpoint_id)
    assert admin.read_manifest("dbs/adhoc", created).value.initialized
    assert {c.id for c in admin.list_checkpoints(ALPHA, created)} == {checkpoint, output.final_checkpoint_id}
    # A re-run with the same config is a no-op; the database defaults to the run tag.
    rerun = job.execute_in_process(
        run_config={"ops": {"clone_op": {"config": {"clone_name": "adhoc", "clone_path": "dbs/adhoc"}}}},
        tags={DB_TAG: "alpha"},
        resources={RESOURCE_KEY: slate},
    )
    assert rerun.success and rerun.output_for_node("clone_op").manifest_id == output.manifest_id


def test_the_clone_job_creates_a_configured_clone_and_records_both_assets(
    defs: dg.Definitions, created: ObjectStore, slate: SlateDatabasesResource
) -> None:
    job = defs.resolve_job_def("clone_job")
    result = job.execute_in_process(
        run_config=clone_run_config("alpha", "alpha_clone"),
        tags={DB_TAG: "alpha"},
        resources={RESOURCE_KEY: slate},
    )
    assert result.success and result.output_for_node("clone_op").clone_path == CLONE
    # Both databases the run changed (the parent gained the clone's checkpoint) are materialized
    # with their new state and checked again in the run, so the UI shows them as the run left them.
    materialized = result.get_asset_materialization_events()
    assert [e.asset_key for e in materialized] == [
        database_asset_key("alpha"),
        database_asset_key("alpha_clone"),
    ]
    checked = [
        e.event_specific_data.asset_key
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION" and e.event_specific_data.passed
    ]
    assert checked.count(database_asset_key("alpha_clone")) == len(CHECKS)
    assert checked.count(database_asset_key("alpha")) == len(CHECKS)

    wrong_parent = job.execute_in_process(
        run_config=clone_run_config("beta", "alpha_clone"),
        tags={DB_TAG: "beta"},
        resources={RESOURCE_KEY: slate},
        raise_on_error=False,
    )
    assert not wrong_parent.success
    no_path = job.execute_in_process(
        run_config=clone_run_config("alpha", "unknown"),
        tags={DB_TAG: "alpha"},
        resources={RESOURCE_KEY: slate},
        raise_on_error=False,
    )
    assert not no_path.success
    assert admin.read_manifest(BETA, created).id == 1  # nothing was written to beta


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("- {name: a, path: a, parent: nope}", "parent 'nope', which is not configured"),
        ("- {name: a, path: a, parent: a}", "cycle: a -> a"),
        ("- {name: a, path: a, parent: b}\n  - {name: b, path: b, parent: a}", "cycle"),
        (
            "- {name: a, path: a}\n  - {name: b, path: b, parent: a, store_url: 'memory://x'}",
            "parent 'a''s store",
        ),
    ],
)
def test_config_validates_parents(entries: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(f"databases:\n  {entries}\n")


def test_config_accepts_a_chain_of_clones() -> None:
    config = parse_config(
        "databases:\n"
        "  - {name: a, path: a}\n"
        "  - {name: b, path: b, parent: a}\n"
        "  - {name: c, path: c, parent: b}\n"
    )
    assert [d.parent for d in config.databases] == [None, "a", "b"]
