"""Rescaling in Dagster: shards are assets downstream of their source; the rescale job splits and merges."""

from __future__ import annotations

import dagster as dg
import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.errors import ConfigError, SlateOpsError
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import DB_TAG, DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.assets import build_database_assets, database_asset_key
from slate_ops.orchestration.checks import ALL_CHECKS as CHECKS  # verify's checks and gc_health
from slate_ops.orchestration.config import parse_config
from slate_ops.orchestration.rescale import rescale_run_config
from slate_ops.orchestration.resources import RESOURCE_KEY
from tests.support.engine import QUIET_READER, quiet
from tests.support.orchestration import ALPHA, BETA

MODEL = {b"k%02d" % i: b"v%d" % i for i in range(40)}


@pytest.fixture
def config(store_url: str) -> SlateOpsConfig:
    """alpha, beta, alpha's two shards and their merge."""
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA),
            DatabaseConfig(name="beta", store_url=store_url, path=BETA),
            DatabaseConfig(name="alpha_low", store_url=store_url, path="dbs/low", rescaled_from=["alpha"]),
            DatabaseConfig(name="alpha_high", store_url=store_url, path="dbs/high", rescaled_from=["alpha"]),
            DatabaseConfig(
                name="alpha_again",
                store_url=store_url,
                path="dbs/again",
                rescaled_from=["alpha_low", "alpha_high"],
            ),
        ]
    )


@pytest.fixture
def seeded(fleet_store: ObjectStore) -> ObjectStore:
    with Db.open(ALPHA, fleet_store, quiet()) as db:
        for key, value in MODEL.items():
            db.put(key, value)
        db.flush_memtable()
    return fleet_store


def read_all(store: ObjectStore, path: str) -> dict[bytes, bytes]:
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def test_shards_are_downstream_of_their_source(defs: dg.Definitions) -> None:
    graph = defs.resolve_asset_graph()
    alpha, low, high, again = (
        database_asset_key(n) for n in ("alpha", "alpha_low", "alpha_high", "alpha_again")
    )
    assert graph.get(low).parent_keys == {alpha} and graph.get(high).parent_keys == {alpha}
    assert graph.get(again).parent_keys == {low, high}
    assert defs.resolve_job_def("rescale_job").name == "rescale_job"


def test_split_then_merge_through_the_job(
    defs: dg.Definitions, seeded: ObjectStore, slate: SlateDatabasesResource
) -> None:
    job = defs.resolve_job_def("rescale_job")
    result = job.execute_in_process(
        run_config=rescale_run_config(
            "split", [{"name": "alpha_low"}, {"name": "alpha_high"}], database="alpha", split_keys=["k20"]
        ),
        tags={DB_TAG: "alpha"},
        resources={RESOURCE_KEY: slate},
    )
    assert result.success
    materialized = [m.asset_key for m in result.get_asset_materialization_events()]
    # The shards, then the source (it gained the checkpoints that pin them), as the run left them.
    assert materialized == [database_asset_key(n) for n in ("alpha_low", "alpha_high", "alpha")]
    assert read_all(seeded, "dbs/low") == {k: v for k, v in MODEL.items() if k < b"k20"}
    (event,) = [e for e in result.all_node_events if e.is_successful_output]
    table = event.step_output_data.metadata["databases"].value
    assert "dbs/low" in table and "[-inf, k20)" in table and "[k20, +inf)" in table
    # The shards (and the source, which gained their checkpoints) are checked in the same run, all green.
    evaluations = [
        e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    for name in ("alpha", "alpha_low", "alpha_high"):
        mine = [ev for ev in evaluations if ev.asset_key == database_asset_key(name)]
        assert sorted(ev.check_name for ev in mine) == sorted(CHECKS) and all(ev.passed for ev in mine), name

    merged = job.execute_in_process(
        run_config=rescale_run_config(
            "merge", [{"name": "alpha_again"}], sources=["alpha_low", "alpha_high"]
        ),
        tags={DB_TAG: "alpha_low"},
        resources={RESOURCE_KEY: slate},
    )
    assert merged.success and merged.output_for_node("rescale_op").created
    assert read_all(seeded, "dbs/again") == MODEL
    # Materializing the assets afterwards only records their state.
    assets = dg.materialize(build_database_assets(slate.config), resources={RESOURCE_KEY: slate})
    assert assets.success


def test_a_shard_asset_is_not_created_by_materializing(
    config: SlateOpsConfig, seeded: ObjectStore, slate: SlateDatabasesResource
) -> None:
    assets = [a for a in build_database_assets(config) if database_asset_key("alpha_low") in a.keys]
    with pytest.raises(ConfigError, match="rescale_job"):
        dg.materialize(assets, resources={RESOURCE_KEY: slate})


@pytest.mark.parametrize(
    ("op_config", "message"),
    [
        (
            {"operation": "split", "database": "alpha", "split_keys": ["k1"], "targets": [{"name": "x"}]},
            "2 shards",
        ),
        ({"operation": "merge", "targets": [{"name": "x"}]}, "one or more `sources`"),
        (
            {"operation": "merge", "sources": ["a"], "split_keys": ["k"], "targets": [{"name": "x"}]},
            "no split_keys",
        ),
        ({"operation": "resize", "targets": [{"name": "x"}]}, "operation"),
    ],
)
def test_invalid_run_config_is_refused_before_running(
    defs: dg.Definitions, slate: SlateDatabasesResource, op_config: dict[str, object], message: str
) -> None:
    job = defs.resolve_job_def("rescale_job")
    with pytest.raises(Exception, match=message):
        job.execute_in_process(
            run_config={"ops": {"rescale_op": {"config": op_config}}},
            tags={DB_TAG: "alpha"},
            resources={RESOURCE_KEY: slate},
        )


def test_a_target_configured_from_other_sources_is_refused(
    defs: dg.Definitions, seeded: ObjectStore, slate: SlateDatabasesResource
) -> None:
    job = defs.resolve_job_def("rescale_job")
    admin.create_db(BETA, seeded)
    with pytest.raises(ConfigError, match="rescaled_from"):
        job.execute_in_process(
            run_config=rescale_run_config(
                "split", [{"name": "alpha_low"}, {"name": "alpha_high"}], database="beta", split_keys=["k20"]
            ),
            tags={DB_TAG: "beta"},
            resources={RESOURCE_KEY: slate},
        )


def test_config_validates_rescaled_from(store_url: str) -> None:
    with pytest.raises(ConfigError, match="not another configured database"):
        parse_config(f"databases: [{{name: a, store_url: '{store_url}', path: a, rescaled_from: [zz]}}]")
    with pytest.raises(ConfigError, match="one origin"):
        parse_config(
            f"databases: [{{name: a, store_url: '{store_url}', path: a}}, "
            f"{{name: b, store_url: '{store_url}', path: b, parent: a, rescaled_from: [a]}}]"
        )


@pytest.mark.parametrize(
    ("op_config", "message"),
    [
        ({"operation": "splt", "split_keys": ["k1"], "targets": [{"name": "x"}, {"name": "y"}]}, "splt"),
        ({"operation": "split", "split_keys": "k1", "targets": [{"name": "x"}, {"name": "y"}]}, "split_keys"),
        ({"operation": "split", "split_keys": ["k1"]}, "targets"),
        ({"operation": "split", "split_key": ["k1"], "targets": [{"name": "x"}]}, "split_key"),
        ({"operation": "merge", "sources": ["a"], "targets": [{"name": "x", "pth": "p"}]}, "pth"),
    ],
)
def test_the_config_schema_refuses_a_bad_rescale_config_at_launch(
    defs: dg.Definitions, slate: SlateDatabasesResource, op_config: dict[str, object], message: str
) -> None:
    """Dagster's own config validation, before a run exists (no step runs, nothing is read)."""
    job = defs.resolve_job_def("rescale_job")
    with pytest.raises(dg.DagsterInvalidConfigError, match=message):
        job.execute_in_process(
            run_config={"ops": {"rescale_op": {"config": op_config}}},
            tags={DB_TAG: "alpha"},
            resources={RESOURCE_KEY: slate},
        )


@pytest.mark.parametrize(
    ("op_config", "message"),
    [
        ({"operation": "split", "split_keys": [], "targets": [{"name": "x"}]}, "one or more split_keys"),
        ({"operation": "split", "split_keys": ["k1"], "targets": [{"name": "x"}]}, "make 2 shards but 1"),
        ({"operation": "split", "split_keys": ["k1"], "targets": []}, "make 2 shards but 0"),
        (
            {"operation": "merge", "sources": ["a", "b"], "targets": [{"name": "x"}, {"name": "y"}]},
            "exactly one",
        ),
        ({"operation": "split", "split_keys": ["k1"], "targets": [{"name": "x-1"}, {"name": "y"}]}, "'x-1'"),
        (
            {
                "operation": "split",
                "split_keys": ["k1"],
                "targets": [{"name": "x", "path": "a/wal"}, {"name": "y"}],
            },
            "reserved name",
        ),
    ],
)
def test_a_bad_rescale_config_fails_with_a_typed_error_not_a_pydantic_traceback(
    defs: dg.Definitions, slate: SlateDatabasesResource, op_config: dict[str, object], message: str
) -> None:
    """What Dagster's schema cannot express (counts, rules across fields, names): the op's first
    action refuses it with a slate_ops error that says what to fix."""
    job = defs.resolve_job_def("rescale_job")
    with pytest.raises(SlateOpsError, match=message) as refused:
        job.execute_in_process(
            run_config={"ops": {"rescale_op": {"config": op_config}}},
            tags={DB_TAG: "alpha"},
            resources={RESOURCE_KEY: slate},
        )
    assert "pydantic" not in str(refused.value).lower() and "validation error" not in str(refused.value)
