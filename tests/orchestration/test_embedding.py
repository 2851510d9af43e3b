"""slate_ops embedded in a user's Dagster project: ``build_definitions`` with the caller's resource
keys, a name prefix (two fleets in one deployment), a subset of jobs, override hooks; and the wheel,
which installs nothing at the top level but ``slate_ops``."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_pyspark import LazyPySparkResource

from slate_ops import Db, admin
from slate_ops.errors import ConfigError
from slate_ops.objstore import open_store
from slate_ops.orchestration import (
    JOB_NAMES,
    DatabaseConfig,
    Hooks,
    Naming,
    ResourceKeys,
    SlateDatabasesResource,
    SlateOpsConfig,
    StepCall,
    build_definitions,
)
from slate_ops.orchestration.maintenance import STEPS, maintenance_run_config
from slate_ops.orchestration.resources import local_pyspark_resource

REPO = Path(__file__).resolve().parents[2]


def fleet(store_url: str, *names: str) -> SlateOpsConfig:
    return SlateOpsConfig(databases=[DatabaseConfig(name=n, store_url=store_url, path=n) for n in names])


def with_data(store_url: str, path: str) -> None:
    """``path`` with 4 L0 SSTs (something for compaction to do)."""
    with Db.open(path, open_store(store_url)) as db:
        for round_ in range(4):
            for i in range(50):
                db.put(b"k%03d" % i, b"round %d" % round_)
            db.flush_memtable()


@dg.op
def user_op(pyspark: LazyPySparkResource) -> str:
    return type(pyspark).__name__


def user_definitions() -> tuple[dg.Definitions, LazyPySparkResource]:
    """A user's project: its own job with a common name and its own ``pyspark`` resource."""
    pyspark = LazyPySparkResource(spark_config={"spark.app.name": "user_project"})

    @dg.job(name="nightly_job")
    def nightly_job() -> None:
        user_op()

    @dg.asset(key=["warehouse", "orders"])
    def orders() -> int:
        return 1

    return dg.Definitions(assets=[orders], jobs=[nightly_job], resources={"pyspark": pyspark}), pyspark


def test_a_user_project_with_its_own_pyspark_resource_merges(tmp_path: Path) -> None:
    user, pyspark = user_definitions()
    slate_ops = build_definitions(fleet((tmp_path / "store").as_uri(), "demo"))
    merged = dg.Definitions.merge(user, slate_ops)
    dg.Definitions.validate_loadable(merged)
    repository = merged.get_repository_def()
    jobs = {job.name for job in repository.get_all_jobs()} - {"__ASSET_JOB"}
    assert jobs == {"nightly_job", *JOB_NAMES}
    assert set(repository.get_top_level_resources()) == {"pyspark", "slate_ops", "slate_ops_pyspark"}
    resources = merged.resources or {}
    assert resources["pyspark"] is pyspark  # the user's, not shadowed
    assert isinstance(resources["slate_ops"], SlateDatabasesResource)
    assert {spec.key for spec in merged.resolve_all_asset_specs()} == {
        dg.AssetKey(["warehouse", "orders"]),
        dg.AssetKey(["slate_ops", "demo"]),
        dg.AssetKey("slate_ops_fleet_cost"),
    }
    result = merged.resolve_job_def("nightly_job").execute_in_process()
    assert result.success and result.output_for_node("user_op") == "LazyPySparkResource"


def test_a_user_job_named_like_a_slate_ops_job_needs_a_prefix(tmp_path: Path) -> None:
    @dg.job(name="maintenance_job")
    def users_maintenance() -> None:
        user_op()

    user = dg.Definitions(
        jobs=[users_maintenance], resources={"pyspark": LazyPySparkResource(spark_config={})}
    )
    config = fleet((tmp_path / "store").as_uri(), "demo")
    merged = dg.Definitions.merge(user, build_definitions(config, prefix="slate_"))
    dg.Definitions.validate_loadable(merged)
    jobs = {job.name for job in merged.get_repository_def().get_all_jobs()}
    assert {"maintenance_job", "slate_maintenance_job"} <= jobs
    assert [node.name for node in merged.resolve_job_def("maintenance_job").all_node_defs] == ["user_op"]


def maintain(defs: dg.Definitions, job: str, partition: str, prefix: str = "") -> dg.ExecuteInProcessResult:
    """A real maintenance run of ``partition`` (added to the job's partitions first) in the fleet
    with ``prefix`` (its op names are prefixed too)."""
    job_def = defs.resolve_job_def(job)
    assert isinstance(job_def.partitions_def, dg.DynamicPartitionsDefinition)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(str(job_def.partitions_def.name), [partition])
    return job_def.execute_in_process(
        run_config=maintenance_run_config(dry_run=False, naming=Naming(prefix=prefix)),
        partition_key=partition,
        instance=instance,
    )


def test_custom_resource_keys_work_end_to_end(tmp_path: Path) -> None:
    store_url = (tmp_path / "store").as_uri()
    with_data(store_url, "demo")
    keys = ResourceKeys(slate="x_slate", pyspark="x_spark")
    defs = build_definitions(fleet(store_url, "demo"), resource_keys=keys)
    repository = defs.get_repository_def()
    assert set(repository.get_top_level_resources()) == {"x_slate", "x_spark"}
    for job in repository.get_all_jobs():
        for node in job.all_node_defs:
            required = set(node.required_resource_keys) - {"io_manager"}
            assert required <= {"x_slate", "x_spark"}, (job.name, node.name, required)
    result = maintain(defs, "maintenance_job", "demo")
    assert result.success
    assert admin.lsm_shape("demo", open_store(store_url)).l0 == ()  # compacted for real
    # Built without resources, the caller binds the keys itself.
    bare = build_definitions(fleet(store_url, "demo"), resource_keys=keys, resources=False)
    assert not bare.resources
    slate = SlateDatabasesResource(config=fleet(store_url, "demo"))
    bound = dg.Definitions.merge(
        bare, dg.Definitions(resources={"x_slate": slate, "x_spark": local_pyspark_resource(slate)})
    )
    assert maintain(bound, "maintenance_job", "demo").success


def test_two_fleets_with_the_same_database_names_live_side_by_side(tmp_path: Path) -> None:
    store_a, store_b = (tmp_path / "a").as_uri(), (tmp_path / "b").as_uri()
    fleet_a, fleet_b = fleet(store_a, "demo"), fleet(store_b, "demo", "extra")
    a = build_definitions(fleet_a, prefix="a_")
    b = build_definitions(fleet_b, prefix="b_")
    merged = dg.Definitions.merge(a, b)
    dg.Definitions.validate_loadable(merged)
    repository = merged.get_repository_def()
    jobs = {job.name for job in repository.get_all_jobs()} - {"__ASSET_JOB"}
    assert jobs == {f"{p}{name}" for p in ("a_", "b_") for name in JOB_NAMES}
    assert set(repository.get_top_level_resources()) == {
        "a_slate_ops",
        "a_slate_ops_pyspark",
        "b_slate_ops",
        "b_slate_ops_pyspark",
    }
    assert {spec.key: spec.group_name for spec in merged.resolve_all_asset_specs()} == {
        dg.AssetKey(["a", "slate_ops", "demo"]): "a_slate_ops",
        dg.AssetKey(["b", "slate_ops", "demo"]): "b_slate_ops",
        dg.AssetKey(["b", "slate_ops", "extra"]): "b_slate_ops",
        dg.AssetKey("a_slate_ops_fleet_cost"): "a_slate_ops",
        dg.AssetKey("b_slate_ops_fleet_cost"): "b_slate_ops",
    }
    checks = {key.asset_key for key in merged.resolve_asset_graph().asset_check_keys}
    fleet_costs = {dg.AssetKey("a_slate_ops_fleet_cost"), dg.AssetKey("b_slate_ops_fleet_cost")}
    assert checks == {spec.key for spec in merged.resolve_all_asset_specs()} - fleet_costs
    partitions = {
        job.name: job.partitions_def.name
        for job in repository.get_all_jobs()
        if isinstance(job.partitions_def, dg.DynamicPartitionsDefinition)
    }
    assert partitions["a_maintenance_job"] == "a_slate_ops_databases"
    assert partitions["b_gc_job"] == "b_slate_ops_databases"

    # Each fleet's partitions sensor adds its own databases to its own partitions definition.
    with dg.DagsterInstance.ephemeral() as instance:
        for prefix, config in (("a_", fleet_a), ("b_", fleet_b)):
            sensor = merged.resolve_sensor_def(f"{prefix}slate_ops_partitions_sensor")
            context = dg.build_sensor_context(
                instance=instance, resources={f"{prefix}slate_ops": SlateDatabasesResource(config=config)}
            )
            result = sensor(context)
            assert isinstance(result, dg.SensorResult)
            (request,) = result.dynamic_partitions_requests or []
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            assert request.partitions_def_name == f"{prefix}slate_ops_databases"
            assert list(request.partition_keys) == [db.name for db in config.databases]

    # Fleet b's demo is maintained in b's store, fleet a's untouched.
    for store_url in (store_a, store_b):
        with_data(store_url, "demo")
    result = maintain(merged, "b_maintenance_job", "demo", prefix="b_")
    assert result.success
    assert admin.lsm_shape("demo", open_store(store_b)).l0 == ()
    assert len(admin.lsm_shape("demo", open_store(store_a)).l0) == 4
    assert result.dagster_run.tags["dagster/partition"] == "demo"

    # What fleet b's schedule requests names b's ops and b's fleet, and runs as it is.
    schedule = merged.resolve_schedule_def("b_maintenance_schedule")
    slate_b = SlateDatabasesResource(config=fleet_b)
    (request,) = schedule(
        dg.build_schedule_context(
            scheduled_execution_time=datetime(2026, 1, 2, 3, 0, tzinfo=UTC),
            resources={"b_slate_ops": slate_b},
        )
    )
    assert (
        request.tags == {"slate_ops/db": "demo", "slate_ops/fleet": "b"} and request.partition_key == "demo"
    )
    assert set(request.run_config["ops"]) == {f"b_{step}" for step in STEPS}
    dg.validate_run_config(merged.resolve_job_def("b_maintenance_job"), request.run_config)


def test_the_asset_spec_hook_renames_and_owns_and_the_checks_follow(tmp_path: Path) -> None:
    store_url = (tmp_path / "store").as_uri()
    config = SlateOpsConfig(
        databases=[
            DatabaseConfig(name="demo", store_url=store_url, path="demo"),
            DatabaseConfig(name="demo_clone", store_url=store_url, path="demo_clone", parent="demo"),
        ]
    )

    def spec(db: DatabaseConfig, default: dg.AssetSpec) -> dg.AssetSpec:
        return default.replace_attributes(
            key=dg.AssetKey(["lake", db.name]), owners=["team:storage"]
        ).merge_attributes(kinds={"slate_ops"})

    defs = build_definitions(config, hooks=Hooks(asset_spec=spec))
    dg.Definitions.validate_loadable(defs)
    specs = {s.key: s for s in defs.resolve_all_asset_specs()}
    assert set(specs) == {
        dg.AssetKey(["lake", "demo"]),
        dg.AssetKey(["lake", "demo_clone"]),
        dg.AssetKey("slate_ops_fleet_cost"),  # not a database's: the hook does not apply
    }
    clone = specs[dg.AssetKey(["lake", "demo_clone"])]
    assert clone.owners == ["team:storage"] and "slate_ops" in clone.kinds
    assert [dep.asset_key for dep in clone.deps] == [dg.AssetKey(["lake", "demo"])]
    checks = defs.resolve_asset_graph().asset_check_keys
    assert {key.asset_key for key in checks} == set(specs) - {dg.AssetKey("slate_ops_fleet_cost")}

    # Materializing, checking and maintaining all record on the hooked keys.
    created = defs.resolve_job_def("slate_ops_databases_job").execute_in_process()
    assert created.success
    assert {m.asset_key for m in created.asset_materializations_for_node("lake__demo")} == {
        dg.AssetKey(["lake", "demo"])
    }
    with_data(store_url, "demo")
    result = maintain(defs, "maintenance_job", "demo")
    assert result.success
    recorded = [e.asset_key for e in result.get_asset_materialization_events()] + [
        e.asset_key for e in result.get_asset_observation_events()
    ]
    assert recorded and set(recorded) == {dg.AssetKey(["lake", "demo"])}
    evaluations = [
        e.event_specific_data.asset_key
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    assert evaluations and set(evaluations) == {dg.AssetKey(["lake", "demo"])}


def test_the_run_step_hook_sees_every_step_of_a_maintenance_run(tmp_path: Path) -> None:
    store_url = (tmp_path / "store").as_uri()
    with_data(store_url, "demo")
    seen: list[tuple[str, str, str]] = []

    def around(call: StepCall) -> Any:
        result = call.run()
        seen.append((call.op_name, call.database, type(result).__name__))
        return result

    defs = build_definitions(fleet(store_url, "demo"), hooks=Hooks(run_step=around))
    assert maintain(defs, "maintenance_job", "demo").success
    assert [(op, db) for op, db, _ in seen] == [(step, "demo") for step in STEPS]
    assert {kind for _, _, kind in seen} == {"StepResult"}


def test_a_hook_can_refuse_a_step(tmp_path: Path) -> None:
    """An approval gate: the hook raises instead of running GC; the run fails at that step."""
    store_url = (tmp_path / "store").as_uri()
    with_data(store_url, "demo")

    def gate(call: StepCall) -> Any:
        if call.op_name == "maintenance_gc":
            raise dg.Failure(description=f"GC of {call.database} needs approval")
        return call.run()

    defs = build_definitions(fleet(store_url, "demo"), hooks=Hooks(run_step=gate))
    job = defs.resolve_job_def("maintenance_job")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("slate_ops_databases", ["demo"])
    result = job.execute_in_process(
        run_config=maintenance_run_config(dry_run=False),
        partition_key="demo",
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "maintenance_gc"
    assert "needs approval" in str(failure.event_specific_data.error.message)


def test_a_subset_of_jobs_schedules_and_sensors(tmp_path: Path) -> None:
    config = fleet((tmp_path / "store").as_uri(), "demo")
    defs = build_definitions(config, jobs=["maintenance_job"], prefix="p_")
    repository = defs.get_repository_def()
    assert {j.name for j in repository.get_all_jobs()} - {"__ASSET_JOB"} == {"p_maintenance_job"}
    assert {s.name for s in repository.schedule_defs} == {"p_maintenance_schedule"}
    assert {s.name for s in repository.sensor_defs} == {"p_slate_ops_partitions_sensor"}
    none = build_definitions(config, jobs=["compaction_job"], schedules=[], sensors=[])
    assert not none.get_repository_def().schedule_defs and not none.get_repository_def().sensor_defs


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"jobs": ["maintenance"]}, "unknown slate_ops job name.*'maintenance'.*valid.*maintenance_job"),
        ({"schedules": ["nightly"]}, "unknown slate_ops schedule.*maintenance_schedule"),
        ({"sensors": ["slate_ops_manifest"]}, "unknown slate_ops sensor.*slate_ops_manifest_sensor"),
        ({"jobs": ["gc_job"], "schedules": ["maintenance_schedule"]}, "targets maintenance_job"),
        ({"jobs": "gc_job"}, "a list of names"),
        ({"prefix": "eu-"}, "prefix 'eu-'"),
    ],
)
def test_bad_arguments_are_config_errors(tmp_path: Path, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_definitions(fleet((tmp_path / "store").as_uri(), "demo"), **arguments)


def test_bad_resource_keys_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="both 'same'"):
        ResourceKeys(slate="same", pyspark="same")
    with pytest.raises(ConfigError, match="not a Dagster name"):
        ResourceKeys(slate="slate-ops")


@pytest.mark.e2e  # builds and installs the wheel (~8 s): CI's second step
@pytest.mark.slow
def test_the_wheel_installs_nothing_at_the_top_level_but_slate_ops(tmp_path: Path) -> None:
    """``pip wheel`` of a copy of the tree (so the build leaves nothing in the checkout): its top-level
    entries are ``slate_ops`` and its dist-info, not the repository's ``definitions`` or ``jobs``."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "definitions.py", "workspace.yaml"):
        shutil.copy(REPO / name, source / name)
    for name in ("slate_ops", "jobs"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", ".", "-w", str(tmp_path / "wheel")],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = glob.glob(str(tmp_path / "wheel" / "slate_ops-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"slate_ops"}, sorted(top)
    assert "slate_ops/orchestration/definitions.py" in names
    assert "slate_ops/orchestration/default_databases.yaml" in names
