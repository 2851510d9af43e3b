"""A user's own Dagster project, made in tmp_path the way a user would, with slate_ops added once
through the Component YAML (``dg scaffold defs slate_ops.orchestration.FleetComponent``) and once
through the Pythonic entry point (``build_definitions``); the real ``dg`` command checks it, lists
its definitions and launches one maintenance partition run.

The project has its own ``definitions.py`` (its own job, and its own resource under the common key
``pyspark``), its own ``pyproject.toml`` with ``[tool.dg]``, a local store and a ``DAGSTER_HOME`` in
tmp_path. It runs on the repository's ``.venv`` (dg loads a project without a ``.venv`` of its own
in dg's own interpreter), so it needs no environment of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from slate_ops import Db, admin
from slate_ops.objstore import open_store
from slate_ops.orchestration.naming import PARTITIONS_NAME

# The real dg command on scratch projects (about half a minute): not in the default run; .ci/test
# runs `pytest -m "cluster or e2e"` after it.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DG = str(Path(sys.executable).with_name("dg"))
USER_JOBS = {"cleanup_job", "report_job"}
SLATE_JOBS = {
    "maintenance_job",
    "checkpoint_expiry_job",
    "compaction_job",
    "clone_job",
    "gc_job",
    "rescale_job",
    "tag_policy_job",
    "slate_ops_databases_job",
}

PYPROJECT = """\
[project]
name = "user-project"
version = "0.1.0"
dependencies = ["dagster", "dagster-pyspark", "slate_ops"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "user_project"

[tool.dg.cli]
telemetry = { enabled = false }
"""

USER_DEFINITIONS = '''\
"""The user's own code location: its own job, asset and `pyspark` resource{extra_doc}."""

from pathlib import Path

import dagster as dg
from dagster_pyspark import LazyPySparkResource
{extra_imports}

@dg.op
def say_hello(context: dg.OpExecutionContext) -> None:
    context.log.info("hello from the user's project")


@dg.job
def cleanup_job() -> None:
    say_hello()


@dg.asset
def orders_report(pyspark: LazyPySparkResource) -> None:
    """Uses the project's own Spark resource (not launched here)."""


report_job = dg.define_asset_job("report_job", selection=[orders_report])


@dg.definitions
def defs() -> dg.Definitions:
    user = dg.Definitions(
        assets=[orders_report],
        jobs=[cleanup_job, report_job],
        resources={{"pyspark": LazyPySparkResource(spark_config={{"spark.app.name": "user_project"}})}},
    )
    return dg.Definitions.merge(user, {slate_ops})
'''

COMPONENT_WAY = "dg.load_from_defs_folder(path_within_project=Path(__file__).parent)"
PYTHON_WAY = "build_definitions(load_config(str(Path(__file__).parent / 'fleet.yaml')))"


def _dg(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    env.pop("SLATE_OPS_CONFIG", None)
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [DG, *args], cwd=project, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"dg {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "SupersessionWarning" not in done.stdout + done.stderr
    return done


def _project(tmp_path: Path, python_way: bool) -> tuple[Path, Path]:
    project = tmp_path / "user-project"
    package = project / "user_project"
    (package / "defs").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(
        USER_DEFINITIONS.format(
            extra_doc=", and slate_ops' fleet through build_definitions" if python_way else "",
            extra_imports=(
                "\nfrom slate_ops.orchestration import build_definitions, load_config\n" if python_way else ""
            ),
            slate_ops=PYTHON_WAY if python_way else COMPONENT_WAY,
        )
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return project, home


def _fleet(store_url: str) -> dict[str, Any]:
    return {"databases": [{"name": "orders", "path": "orders", "store_url": store_url}]}


def _write_data(store_url: str) -> None:
    with Db.open("orders", open_store(store_url)) as db:
        for round_ in range(4):
            for i in range(50):
                db.put(b"k%03d" % i, b"v%d" % round_)
            db.flush_memtable()


def _list_defs(project: Path, home: Path) -> dict[str, Any]:
    listed = _dg(project, home, "list", "defs", "--json")
    return json.loads(listed.stdout[listed.stdout.index("{") :])  # type: ignore[no-any-return]


def _check_list_and_launch(project: Path, home: Path, store_url: str) -> None:
    checked = _dg(project, home, "check", "defs")
    assert "All definitions loaded successfully." in checked.stdout

    listed = _list_defs(project, home)
    jobs = {job["name"] for job in listed.get("jobs", [])}
    assert jobs >= USER_JOBS | SLATE_JOBS, jobs
    assets = {asset["asset_key"] for asset in listed.get("assets", [])}
    assert {"orders_report", "slate_ops/orders"} <= assets, assets
    resources = {resource["name"]: resource["type"] for resource in listed.get("resources", [])}
    assert {"pyspark", "slate_ops", "slate_ops_pyspark"} <= set(resources), resources
    assert resources["pyspark"].endswith("LazyPySparkResource")  # the user's own, untouched
    assert resources["slate_ops"].endswith("SlateDatabasesResource")

    _write_data(store_url)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["orders"])
    real_run = {"ops": {op: {"config": {"dry_run": False}} for op in _MAINTENANCE_OPS}}
    launch = ["launch", "--job", "maintenance_job", "--partition", "orders"]
    _dg(project, home, *launch, "--config-json", json.dumps(real_run))

    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = {run.job_name: run for run in instance.get_runs()}
        maintenance = runs["maintenance_job"]
        assert maintenance.status == dg.DagsterRunStatus.SUCCESS
        assert maintenance.tags["dagster/partition"] == "orders"
        assert maintenance.tags["dagster/partition_set"] == "maintenance_job_partition_set"
    store = open_store(store_url)
    status = admin.describe_db("orders", store)
    assert (status.l0_ssts, status.sorted_runs) == (0, 1), status  # compacted for real


_MAINTENANCE_OPS = (
    "maintenance_expire_checkpoints",
    "maintenance_compact",
    "maintenance_tag_policy",
    "maintenance_gc",
)


def test_slate_ops_added_to_a_user_project_through_the_component_yaml(tmp_path: Path) -> None:
    project, home = _project(tmp_path, python_way=False)
    store_url = (tmp_path / "store").as_uri()

    components = _dg(project, home, "list", "components", "--json")
    listed = json.loads(components.stdout[components.stdout.index("{") :])["items"]
    assert "slate_ops.orchestration.FleetComponent" in {c["key"] for c in listed}

    _dg(project, home, "scaffold", "defs", "slate_ops.orchestration.FleetComponent", "slate")
    defs_yaml = project / "user_project" / "defs" / "slate" / "defs.yaml"
    scaffolded = yaml.safe_load(defs_yaml.read_text())
    assert scaffolded["type"] == "slate_ops.orchestration.FleetComponent"
    scaffolded["attributes"]["databases"] = _fleet(store_url)["databases"]
    defs_yaml.write_text(yaml.safe_dump(scaffolded))

    _check_list_and_launch(project, home, store_url)


def test_slate_ops_added_to_a_user_project_through_build_definitions(tmp_path: Path) -> None:
    project, home = _project(tmp_path, python_way=True)
    store_url = (tmp_path / "store").as_uri()
    (project / "user_project" / "fleet.yaml").write_text(yaml.safe_dump(_fleet(store_url)))
    _check_list_and_launch(project, home, store_url)


def test_resource_keys_keep_the_fleet_off_a_key_the_project_already_uses(tmp_path: Path) -> None:
    """The project binds its own Spark under ``slate_ops_pyspark`` (slate_ops' default key); the
    component's ``resource_keys`` moves the fleet's to another key, and both stay."""
    project, home = _project(tmp_path, python_way=False)
    definitions = project / "user_project" / "definitions.py"
    text = definitions.read_text()
    text = text.replace('"pyspark": LazyPySpark', '"slate_ops_pyspark": LazyPySpark')
    text = text.replace("pyspark: LazyPySparkResource", "slate_ops_pyspark: LazyPySparkResource")
    definitions.write_text(text)
    slate = project / "user_project" / "defs" / "slate"
    slate.mkdir()
    attributes = {**_fleet((tmp_path / "store").as_uri()), "resource_keys": {"pyspark": "fleet_spark"}}
    (slate / "defs.yaml").write_text(
        yaml.safe_dump({"type": "slate_ops.orchestration.FleetComponent", "attributes": attributes})
    )
    resources = {resource["name"] for resource in _list_defs(project, home).get("resources", [])}
    assert {"slate_ops_pyspark", "fleet_spark", "slate_ops"} <= resources
