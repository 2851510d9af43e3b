"""The demo's command-line tools on a real Dagster instance: ``python -m
slate_ops.orchestration partitions`` (refuses without a fleet config; labels command-line partition
runs with their code location) and ``python -m slate_ops.orchestration summary`` (one summary per
maintained database)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from slate_ops import Db
from slate_ops.objstore import open_store
from slate_ops.orchestration import DatabaseConfig, SlateOpsConfig, build_definitions
from slate_ops.orchestration.maintenance import MAINTENANCE_JOB, maintenance_run_config
from slate_ops.orchestration.partitions import REPOSITORY_LABEL_TAG, label_command_line_runs
from slate_ops.orchestration.runs import PARTITIONS_NAME
from slate_ops.orchestration.summary import main as summary_main
from slate_ops.orchestration.summary import maintained_databases

# End to end (each test runs the demo's commands in a subprocess, ~5 s each): in CI's second step.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEMO_FLEET = ["demo", "demo_clone", "demo_low", "demo_high"]  # the embedded default config


def partitions_cli(home: Path, *args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    env.pop("SLATE_OPS_CONFIG", None)
    if config is not None:
        env["SLATE_OPS_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "slate_ops.orchestration", "partitions", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


def partitions_of(home: Path) -> list[str]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return list(instance.get_dynamic_partitions(PARTITIONS_NAME))


def test_partitions_refuses_without_a_fleet_config(home: Path) -> None:
    done = partitions_cli(home)
    assert done.returncode == 2, done
    assert "no fleet config: pass --config FILE or set $SLATE_OPS_CONFIG" in done.stderr
    assert "--demo" in done.stderr and "Traceback" not in done.stderr
    assert partitions_of(home) == []  # nothing written into the instance


def test_partitions_takes_the_demo_fleet_only_when_asked(home: Path, tmp_path: Path) -> None:
    done = partitions_cli(home, "--demo")
    assert done.returncode == 0, done.stderr
    assert f"{PARTITIONS_NAME}: 4 partition(s); added {', '.join(DEMO_FLEET)}; removed none" in done.stdout
    assert partitions_of(home) == DEMO_FLEET
    assert "Warning" not in done.stderr  # one entry point: no module run twice (RuntimeWarning)
    config = tmp_path / "fleet.yaml"
    config.write_text("databases:\n  - {name: orders, path: orders}\n")
    both = partitions_cli(home, "--demo", config=config)  # --demo and a fleet config: which one?
    assert both.returncode == 2 and "--demo uses the embedded demo fleet" in both.stderr
    assert partitions_of(home) == DEMO_FLEET


@pytest.mark.parametrize("how", ["--config", "$SLATE_OPS_CONFIG"])
def test_partitions_syncs_the_fleet_config(home: Path, tmp_path: Path, how: str) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text("databases:\n  - {name: orders, path: orders}\n  - {name: users, path: users}\n")
    done = (
        partitions_cli(home, "--config", str(config))
        if how == "--config"
        else partitions_cli(home, config=config)
    )
    assert done.returncode == 0, done.stderr
    assert partitions_of(home) == ["orders", "users"]


def maintained_fleet(tmp_path: Path, instance: dg.DagsterInstance, names: list[str]) -> None:
    """``names`` created, made partitions and maintained (for real) by maintenance_job."""
    url = (tmp_path / "store").as_uri()
    for name in names:
        with Db.open(name, open_store(url)) as db:
            db.put(b"k", b"v")
            db.flush_memtable()
    defs = build_definitions(
        SlateOpsConfig(databases=[DatabaseConfig(name=name, store_url=url, path=name) for name in names])
    )
    instance.add_dynamic_partitions(PARTITIONS_NAME, names)
    for name in reversed(names):
        result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
            run_config=maintenance_run_config(dry_run=False), partition_key=name, instance=instance
        )
        assert result.success


def test_command_line_partition_runs_get_the_code_location_label(tmp_path: Path) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        maintained_fleet(tmp_path, instance, ["alpha", "beta"])
        runs = instance.get_runs()
        assert all(REPOSITORY_LABEL_TAG not in run.tags for run in runs)
        assert all(run.tags["dagster/partition_set"] == "maintenance_job_partition_set" for run in runs)
        assert label_command_line_runs(instance, "slate_ops", ["alpha"]) == 1  # only the partitions named
        assert label_command_line_runs(instance, "elsewhere", ["alpha", "beta"]) == 1  # a label stays
        labels = {
            run.tags["dagster/partition"]: run.tags[REPOSITORY_LABEL_TAG] for run in instance.get_runs()
        }
    assert labels == {"alpha": "__repository__@slate_ops", "beta": "__repository__@elsewhere"}


def test_summary_prints_one_summary_per_maintained_database(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["alpha", "beta", "gamma"]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        maintained_fleet(tmp_path, instance, names)
        assert maintained_databases(instance) == names  # the partitions' order, not the runs'
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert summary_main(["--all"]) == 0
    blocks = capsys.readouterr().out.strip().split("\n\n")
    assert [block.splitlines()[0].split(" (run")[0] for block in blocks] == [
        f"{MAINTENANCE_JOB} of {name}" for name in names
    ]
    assert all(block.splitlines()[0].endswith("real run): SUCCESS") for block in blocks)
    assert all(len(block.splitlines()) == 5 for block in blocks)  # the run's line and its 4 steps
    assert summary_main(["gamma", "alpha"]) == 0
    out = capsys.readouterr().out
    assert out.index("of gamma") < out.index("of alpha") and "of beta" not in out
    with pytest.raises(SystemExit) as exit_:
        summary_main([])
    assert exit_.value.code == 2
    assert "name one or more databases, or pass --all" in capsys.readouterr().err


def test_the_entry_point_names_its_commands(home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slate_ops.orchestration", "partition"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown command 'partition'; choose one of: partitions, summary" in done.stderr
