"""slate_ops.orchestration.FleetComponent loaded from a defs.yaml through Dagster's own component
machinery (a defs folder sandbox, ``ComponentTree``): the fleet from YAML or a config file, the
builder's options, clear schema errors, the scaffolder's template, and the override hooks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from slate_ops import admin
from slate_ops.objstore import open_store
from slate_ops.orchestration import FleetComponent, SlateDatabasesResource
from slate_ops.orchestration.component import SCAFFOLD_TEMPLATE
from slate_ops.orchestration.config import DatabaseConfig, PricesConfig
from slate_ops.orchestration.naming import StepCall
from slate_ops.orchestration.resources import SlateDatabasesResource as _Resource

TYPE = "slate_ops.orchestration.FleetComponent"


@pytest.fixture
def sandbox() -> Iterator[Any]:
    from dagster.components.testing import create_defs_folder_sandbox

    with create_defs_folder_sandbox() as box:
        yield box


def _component(sandbox: Any, attributes: dict[str, Any], type_name: str = TYPE, name: str = "fleet") -> Path:
    path: Path = sandbox.defs_folder_path / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "defs.yaml").write_text(yaml.safe_dump({"type": type_name, "attributes": attributes}))
    return path


def _chain(error: BaseException) -> str:
    """Every message of ``error`` and its causes (Dagster wraps a component's error in its tree's)."""
    messages = []
    current: BaseException | None = error
    while current is not None:
        messages.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(messages)


def _job_names(defs: dg.Definitions) -> set[str]:
    return {job.name for job in defs.get_repository_def().get_all_jobs()} - {"__ASSET_JOB"}


def test_the_fleet_from_yaml_with_resource_keys_prefix_and_a_job_subset(sandbox: Any, store_url: str) -> None:
    path = _component(
        sandbox,
        {
            "databases": [
                {
                    "name": "orders",
                    "path": "orders",
                    "store_url": store_url,
                    "compaction": {"l0_threshold": 2, "executor": "local"},
                    "tag_policy": {"create_time": "02:00", "num_retained_max": 3},
                },
                {"name": "orders_clone", "path": "orders_clone", "store_url": store_url, "parent": "orders"},
            ],
            "jobs": ["maintenance_job", "compaction_job"],
            "resource_keys": {"slate": "x_slate", "pyspark": "x_spark"},
            "prefix": "eu_",
        },
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
        assert isinstance(component, FleetComponent)
        dg.Definitions.validate_loadable(defs)
        jobs = _job_names(defs)
        assert {"eu_maintenance_job", "eu_compaction_job"} <= jobs
        assert not {j for j in jobs if "gc_job" in j or "rescale_job" in j}
        assert {spec.key for spec in defs.resolve_all_asset_specs()} == {
            dg.AssetKey(["eu", "slate_ops", "orders"]),
            dg.AssetKey(["eu", "slate_ops", "orders_clone"]),
            dg.AssetKey("eu_slate_ops_fleet_cost"),
        }
        assert defs.resources is not None
        assert {"x_slate", "x_spark"} <= set(defs.resources)
        slate = defs.resources["x_slate"]
        assert isinstance(slate, _Resource)
        orders = slate.config.database("orders")
        assert orders.compaction.l0_threshold == 2
        assert orders.tag_policy is not None and orders.tag_policy.num_retained_max == 3
        assert slate.config.database("orders_clone").parent == "orders"


def test_a_database_without_store_url_lives_in_slate_ops_store(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch, store_url: str
) -> None:
    monkeypatch.setenv("SLATE_OPS_STORE", store_url)
    path = _component(sandbox, {"databases": [{"name": "orders", "path": "o"}]})
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, _):
        assert component.fleet_config().database("orders").store_url == store_url


def test_config_file_is_read_relative_to_the_defs_folder(sandbox: Any, store_url: str) -> None:
    path = _component(sandbox, {"config_file": "fleet.yaml", "prefix": "f_"})
    (path / "fleet.yaml").write_text(
        yaml.safe_dump({"databases": [{"name": "from_file", "path": "p", "store_url": store_url}]})
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        assert {spec.key for spec in defs.resolve_all_asset_specs()} == {
            dg.AssetKey(["f", "slate_ops", "from_file"]),
            dg.AssetKey("f_slate_ops_fleet_cost"),
        }
        assert "f_maintenance_job" in _job_names(defs)


def test_no_fleet_given_is_the_embedded_default(sandbox: Any) -> None:
    path = _component(sandbox, {})
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        names = {spec.key.path[-1] for spec in defs.resolve_all_asset_specs()}
        assert names == {"demo", "demo_clone", "demo_low", "demo_high", "slate_ops_fleet_cost"}
        assert {"maintenance_job", "rescale_job", "gc_job"} <= _job_names(defs)


def test_an_unknown_attribute_is_refused_by_the_schema_with_its_name(sandbox: Any, store_url: str) -> None:
    path = _component(sandbox, {"databse": [{"name": "x", "path": "x", "store_url": store_url}]})
    with pytest.raises(Exception) as raised, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    message = _chain(raised.value)
    assert "attributes.databse" in message and "Extra inputs are not permitted" in message, message


def test_a_bad_policy_value_is_refused_by_the_schema_with_its_field(sandbox: Any, store_url: str) -> None:
    path = _component(
        sandbox,
        {
            "databases": [
                {"name": "x", "path": "x", "store_url": store_url, "compaction": {"executor": "gpu"}}
            ]
        },
    )
    with pytest.raises(Exception) as raised, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    message = _chain(raised.value)
    assert "0.compaction.executor" in message and "'local' or 'spark'" in message, message


def test_a_fleet_level_mistake_is_a_config_error_naming_the_defs_yaml(sandbox: Any, store_url: str) -> None:
    path = _component(
        sandbox,
        {"databases": [{"name": "c", "path": "c", "store_url": store_url, "parent": "missing"}]},
    )
    with pytest.raises(Exception) as raised, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    message = _chain(raised.value)
    assert "ConfigError: invalid slate_ops config" in message
    assert str(path / "defs.yaml") in message and "'missing'" in message and "not configured" in message


def test_config_file_and_databases_together_are_refused(sandbox: Any, store_url: str) -> None:
    path = _component(
        sandbox,
        {"config_file": "fleet.yaml", "databases": [{"name": "x", "path": "x", "store_url": store_url}]},
    )
    with pytest.raises(Exception) as raised, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    assert "ConfigError: slate_ops FleetComponent" in _chain(raised.value)
    assert "set either config_file or databases/discover, not both" in _chain(raised.value)


def test_a_credential_in_a_store_url_is_refused_and_not_echoed(sandbox: Any) -> None:
    url = "s3://bucket/p?secret_access_key=hunter2"
    path = _component(sandbox, {"databases": [{"name": "x", "path": "x", "store_url": url}]})
    with pytest.raises(Exception) as raised, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    message = _chain(raised.value)
    assert "hunter2" not in message
    assert "ConfigError: invalid slate_ops config" in message and "secret_access_key" in message, message


def test_the_scaffolded_defs_yaml_loads(sandbox: Any) -> None:
    path = sandbox.scaffold_component(component_cls=FleetComponent, defs_path="fleet")
    text = (path / "defs.yaml").read_text()
    assert text == SCAFFOLD_TEMPLATE.format(type_name="slate_ops.orchestration.component.FleetComponent")
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
        assert isinstance(component, FleetComponent)
        assert {spec.key.path[-1] for spec in defs.resolve_all_asset_specs()} == {
            "demo",
            "demo_clone",
            "slate_ops_fleet_cost",
        }
        dg.Definitions.validate_loadable(defs)


class OwnedFleet(FleetComponent):
    """A user's subclass: owners and a kind on every database's asset, and every step recorded."""

    def get_asset_spec(self, database: DatabaseConfig, default_spec: dg.AssetSpec) -> dg.AssetSpec:
        return default_spec.replace_attributes(
            key=dg.AssetKey(["lake", database.name]), owners=["team:storage"]
        ).merge_attributes(kinds={"slatedb"})

    def run_step(self, call: StepCall) -> Any:
        STEPS.append((call.op_name, call.database))
        return call.run()


STEPS: list[tuple[str, str]] = []


def test_hooks_of_a_subclass_change_the_specs_and_see_every_step(sandbox: Any, store_url: str) -> None:
    STEPS.clear()
    admin.create_db("orders", open_store(store_url))
    path = _component(
        sandbox,
        {"databases": [{"name": "orders", "path": "orders", "store_url": store_url}]},
        type_name=f"{__name__}.OwnedFleet",
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
        assert isinstance(component, OwnedFleet)
        fleet_cost, spec = sorted(defs.resolve_all_asset_specs(), key=lambda s: len(s.key.path))
        assert spec.key == dg.AssetKey(["lake", "orders"])
        assert fleet_cost.key == dg.AssetKey("slate_ops_fleet_cost")  # not a database: no hook
        assert spec.owners == ["team:storage"] and "slatedb" in spec.kinds
        check_keys = defs.get_repository_def().asset_graph.asset_check_keys
        assert check_keys and {key.asset_key for key in check_keys} == {dg.AssetKey(["lake", "orders"])}

        job = defs.resolve_job_def("maintenance_job")
        with dg.DagsterInstance.ephemeral() as instance:
            partitions = job.partitions_def
            assert isinstance(partitions, dg.DynamicPartitionsDefinition) and partitions.name is not None
            instance.add_dynamic_partitions(partitions.name, ["orders"])
            result = job.execute_in_process(partition_key="orders", instance=instance)
        assert result.success
    ops = [op for op, _ in STEPS]
    assert ops == [
        "maintenance_expire_checkpoints",
        "maintenance_compact",
        "maintenance_tag_policy",
        "maintenance_gc",
    ]
    assert {db for _, db in STEPS} == {"orders"}


def test_the_component_is_exported_with_a_scaffolder() -> None:
    from dagster.components.scaffold.scaffold import get_scaffolder, has_scaffolder

    import slate_ops.orchestration as orchestration

    assert orchestration.FleetComponent is FleetComponent
    assert has_scaffolder(FleetComponent)
    assert type(get_scaffolder(FleetComponent)).__name__ == "FleetComponentScaffolder"
    assert SlateDatabasesResource is _Resource


def test_the_yaml_schema_is_the_fleet_configs_models() -> None:
    """Editors and ``dg check yaml`` see the fleet config's fields and policy groups, typed."""
    schema = FleetComponent.model().model_json_schema()
    assert set(schema["properties"]) == {
        "config_file",
        "databases",
        "discover",
        "jobs",
        "schedules",
        "sensors",
        "resource_keys",
        "prefix",
        "resources",
        "prices",
        "cost_window_days",
    }
    database = schema["$defs"]["FleetDatabase"]["properties"]
    prices = schema["$defs"]["FleetPrices"]["properties"]
    assert set(PricesConfig.model_fields) == set(prices)  # PriceTable's fields, every one
    assert set(DatabaseConfig.model_fields) == set(database)
    assert "store_url" not in schema["$defs"]["FleetDatabase"].get("required", [])
    compaction = schema["$defs"]["CompactionPolicy"]["properties"]
    assert compaction["executor"]["enum"] == ["local", "spark"]


def test_the_price_table_and_the_cost_window_come_from_the_yaml(sandbox: Any, store_url: str) -> None:
    databases = [{"name": "orders", "path": "o", "store_url": store_url, "compaction": {"l0_threshold": 2}}]
    prices = {"put_per_1000": 0.0045, "list_per_1000": 0.0045, "source": "R2 class A"}
    path = _component(sandbox, {"databases": databases, "prices": prices, "cost_window_days": 14})
    with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
        assert defs.resources is not None
        slate = defs.resources["slate_ops"]
        assert isinstance(slate, _Resource)
        table = slate.config.prices.table()
        assert (table.put_per_1000, table.list_per_1000, table.source) == (0.0045, 0.0045, "R2 class A")
        assert table.get_per_1000 == 0.0004  # the rest: S3 Standard's
        assert slate.config.cost_window_days == 14
        assert slate.config.database("orders").compaction.l0_threshold == 2  # the fleet as given


@pytest.mark.parametrize(
    ("attributes", "named"),
    [
        ({"prices": {"get_per_1000": -1}}, "prices.get_per_1000: Input should be greater than or equal to 0"),
        ({"cost_window_days": 0}, "cost_window_days: Input should be greater than 0"),
    ],
)
def test_a_bad_price_or_window_is_refused_naming_the_field(
    sandbox: Any, store_url: str, attributes: dict[str, Any], named: str
) -> None:
    databases = [{"name": "orders", "path": "o", "store_url": store_url}]
    path = _component(sandbox, {"databases": databases, **attributes})
    with pytest.raises(Exception) as raised, sandbox.load_component_and_build_defs(defs_path=path):
        pass
    message = _chain(raised.value)
    assert "ConfigError: slate_ops FleetComponent" in message and named in message, message
