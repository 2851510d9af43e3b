"""The code location as Dagster loads it: Definitions, definitions.py, workspace.yaml, the demo, docs."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.objstore import open_store
from slate_ops.orchestration import SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.naming import PARTITIONS_NAME
from slate_ops.orchestration.resources import PYSPARK_RESOURCE_KEY, RESOURCE_KEY

REPO = Path(__file__).resolve().parents[2]
DG = str(Path(sys.executable).with_name("dg"))


def test_definitions_load_and_hold_everything(defs: dg.Definitions, config: SlateOpsConfig) -> None:
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def("checkpoint_expiry_job").name == "checkpoint_expiry_job"
    assert defs.resolve_job_def("slate_ops_databases_job") is not None
    sensor = defs.resolve_sensor_def("slate_ops_manifest_sensor")
    assert sensor.job_name == "checkpoint_expiry_job"
    assert sensor.minimum_interval_seconds == 30
    schedule = defs.resolve_schedule_def("checkpoint_expiry_schedule")
    assert (schedule.job_name, schedule.cron_schedule) == ("checkpoint_expiry_job", "0 * * * *")
    specs = {spec.key: spec for spec in defs.resolve_all_asset_specs()}
    assert set(specs) == {
        dg.AssetKey(["slate_ops", "alpha"]),
        dg.AssetKey(["slate_ops", "beta"]),
        dg.AssetKey("slate_ops_fleet_cost"),
    }
    assert {spec.group_name for spec in specs.values()} == {"slate_ops"}
    assert defs.resources is not None
    resource = defs.resources[RESOURCE_KEY]
    assert isinstance(resource, SlateDatabasesResource)
    assert resource.config == config


def test_databases_job_creates_every_database(defs: dg.Definitions, store_url: str) -> None:
    result = defs.resolve_job_def("slate_ops_databases_job").execute_in_process()
    assert result.success
    store = open_store(store_url)
    assert admin.read_manifest("dbs/alpha", store).id == 1
    assert admin.read_manifest("dbs/beta", store).id == 1


def test_each_domain_keeps_its_jobs_schedules_and_sensors_together() -> None:
    import jobs
    from slate_ops.orchestration.builder import DOMAINS
    from slate_ops.orchestration.naming import DEFAULT

    built = [build(DEFAULT) for build in DOMAINS]
    domains = {
        frozenset(j.name for j in d.jobs.values()): (
            {s.name: s.job_name for s in d.schedules.values()},
            {s.name: s.job_name if s.targets else None for s in d.sensors.values()},
        )
        for d in built
    }
    assert domains == {
        frozenset({"maintenance_job"}): ({"maintenance_schedule": "maintenance_job"}, {}),
        frozenset({"checkpoint_expiry_job"}): (
            {"checkpoint_expiry_schedule": "checkpoint_expiry_job"},
            {"slate_ops_manifest_sensor": "checkpoint_expiry_job"},
        ),
        frozenset({"compaction_job"}): (
            {"compaction_schedule": "compaction_job"},
            {"slate_ops_compaction_sensor": "compaction_job"},
        ),
        frozenset({"clone_job"}): ({}, {}),
        frozenset({"gc_job"}): ({"gc_schedule": "gc_job"}, {}),
        frozenset({"rescale_job"}): ({}, {}),
        frozenset({"tag_policy_job"}): ({"tag_policy_schedule": "tag_policy_job"}, {}),
        frozenset(): ({}, {"slate_ops_partitions_sensor": None}),
    }
    assert [j.name for j in jobs.ALL_JOBS] == [j.name for d in built for j in d.jobs.values()]


def test_the_code_location_keeps_every_name(defs: dg.Definitions) -> None:
    repository = defs.get_repository_def()
    assert {j.name for j in repository.get_all_jobs()} - {"__ASSET_JOB"} == {
        "slate_ops_databases_job",
        "maintenance_job",
        "checkpoint_expiry_job",
        "compaction_job",
        "clone_job",
        "gc_job",
        "rescale_job",
        "tag_policy_job",
    }
    assert {s.name for s in repository.schedule_defs} == {
        "maintenance_schedule",
        "checkpoint_expiry_schedule",
        "compaction_schedule",
        "gc_schedule",
        "tag_policy_schedule",
    }
    assert {s.name for s in repository.sensor_defs} == {
        "slate_ops_manifest_sensor",
        "slate_ops_compaction_sensor",
        "slate_ops_partitions_sensor",
    }
    resources = set(repository.get_top_level_resources())
    assert resources == {RESOURCE_KEY, PYSPARK_RESOURCE_KEY} == {"slate_ops", "slate_ops_pyspark"}


def test_definitions_module_reads_slate_ops_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "databases.yaml"
    path.write_text("databases:\n  - {name: from_env, store_url: 'memory://defs-env', path: p}\n")
    monkeypatch.setenv("SLATE_OPS_CONFIG", str(path))
    import slate_ops.orchestration.definitions as location

    module = importlib.reload(location)
    assert sorted(spec.key.path for spec in module.defs.resolve_all_asset_specs()) == [
        ["slate_ops", "from_env"],
        ["slate_ops_fleet_cost"],
    ]
    monkeypatch.delenv("SLATE_OPS_CONFIG")
    importlib.reload(location)  # the next test sees the module as loaded from the default config


def cli(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``dg <args>`` from the repository root ([tool.dg] in pyproject.toml names the code location)."""
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").touch()
    environ = {**os.environ, "DAGSTER_HOME": str(home), **env}
    done = subprocess.run(
        [DG, *args], cwd=REPO, env=environ, capture_output=True, text=True, timeout=180, check=False
    )
    assert "SupersessionWarning" not in done.stdout + done.stderr
    return done


@pytest.mark.e2e  # dg in a subprocess (~10 s; .ci/test also runs `dg check defs`): CI's second step
@pytest.mark.slow
def test_dg_check_defs_loads_the_repositorys_code_location(tmp_path: Path) -> None:
    ok = cli(["check", "defs"], tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "All definitions loaded successfully." in ok.stdout


@pytest.mark.e2e  # the demo's commands in subprocesses (~20 s): CI's second step
@pytest.mark.slow
def test_demo_commands_on_the_embedded_default(tmp_path: Path) -> None:
    """The commands of docs/orchestration.md, with the default config (demo, its clone and shards)."""
    store = tmp_path / "store"
    env = {"SLATE_OPS_STORE": store.as_uri()}
    created = cli(["launch", "--job", "slate_ops_databases_job"], tmp_path, **env)
    assert created.returncode == 0, created.stdout + created.stderr
    assert (store / "demo" / "manifest" / "00000000000000000001.manifest").is_file()
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["demo"])
    expiry = cli(["launch", "--job", "checkpoint_expiry_job", "--partition", "demo"], tmp_path, **env)
    output = expiry.stdout + expiry.stderr
    assert expiry.returncode == 0, output
    # Manifest 4: creating the clone demo_clone added its source checkpoint to demo, then its final
    # checkpoint, then dropped the source checkpoint.
    assert "demo: would remove 0 expired checkpoint(s) at manifest 4" in output
    assert (store / "demo_clone" / "manifest").is_dir() and not (store / "demo_low").exists()
    assert "RUN_SUCCESS" in output
