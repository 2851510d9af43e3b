"""Garbage collection in Dagster: the job (dry run by default), its metadata, failures, the schedule."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pytest

from jobs import gc_job, gc_schedule
from slate_ops import Db
from slate_ops.errors import ObjectStoreError
from slate_ops.gc import GcReport
from slate_ops.objstore import MemoryStore, ObjectStore
from slate_ops.orchestration import GC_JOB, DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.config import GcPolicy
from slate_ops.orchestration.gc import gc_op
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, op_metadata, run_op
from tests.support.stores import snapshot

ALPHA_TAGS = {"slate_ops/db": "alpha"}


@pytest.fixture
def aged(created: ObjectStore, config: SlateOpsConfig) -> SlateDatabasesResource:
    """alpha with garbage in the WAL, compacted and manifest namespaces; a clock a day ahead, so
    everything in the store is a day old."""
    for round_ in range(3):
        with Db.open(ALPHA, created) as db:
            for i in range(20):
                db.put(b"k%02d" % i, b"v%d" % round_)
            db.flush()
            db.flush_memtable()
    return SlateDatabasesResource(config=config).with_clock(ManualRuntime(time.time() + 86_400))


def run(
    slate: SlateDatabasesResource, config: dict[str, Any] | None = None, tags: dict[str, str] | None = None
) -> dg.ExecuteInProcessResult:
    return run_op(gc_job, "gc_op", slate, config, ALPHA_TAGS if tags is None else tags)


def test_dry_run_is_the_default_and_reports_tables_per_resource(
    aged: SlateDatabasesResource, created: ObjectStore
) -> None:
    before = snapshot(created)
    result = run(aged)
    assert result.success
    assert snapshot(created) == before
    report = result.output_for_node("gc_op")
    assert isinstance(report, GcReport) and report.dry_run and report.deleted_keys()
    metadata = op_metadata(result)
    assert (metadata["database"], metadata["dry_run"], metadata["errors"]) == ("alpha", True, 0)
    assert metadata["deleted_objects"] == len(report.deleted_keys())
    summary = str(metadata["summary"])
    assert "| resource | would delete | bytes | listed | boundary | errors |" in summary
    for resource in report.resources:
        table = str(metadata[f"{resource.resource}_objects"])
        assert table.startswith(f"Would delete {resource.count} object(s)")
        assert all(f"`{d.key}`" in table for d in resource.deleted)
    assert {"checks", "advance_attempts", "stale_writes_rejected"} <= set(metadata["boundary_metrics"])


def test_real_run_deletes_what_the_dry_run_reported(
    aged: SlateDatabasesResource, created: ObjectStore
) -> None:
    dry = run(aged).output_for_node("gc_op")
    result = run(aged, {"dry_run": False})
    assert result.success
    real = result.output_for_node("gc_op")
    assert not real.dry_run and real.deleted_keys() == dry.deleted_keys()
    assert not real.deleted_keys() & set(snapshot(created))
    assert str(op_metadata(result)["summary"]).startswith(f"GC of manifest {real.manifest_id}:")


def test_min_ages_and_resources_come_from_the_config(aged: SlateDatabasesResource) -> None:
    result = run(aged, {"resources": ["wal", "manifest"], "manifest_min_age": "2days"})
    assert result.success
    report = result.output_for_node("gc_op")
    assert [r.resource for r in report.resources] == ["manifest", "wal"]
    assert report.resource("manifest").count == 0 and report.resource("wal").count > 0

    refused = run(aged, {"wal_min_age": "30s"})
    assert not refused.success
    failure = refused.failure_data_for_node("gc_op")
    assert failure is not None and "below the floor" in str(failure.error)


def test_database_comes_from_the_tag_and_must_agree(aged: SlateDatabasesResource) -> None:
    assert run(aged, {"database": "alpha"}).success
    mismatch = run(aged, {"database": "alpha"}, {"slate_ops/db": "beta"})
    assert not mismatch.success
    assert "must agree" in str(mismatch.failure_data_for_node("gc_op").error)  # type: ignore[union-attr]


def test_gc_errors_fail_the_run_with_the_report_as_metadata(
    aged: SlateDatabasesResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_delete = MemoryStore.delete

    def failing_delete(self: MemoryStore, key: str) -> None:
        if "/wal/" in key:
            raise ObjectStoreError(f"injected: cannot delete {key}", key)
        real_delete(self, key)

    monkeypatch.setattr(MemoryStore, "delete", failing_delete)
    result = run(aged, {"dry_run": False})
    assert not result.success
    (failure_event,) = [e for e in result.all_node_events if e.is_step_failure]
    failure = failure_event.step_failure_data
    assert "injected: cannot delete" in failure.user_failure_data.description  # type: ignore[union-attr]
    metadata = {k: v.value for k, v in failure.user_failure_data.metadata.items()}  # type: ignore[union-attr]
    assert metadata["errors"] > 0 and "**error**" in str(metadata["messages"])
    assert "Deleted" in str(metadata["compacted_objects"])


def test_op_invoked_directly(aged: SlateDatabasesResource) -> None:
    context = dg.build_op_context(resources={RESOURCE_KEY: aged}, op_config={"database": "alpha"})
    output = gc_op(context)
    assert isinstance(output, dg.Output) and output.value.dry_run


def test_schedule_requests_one_tagged_real_run_per_existing_database(
    aged: SlateDatabasesResource, config: SlateOpsConfig, fleet_store: ObjectStore
) -> None:
    when = datetime(2024, 1, 2, 6, 0, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: aged})
    requests = gc_schedule(context)
    assert isinstance(requests, list)
    assert [(r.run_key, r.tags) for r in requests] == [
        ("gc-alpha-20240102T0600Z", {"slate_ops/db": "alpha"}),
        ("gc-beta-20240102T0600Z", {"slate_ops/db": "beta"}),
    ]
    assert requests[0].run_config == {"ops": {"gc_op": {"config": {"database": "alpha", "dry_run": False}}}}
    result = gc_job.execute_in_process(
        run_config=requests[0].run_config, tags=requests[0].tags, resources={RESOURCE_KEY: aged}
    )
    assert result.success and result.output_for_node("gc_op").deleted_keys()


def test_schedule_skips_databases_that_do_not_exist(config: SlateOpsConfig, clock: ManualRuntime) -> None:
    slate = SlateDatabasesResource(config=config).with_clock(clock)  # nothing created
    when = datetime(2024, 1, 2, 6, 0, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    skip = gc_schedule(context)
    assert isinstance(skip, dg.SkipReason) and "alpha" in str(skip.skip_message)


def test_definitions_hold_the_job_and_schedule(defs: dg.Definitions) -> None:
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def(GC_JOB).name == "gc_job"
    schedule = defs.resolve_schedule_def("gc_schedule")
    assert (schedule.job_name, schedule.cron_schedule) == ("gc_job", "0 * * * *")


def test_schedule_follows_each_database_gc_policy(aged: SlateDatabasesResource, store_url: str) -> None:
    """alpha: the default policy (every 6 hours, real); beta: every 12 hours, dry runs only."""
    alpha, beta = aged.config.databases
    beta = DatabaseConfig(
        name=beta.name, store_url=store_url, path=beta.path, gc=GcPolicy(interval_hours=12, dry_run=True)
    )
    slate = SlateDatabasesResource(config=SlateOpsConfig(databases=[alpha, beta]))

    def tick(hour: int) -> list[dg.RunRequest] | dg.SkipReason:
        when = datetime(2024, 1, 2, hour, 0, tzinfo=UTC)
        return gc_schedule(
            dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
        )

    six = tick(6)
    assert isinstance(six, list) and [r.tags for r in six] == [{"slate_ops/db": "alpha"}]
    noon = tick(12)
    assert isinstance(noon, list)
    dry_runs = {r.tags["slate_ops/db"]: r.run_config["ops"]["gc_op"]["config"]["dry_run"] for r in noon}
    assert dry_runs == {"alpha": False, "beta": True}
    seven = tick(7)
    assert isinstance(seven, dg.SkipReason) and "07:00 UTC" in str(seven.skip_message)


def test_min_ages_default_to_the_database_policy(aged: SlateDatabasesResource, store_url: str) -> None:
    alpha = aged.config.databases[0]
    patient = DatabaseConfig(
        name="alpha", store_url=store_url, path=alpha.path, gc=GcPolicy(wal_min_age="3days")
    )
    slate = SlateDatabasesResource(config=SlateOpsConfig(databases=[patient])).with_clock(aged.clock())
    report = run(slate).output_for_node("gc_op")
    wal = {r.resource: r for r in report.resources}["wal"]
    assert wal.count == 0  # a day old: younger than the policy's 3 days
    overridden = run(slate, {"wal_min_age": "1h"}).output_for_node("gc_op")
    assert {r.resource: r for r in overridden.resources}["wal"].count > 0
