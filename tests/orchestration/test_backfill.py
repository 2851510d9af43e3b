"""A real backfill: 200 databases discovered under a prefix become partitions (synced by
``python -m slate_ops.orchestration partitions``), and ``dagster job backfill`` launches
``maintenance_job`` over 20 of them through Dagster's own backfill path (a ``PartitionBackfill``,
one run per partition, each submitted to the instance's run launcher).

The instance launches runs synchronously in the backfill command's process (Dagster's
``SyncInMemoryRunLauncher``), so the test needs no daemon; with ``dg dev`` running, the same
command queues the runs for the daemon (docs/orchestration.md, "Discovery and partitions").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.objstore import open_store
from slate_ops.orchestration.runs import PARTITIONS_NAME

# End to end (the `dagster` CLI backfills 20 runs in a subprocess, ~30 s): in CI's second step.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
COUNT = 200
DAGSTER_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: DefaultRunCoordinator
run_launcher:
  module: dagster._core.launcher.sync_in_memory_run_launcher
  class: SyncInMemoryRunLauncher
"""


def _names(n: int) -> list[str]:
    return [f"db_{i:03d}" for i in range(n)]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_a_backfill_of_maintenance_job_over_20_of_200_discovered_databases(tmp_path: Path) -> None:
    url = (tmp_path / "store").as_uri()
    store = open_store(url)
    for name in _names(COUNT):
        admin.create_db(f"fleet/{name}", store)
    before = {name: admin.read_manifest(f"fleet/{name}", store).id for name in _names(COUNT)}
    config = tmp_path / "fleet.yaml"
    config.write_text(f"discover: {{store_url: '{url}', prefix: fleet}}\n")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = {**os.environ, "DAGSTER_HOME": str(home), "SLATE_OPS_CONFIG": str(config)}

    synced = _run([sys.executable, "-m", "slate_ops.orchestration", "partitions"], env)
    assert f"{PARTITIONS_NAME}: {COUNT} partition(s)" in synced.stdout

    chosen = _names(COUNT)[100:120]
    backfill = [DAGSTER, "job", "backfill", "-w", "workspace.yaml", "-j", "maintenance_job"]
    _run([*backfill, "--partitions", ",".join(chosen), "--noprompt"], env)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (record,) = instance.get_backfills()
        assert sorted(record.partition_names or []) == chosen
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": record.backfill_id}))
        assert sorted(run.tags["dagster/partition"] for run in runs) == chosen
        failed = {
            run.tags["dagster/partition"]: run.status
            for run in runs
            if run.status != dg.DagsterRunStatus.SUCCESS
        }
        assert not failed, [
            (e.message, e.dagster_event and e.dagster_event.event_specific_data)
            for e in instance.all_logs(runs[0].run_id)
        ][-8:]
        assert all("slate_ops/db" not in run.tags for run in runs)  # the partition names the database
        # Each run maintained its own partition's database: the GC step's report names it.
        for run in runs:
            outputs = [
                entry.dagster_event
                for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_OUTPUT)
                if entry.dagster_event is not None and entry.dagster_event.step_key == "maintenance_gc"
            ]
            (output,) = outputs
            metadata = output.step_output_data.metadata
            assert metadata["database"].value == run.tags["dagster/partition"]
    # A backfill launched with the defaults is a dry run: no database changed.
    assert {name: admin.read_manifest(f"fleet/{name}", store).id for name in _names(COUNT)} == before
