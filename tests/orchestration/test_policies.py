"""Policies honoured by every step that can act on them (issue 19, "Policies honoured"), through
Dagster's real APIs: ``execute_in_process`` of the jobs, and the schedules' run requests.

The GC's checkpoint task expires checkpoints too. On main before the fix, a database with
``checkpoints.expiry_dry_run: true`` but real GC had its expired checkpoints removed by the
maintenance job's GC step, by ``gc_job`` and by ``gc_schedule``'s runs, although its checkpoint
expiry step only reported them. docs/orchestration.md has the table of policy → steps.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pytest

from jobs import checkpoint_expiry_job, gc_job, gc_schedule, maintenance_job
from slate_ops import Db, admin
from slate_ops.gc import GcReport
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import (
    DatabaseConfig,
    SlateDatabasesResource,
    SlateOpsConfig,
    local_pyspark_resource,
)
from slate_ops.orchestration.checkpoints import expiry_run_config
from slate_ops.orchestration.config import CheckpointPolicy, GcPolicy
from slate_ops.orchestration.gc import EXPIRY_SKIPPED
from slate_ops.orchestration.maintenance import maintenance_run_config
from slate_ops.orchestration.resources import PYSPARK_RESOURCE_KEY, RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA, add_checkpoint

DAY = 86_400.0
KEEPS = {"slate_ops/db": "keeps"}
"""The database whose checkpoint expiry is report-only while its GC is real."""


@pytest.fixture
def policies(store_url: str) -> SlateOpsConfig:
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(
                name="keeps",
                store_url=store_url,
                path=ALPHA,
                checkpoints=CheckpointPolicy(expiry_dry_run=True),
                gc=GcPolicy(dry_run=False, interval_hours=1),
            ),
            DatabaseConfig(name="expires", store_url=store_url, path=BETA, gc=GcPolicy(interval_hours=1)),
        ]
    )


@pytest.fixture
def expired_fleet(fleet_store: ObjectStore, policies: SlateOpsConfig) -> SlateDatabasesResource:
    """Both databases with garbage and a checkpoint that expired an hour before the clock's now."""
    clock = ManualRuntime(time.time())
    for path in (ALPHA, BETA):
        for round_ in range(3):
            with Db.open(path, fleet_store) as db:
                for i in range(20):
                    db.put(b"k%02d" % i, b"v%d" % round_)
                db.flush()
                db.flush_memtable()
        add_checkpoint(fleet_store, path, clock, "1h", "short-lived")
    clock.advance(DAY)
    return SlateDatabasesResource(config=policies).with_clock(clock)


def short_lived(store: ObjectStore, path: str) -> int:
    return [c.name for c in admin.read_manifest(path, store).value.checkpoints].count("short-lived")


def gc_report(result: dg.ExecuteInProcessResult, node: str) -> GcReport:
    report = result.output_for_node(node)
    assert isinstance(report, GcReport)
    return report


def test_maintenance_gc_step_does_not_expire_what_the_policy_keeps(
    expired_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    result = maintenance_job.execute_in_process(
        run_config=maintenance_run_config(dry_run=False),
        tags=KEEPS,
        resources={RESOURCE_KEY: expired_fleet, PYSPARK_RESOURCE_KEY: local_pyspark_resource()},
    )
    assert result.success
    gc = gc_report(result, "maintenance_gc")
    assert not gc.dry_run and gc.deleted_keys()  # the GC itself ran for real
    assert gc.checkpoints_expired == ()
    assert short_lived(fleet_store, ALPHA) == 1
    (event,) = [
        e for e in result.all_node_events if e.is_successful_output and e.step_key == "maintenance_gc"
    ]
    metadata = event.step_output_data.metadata
    assert metadata["checkpoint_expiry"].value == EXPIRY_SKIPPED
    assert EXPIRY_SKIPPED in str(metadata["step_summary"].value)


@pytest.mark.parametrize("resources", [["all"], ["checkpoints"], ["checkpoints", "wal"]])
def test_gc_job_does_not_expire_what_the_policy_keeps(
    expired_fleet: SlateDatabasesResource, fleet_store: ObjectStore, resources: list[str]
) -> None:
    config: dict[str, Any] = {"dry_run": False, "resources": resources}
    result = gc_job.execute_in_process(
        run_config={"ops": {"gc_op": {"config": config}}}, tags=KEEPS, resources={RESOURCE_KEY: expired_fleet}
    )
    assert result.success
    report = gc_report(result, "gc_op")
    assert short_lived(fleet_store, ALPHA) == 1
    if resources == ["checkpoints"]:  # that task alone becomes a dry run: it reports what it would expire
        assert report.dry_run and len(report.checkpoints_expired) == 1
    else:
        assert not report.dry_run and report.checkpoints_expired == ()


def test_gc_schedule_runs_honour_the_policy_of_each_database(
    expired_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime(2024, 1, 2, 6, 0, tzinfo=UTC),
        resources={RESOURCE_KEY: expired_fleet},
    )
    requests = gc_schedule(context)
    assert isinstance(requests, list) and len(requests) == 2
    for request in requests:
        result = gc_job.execute_in_process(
            run_config=request.run_config, tags=request.tags, resources={RESOURCE_KEY: expired_fleet}
        )
        assert result.success and not gc_report(result, "gc_op").dry_run
    assert short_lived(fleet_store, ALPHA) == 1  # keeps: expiry report-only
    assert short_lived(fleet_store, BETA) == 0  # expires: the GC's checkpoint task removed it


def test_the_expiry_job_itself_still_reports_only(
    expired_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    """The step the policy was written for, for comparison: an automated (policy) run reports."""
    result = checkpoint_expiry_job.execute_in_process(
        run_config=expiry_run_config("keeps", dry_run=True),
        tags=KEEPS,
        resources={RESOURCE_KEY: expired_fleet},
    )
    assert result.success and short_lived(fleet_store, ALPHA) == 1
